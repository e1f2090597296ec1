//! The plain figures the publisher hands the metrics for one table: a leaf that both the
//! setters (`mod.rs`) and the compact rows (`table_gauges.rs`) read, so neither imports the
//! other for them.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// A table's size figures, from its latest probe (the log only, no data read).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TableFigures {
    pub files: u64,
    pub size_bytes: u64,
    pub small_files: u64,
    pub version: i64,
    pub commits_since_checkpoint: u64,
    /// From the history read: `None` until the table's history is known.
    pub commits_per_hour: Option<u64>,
    /// The average active file size is under `layout.min_average_file_size` and compaction
    /// could raise it (see `publish::average_file_size_low`).
    pub average_file_size_low: bool,
    /// Exported for tables where erasure is a question (see `publish::erasure_figures`).
    pub erasure: Option<ErasureFigures>,
    /// From the last restore drill: versions owed that cannot be restored.
    pub unrestorable_versions: u64,
    /// From the last restore drill: bytes kept only because of the window, a pin, a clone.
    pub retained_bytes: RetainedFigures,
}

/// Bytes kept on storage beyond the current version, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RetainedFigures {
    pub window: u64,
    pub pin: u64,
    pub clone: u64,
}

/// What storage still holds of deleted rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ErasureFigures {
    /// Rows deletion vectors mark deleted inside active files.
    pub deleted_rows: u64,
    /// Age of the oldest deletion whose rows storage still holds; zero when none, `None`
    /// until the table's history is known.
    pub pending: Option<Duration>,
}

/// The state of one scheduled operation on a table, as the gauges show it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct OperationFigures {
    pub last_success: Option<DateTime<Utc>>,
    pub staleness: Option<chrono::Duration>,
    /// Failed attempts since the last success, fleet-wide.
    pub consecutive_failures: i64,
}
