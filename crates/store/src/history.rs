//! Rows of the two tables that remember what a table's log forgets: `table_commits` (every
//! commit's `commitInfo`, kept beyond the log's retention; DESIGN.md "Job table (contract)") and
//! `stale_writes` (commits planned on a snapshot older than a tablekeeper rewrite).
//!
//! Both are written by every replica's probe and coalesce in the database: a row already there
//! is kept as it is (`table_commits` rows are never updated or deleted), so what several
//! replicas record is the same whichever recorded it first.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tablekeeper_vocab::StaleKind;

/// Largest page of history one call returns.
pub const MAX_HISTORY_LIMIT: i64 = 1000;

/// Commits inserted per transaction when recording history: a first probe of a table with a
/// long log records thousands at once, and a short transaction each keeps the pool fair.
pub(crate) const HISTORY_BATCH: usize = 500;

/// One commit of a table, as `table_commits` holds it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommitRow {
    pub version: i64,
    /// Commit time.
    pub timestamp: DateTime<Utc>,
    pub operation: Option<String>,
    pub operation_parameters: Option<Value>,
    pub operation_metrics: Option<Value>,
    pub engine_info: Option<String>,
    pub user_name: Option<String>,
    pub is_blind_append: Option<bool>,
    /// Whether the commit only moved rows between files (compaction, Z-order, purge);
    /// `None` in rows recorded before this was kept.
    #[serde(default)]
    pub rewrite: Option<bool>,
    /// The tablekeeper operation that wrote it; `None` for every other writer.
    #[serde(default)]
    pub tablekeeper_operation: Option<String>,
}

/// Rewrites of one table by engines other than tablekeeper, from `table_commits`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForeignRewriteRow {
    pub table_name: String,
    /// How many are recorded.
    pub rewrites: i64,
    /// The newest one.
    pub last_version: i64,
    pub last_timestamp: DateTime<Utc>,
    pub last_operation: Option<String>,
    pub last_engine_info: Option<String>,
}

/// How many stale writes of a table are recorded, and when the newest was detected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaleWriteCount {
    pub table_name: String,
    pub stale_writes: i64,
    pub last_detected_at: Option<DateTime<Utc>>,
}

/// A stale write as `stale_writes` holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StaleWriteRow {
    pub table_name: String,
    /// The stale writer's commit.
    pub version: i64,
    pub committed_at: Option<DateTime<Utc>>,
    pub operation: Option<String>,
    pub engine_info: Option<String>,
    /// What the stale commit meant to do; `None` for rows recorded before kinds were told apart.
    pub kind: Option<StaleKind>,
    /// The commits (anyone's) that had already removed the files it removed.
    pub rewrite_versions: Vec<i64>,
    pub files: i64,
    pub sample_files: Vec<String>,
    /// Rows the writer meant to remove that stayed visible, when counted.
    pub rows: Option<i64>,
    /// It removed files a repair commit had replaced: repaired by hand only.
    pub over_repair: bool,
    /// The repair commit, once there is one.
    pub repaired_by: Option<i64>,
    /// When a replica first recorded it (database clock); ignored on insert.
    pub detected_at: Option<DateTime<Utc>>,
}

/// `limit` within 1..=[`MAX_HISTORY_LIMIT`].
pub(crate) fn clamp_history_limit(limit: i64) -> i64 {
    limit.clamp(1, MAX_HISTORY_LIMIT)
}
