//! tablekeeper's inventory: the YAML list of Delta tables a platform team maintains, read,
//! defaulted and validated into a checked [`Inventory`].
//!
//! The crate owns the inventory format (DESIGN.md, "Inventory (contract)"), its built-in
//! defaults, its validation rules and its JSON Schema, and the shared vocabulary type
//! [`Operation`]. It must never touch a Delta table, the job store or the network: it turns
//! text into checked values and nothing else.
//!
//! Loading runs in passes so that every problem is reported at once:
//! 1. `tree`: each file is parsed into a tree of located YAML nodes (serde-saphyr's
//!    `Spanned` gives every node its line and column); only YAML syntax errors stop a file.
//! 2. `check`: the tree is walked against the inventory's shape into drafts, reporting
//!    unknown keys (with "did you mean"), wrong types and bad values (`values`, `schedule`).
//! 3. `load` and `build`: rules across files (one `defaults:` and one `budget:`, unique names
//!    and paths, budget owners that own tables) and across keys of one table (retention
//!    floor, Z-order columns, S3 multi-writer log store), then defaults are merged: table,
//!    then `defaults:`, then [`defaults`].
//!
//! Any problem makes the whole load fail with [`LoadError::Invalid`]; a daemon keeps its
//! last good inventory in that case.

mod budget;
mod build;
mod check;
mod compression;
pub mod defaults;
mod error;
mod keep;
mod load;
mod model;
mod raw;
mod schedule;
mod tree;
mod values;
mod walk;

use std::path::{Path, PathBuf};

pub use error::{LoadError, Problem, ScheduleError};
pub use model::{
    Budget, BudgetMode, CheckpointSpec, CompactionSpec, Importance, Inventory, Layout, LogStore,
    Operation, OverwriteWindow, Pin, PinAt, ProtocolSpec, PurgeSpec, Reader, Retention,
    RewriteOwner, SourceRef, TableSpec, Topology, VacuumSpec, Writers, ZorderSpec,
};
pub use schedule::Schedule;
pub use values::{parse_duration, parse_size};

impl Inventory {
    /// Loads an inventory from a file or a directory (every `*.yaml`/`*.yml` file directly
    /// inside it, in file-name order).
    pub fn load(path: &Path) -> Result<Inventory, LoadError> {
        load::load_paths(&[path.to_path_buf()])
    }

    /// Loads several files and directories as one inventory (`tablekeeper validate
    /// PATH...`): names and paths must be unique across all of them and only one file may
    /// hold `defaults:` (or `budget:`).
    pub fn load_paths(paths: &[PathBuf]) -> Result<Inventory, LoadError> {
        load::load_paths(paths)
    }

    /// Checks inventory text that was read elsewhere; `file` names it in problems.
    pub fn parse(file: &Path, text: &str) -> Result<Inventory, LoadError> {
        load::check_texts(&[(file.to_path_buf(), text.to_string())])
    }
}

/// The JSON Schema (draft 2020-12) of one inventory file, in either shape: `tables:` with
/// optional `defaults:` and `budget:`, or a single table. Editors use it for completion and hints;
/// `tablekeeper schema` prints it.
pub fn json_schema() -> serde_json::Value {
    raw::json_schema()
}
