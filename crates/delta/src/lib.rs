//! Delta Lake probing and maintenance for tablekeeper, on deltalake 1.1.2.
//!
//! This crate owns everything tablekeeper does to a Delta table: reading its health from the
//! log ([`Prober`]), and the maintenance operations — [`optimize`] (compaction, Z-order, purge),
//! [`vacuum`], [`checkpoint`], [`repair`] — each taking plain options, returning an [`OpReport`] for the job result, and
//! failing with a [`DeltaError`] whose [`DeltaError::class`] tells the worker what to do.
//! It depends on no other tablekeeper crate and never reads credentials from anywhere but the
//! environment.
//!
//! Layout, one folder per concern, imports flowing one way (`scripts/import-cycles.py`):
//! `probe/` (health from the log, the damage check, the erasure ledger), `rewrite/` (the one
//! optimize operation and its kinds), `retention/` (the window and VACUUM), `log/` (reading,
//! integrity, checkpoints and log cleanup, history), `watch/` (stale writes and their repair),
//! `features/` (what may be maintained), `fixtures/` (tables and peers for tests, never used by
//! maintenance); at the root what every operation shares: `open`, `prepare`, `run`, `report`,
//! `snapshot`, `error`; and `cost/`, the meter every table opened under one counts its requests
//! and CPU into.
//!
//! Safety rules every operation follows:
//! - **Cancellation**: each operation races its steps against the caller's
//!   `CancellationToken` and drops the step when the token fires. The worker cancels when it
//!   cannot renew its job lease, before another replica may take the job over. A commit already
//!   written cannot be undone; cancellation stops only work that has not committed.
//! - **One compactor per table**: deltalake 1.1.x cannot detect two compactions of the same
//!   files, so no other engine or replica may compact a table tablekeeper maintains. Every
//!   compaction and Z-order commit is checked afterwards ([`verify_rewrite_commit`]) and a
//!   violation fails loudly with [`DeltaError::DuplicateRewrite`].
//! - **Refusals**: tables using features deltalake cannot write (or, for rewrites, column
//!   mapping) are never rewritten, and vacuumed only when the feature does not govern which
//!   unreferenced files may go; catalog-managed tables are never touched
//!   ([`check_maintainable`]).
//! - **Rows**: every rewrite commit (compaction, Z-order, [`PurgeOptions`] purge) must add
//!   exactly the live rows it removed (records minus deletion vectors), else it fails loudly
//!   with [`DeltaError::RowsChanged`] and the version to restore to.
//! - **Content**: before a rewrite commits, every partition it wrote is checked against what it
//!   read (`rewrite/content.rs`): partition values exactly as the log spelled them, per column a
//!   fingerprint of the live values, and statistics that describe the rows written; a
//!   difference is [`DeltaError::ContentChanged`] and nothing is committed.
//! - **Damage**: every operation first checks that every active data file and every
//!   deletion-vector file they read is on storage ([`DeltaError::MissingDataFiles`]).
//! - **Panics**: a panic inside an operation or a probe (ours or a dependency's) is
//!   [`DeltaError::Panicked`], naming the table and operation, never an unwinding caller.
//! - **Rewrites in bounded memory**: compaction splices encoded column chunks when a bin's files
//!   qualify and decodes otherwise (`bins.rs`, `splice.rs`), its bins in parallel while they fit
//!   in the process's [`set_rewrite_memory_budget`] (Z-order reserves half of it while it runs).
//! - **VACUUM**: longest retention wins, a dry run always comes first, and its list is
//!   cross-checked against every version inside the retention window before anything is deleted.

pub mod cost;
pub mod fixtures;

mod error;
mod features;
mod log;
mod open;
mod prepare;
mod probe;
mod report;
mod retention;
mod rewrite;
mod run;
mod snapshot;
mod watch;

pub use error::{classify_delta_error, DeltaError, ErrorClass};
pub use features::maintainable::check_maintainable;
pub use features::protocol::TableProtocol;
pub use log::checkpoint::{checkpoint, CheckpointOptions, LogCleanup};
pub use log::history::CommitRecord;
pub use log::iceberg::IcebergView;
pub use log::shared_reads::{set_log_read_cache, DEFAULT_LOG_READ_CACHE};
pub use open::{open_table, register_handlers, set_storage_options, table_url};
pub use probe::drill::{
    DrillOptions, OwedVersion, RestoreDrill, RetainedBytes, DEFAULT_DRILL_EVERY,
};
pub use probe::prober::{
    ForeignCommit, HistoryBatch, Probe, ProbeHistory, ProbeOptions, Prober,
    DEFAULT_LOADED_SNAPSHOTS, DEFAULT_PRESENCE_EVERY,
};
pub use report::{
    KeptFiles, OpReport, PlannedFile, RepairPlan, RetentionDrift, TaskCommits, TaskSummary,
    MAX_REPORTED_PATHS,
};
pub use retention::keep::{Keep, Pin, PinTarget, Referrer, Standing};
pub use retention::preview::{
    preview_retention, Footprint, RetentionPreview, RetentionSettings, WindowStart,
};
pub use retention::vacuum::{vacuum, VacuumMode, VacuumOptions};
pub use retention::window::{
    effective_log_retention, effective_retention, parse_delta_interval, RETENTION_FLOOR,
};
pub use rewrite::budget::{set_rewrite_memory_budget, DEFAULT_REWRITE_MEMORY_BUDGET};
pub use rewrite::compact::{CompactOptions, DEFAULT_SMALL_FILE_FACTOR};
pub use rewrite::guard::verify_rewrite_commit;
pub use rewrite::optimize::{optimize, Optimize};
pub use rewrite::purge::PurgeOptions;
pub use rewrite::tasks::{plan_tasks, run_task, TaskInput, TaskPlan, TaskRun};
pub use rewrite::zorder::{files_added_since, FilesAddedSince, ZorderOptions};
pub use tablekeeper_vocab::{Operation, StaleKind};
pub use watch::repair::{repair, RepairOptions};
pub use watch::stale::{stale_watch_for, StaleWrite, DEFAULT_STALE_WATCH};
