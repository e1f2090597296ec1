//! The words every tablekeeper crate shares: the maintenance operations, the states and
//! outcomes of jobs, the kinds of drift, the identifiers of jobs and leases, the job-task
//! contract (what a task's input and result hold), the cost-and-outcome contract (what a
//! finished job's result says it cost and did), the Parquet compression of the files
//! tablekeeper writes, and how a column list spells a column's path.
//!
//! Each closed set is spelled here once: its variants, its string form (the one stored in
//! the job table, used in metric labels, JSON and the CLI) and its parser. The database CHECK
//! constraints in `migrations/` must list the same strings; the store's tests compare them.
//! This crate owns names only: it must never read a file, a table or a database.

mod columns;
mod compression;
mod cost;
mod ids;
mod names;
mod task;

pub use columns::{column_path, quote_path};
pub use compression::Compression;
pub use cost::{
    Cost, Outcome, RequestKind, Requests, TableFigures, PROBE_OPERATION, REQUEST_KINDS,
};
pub use ids::{JobId, Lease, TaskLease};
pub use names::{
    AttemptOutcome, Codec, DriftKind, JobState, Operation, ProbeFailureKind, StaleKind, TaskState,
    Trigger, UnknownName,
};
pub use task::{TaskOutcome, TaskSize, TaskSpec};
