//! The checked inventory: plain, fully defaulted, validated values.
//!
//! Everything the daemon reads about a table comes from these types. They are built only by
//! the checks in `check.rs` (there is no public constructor path from unchecked input), so a
//! [`TableSpec`] always holds a valid schedule, a supported path and a retention window that
//! passed the safety rules. This module must never parse YAML or apply defaults itself.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize, Serializer};

use tablekeeper_vocab::Compression;

use crate::schedule::Schedule;

pub use tablekeeper_vocab::Operation;

/// A loaded, validated inventory.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Inventory {
    /// Every table, in the order of `sources`, then of declaration within a file.
    pub tables: Vec<TableSpec>,
    /// The files read, in the order they were read.
    pub sources: Vec<PathBuf>,
    /// What maintenance may spend per window (the top-level `budget:` block); `None`: no
    /// bound.
    pub budget: Option<Budget>,
}

impl Inventory {
    /// The table with this name.
    pub fn table(&self, name: &str) -> Option<&TableSpec> {
        self.tables.iter().find(|t| t.name == name)
    }
}

/// One table and everything tablekeeper does to it, defaults applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableSpec {
    /// Unique name, `[A-Za-z0-9_.-]+`; used in metric labels and the job table.
    pub name: String,
    /// Table location as written, scheme lowercased and trailing slashes removed: an
    /// absolute path or a file://, s3://, gs://, az://, abfss:// URL.
    pub path: String,
    /// Who gets alerted when maintenance fails or falls behind.
    pub owner: String,
    /// Jobs with the same key never run at the same time; default `table:<name>`.
    pub concurrency_key: String,
    /// Zone the schedules are read in.
    #[serde(serialize_with = "serialize_tz")]
    pub timezone: chrono_tz::Tz,
    /// Who else commits to the table.
    pub writers: Writers,
    /// Physical layout.
    pub layout: Layout,
    /// How long removed files and log entries are kept.
    pub retention: Retention,
    /// Protocol features the table is expected to have.
    pub protocol: ProtocolSpec,
    /// Readers of the table: engines that must keep working, and how long their longest
    /// queries run (VACUUM's window is at least that).
    pub readers: Vec<Reader>,
    /// When true, nothing is scheduled for the table.
    pub paused: bool,
    /// How much the table's maintenance matters when a budget forces a choice
    /// (`maintenance.importance`); the weight each level carries is the planner's.
    pub importance: Importance,
    /// Attempts per job before it is marked failed.
    pub max_attempts: u32,
    /// Longest one attempt may run.
    #[serde(serialize_with = "serialize_duration")]
    pub timeout: Duration,
    /// A compaction, Z-order or purge job is split into tasks of at most this many bytes of
    /// input, which any replica may run (`maintenance.max_task_bytes`).
    pub max_task_bytes: u64,
    /// OPTIMIZE (bin-packing).
    pub compaction: CompactionSpec,
    /// OPTIMIZE ZORDER BY.
    pub zorder: ZorderSpec,
    /// VACUUM.
    pub vacuum: VacuumSpec,
    /// Checkpoints.
    pub checkpoint: CheckpointSpec,
    /// Purge of deleted rows on tables with deletion vectors.
    pub purge: PurgeSpec,
    /// Repair stale writes automatically (a `repair` job as soon as a probe finds one).
    pub auto_repair: bool,
    /// Where the table is declared.
    pub source: SourceRef,
}

impl TableSpec {
    /// Whether the operation's block is enabled (regardless of `paused`); for repair,
    /// `maintenance.auto_repair`. Compaction, Z-order and purge are off on a table whose
    /// rewrites another engine owns (`writers.rewrites: external`).
    pub fn operation_enabled(&self, op: Operation) -> bool {
        if op.rewrites() && self.writers.rewrites == RewriteOwner::External {
            return false;
        }
        match op {
            Operation::Compact => self.compaction.enabled,
            Operation::Zorder => self.zorder.enabled,
            Operation::Vacuum => self.vacuum.enabled,
            Operation::Checkpoint => self.checkpoint.enabled,
            Operation::Purge => self.purge.enabled,
            Operation::Repair => self.auto_repair,
        }
    }

    /// The operation's schedule, read in [`TableSpec::timezone`]; `None` for repair, which
    /// runs when a stale write is found.
    pub fn schedule(&self, op: Operation) -> Option<&Schedule> {
        match op {
            Operation::Compact => Some(&self.compaction.schedule),
            Operation::Zorder => Some(&self.zorder.schedule),
            Operation::Vacuum => Some(&self.vacuum.schedule),
            Operation::Checkpoint => Some(&self.checkpoint.schedule),
            Operation::Purge => Some(&self.purge.schedule),
            Operation::Repair => None,
        }
    }
}

/// The top-level `budget:` block: what budgeted maintenance may spend, fleet-wide, per
/// window (DESIGN.md, "Budget (contract)"). Validated: `window` is at least a minute,
/// `cpu_seconds` and every owner cap are positive and finite, no cap exceeds `cpu_seconds`,
/// and every capped owner owns a table of the inventory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Budget {
    /// The accounting window; the budget refills at each window's start.
    #[serde(serialize_with = "serialize_duration")]
    pub window: Duration,
    /// CPU-seconds per window for budgeted work, across all replicas.
    pub cpu_seconds: f64,
    /// Caps per owner (the tables' `owner`), CPU-seconds per window, each inside
    /// `cpu_seconds`; an owner not listed has no cap of its own.
    pub owners: BTreeMap<String, f64>,
    /// Whether the budget defers work or only records what it would defer.
    pub mode: BudgetMode,
}

tablekeeper_vocab::closed_set! {
    /// What a budget does to work past it (`budget.mode`).
    pub enum BudgetMode as "budget mode" {
        /// Nothing changes: every due job runs, and the plan records what `enforce` would
        /// have deferred (the default, to see a budget's effect before it bites).
        Shadow => "shadow",
        /// Due work past the window's budget is deferred, best benefit per cost first.
        Enforce => "enforce",
    }
}

tablekeeper_vocab::closed_set! {
    /// How much a table's maintenance matters when a budget forces a choice
    /// (`maintenance.importance`). A level, not a number: the planner owns the weights.
    pub enum Importance as "importance" {
        /// Maintained first when the budget runs short.
        High => "high",
        /// The default.
        Normal => "normal",
        /// Deferred first when the budget runs short.
        Low => "low",
    }
}

/// Who commits to a table besides tablekeeper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Writers {
    /// One writer, or several concurrent ones.
    pub topology: Topology,
    /// The commit protocol the table's other writers use on S3; declared, required for
    /// multi-writer s3:// tables.
    pub log_store: Option<LogStore>,
    /// Commits per hour the table's writers are expected to stay under.
    pub commit_budget_per_hour: Option<u32>,
    /// When other writers fully overwrite the table: no rewrite starts or commits inside
    /// these windows.
    pub overwrites: Option<OverwriteWindow>,
    /// Who compacts, Z-orders and purges the table.
    pub rewrites: RewriteOwner,
}

/// Who rewrites a table's files (compaction, Z-order, purge). Only one engine may: two
/// compactions of the same files from different snapshots both commit and duplicate rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RewriteOwner {
    /// tablekeeper (the default).
    Tablekeeper,
    /// Another engine (a Databricks job, the team's own `optimize()`): tablekeeper runs
    /// VACUUM and checkpoints only.
    External,
}

/// Recurring windows in which other writers run full overwrites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OverwriteWindow {
    /// When each window opens, read in the table's timezone.
    pub schedule: Schedule,
    /// How long it stays open.
    #[serde(serialize_with = "serialize_duration")]
    pub duration: Duration,
}

/// How many processes commit to a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// One writer (plus tablekeeper's maintenance commits).
    SingleWriter,
    /// Several writers commit concurrently; maintenance may conflict with them.
    MultiWriter,
}

/// The commit protocol of an S3 table's writers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum LogStore {
    /// S3 conditional put (`If-None-Match`), what deltalake 1.x uses: tablekeeper can
    /// commit safely alongside these writers.
    ConditionalPut,
    /// Spark's `S3DynamoDBLogStore` (DynamoDB lock table). deltalake 1.x dropped DynamoDB
    /// locking, and mixing the two protocols can lose commits: the daemon must not commit
    /// to such a table.
    Dynamodb,
}

/// Physical layout of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Partition columns.
    pub partition_by: Vec<String>,
    /// Whether writers are configured for optimized writes.
    pub optimize_write: bool,
    /// Z-order columns; never a partition column.
    pub zorder: Vec<String>,
    /// Below this average file size (`table_size_bytes / table_files`) the table is alerted as
    /// slow (`TablekeeperAverageFileSizeLow`); default a quarter of the compaction target.
    pub min_average_file_size: u64,
    /// The Parquet compression of the files tablekeeper re-encodes (decoded compaction bins,
    /// Z-order, purge); copied row groups keep their own. Default zstd level 4.
    pub compression: Compression,
}

/// Retention windows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Retention {
    /// VACUUM keeps removed files this long; at least 168h unless
    /// `allow_short_retention`.
    #[serde(serialize_with = "serialize_duration")]
    pub deleted_file_retention: Duration,
    /// Log entries are kept this long; never shorter than `deleted_file_retention`.
    #[serde(serialize_with = "serialize_duration")]
    pub log_retention: Duration,
    /// Allows `deleted_file_retention` below 168h.
    pub allow_short_retention: bool,
    /// Deleted rows must be physically gone within this time of their deletion; always
    /// longer than `deleted_file_retention`.
    #[serde(serialize_with = "serialize_optional_duration")]
    pub erasure_deadline: Option<Duration>,
    /// Shallow clones (or tables over this one's files) outside the inventory: VACUUM keeps
    /// every file of this table their logs reference. Read, never written.
    pub clones: Vec<String>,
    /// Versions others rely on: their files and the log that loads them are kept until the
    /// pin's `until`.
    pub pins: Vec<Pin>,
}

/// A pinned version (`retention.pins` entry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    /// The version held: a version number, or the version time travel to a timestamp lands on.
    pub at: PinAt,
    /// The pin holds until this instant (a date means the end of that day, UTC).
    pub until: chrono::DateTime<chrono::Utc>,
    /// Why it exists (a model run, an audit).
    pub reason: String,
}

/// What a pin holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PinAt {
    Version(u64),
    Timestamp(chrono::DateTime<chrono::Utc>),
}

/// A reader of a table (`readers:` entry): a name, and optionally its longest query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reader {
    pub name: String,
    /// The engine it runs (`trino`, `databricks`, `delta-spark`, ...) and its version, for
    /// `plan --base` to check that it can read the table's features.
    pub engine: Option<String>,
    pub version: Option<String>,
    /// The longest a query of this reader runs: a query started on a version must find its
    /// files, so VACUUM keeps every file a version this recent still needs.
    #[serde(serialize_with = "serialize_optional_duration")]
    pub max_query_duration: Option<Duration>,
}

impl TableSpec {
    /// The longest `max_query_duration` among the table's readers, and whose it is.
    pub fn longest_reader(&self) -> Option<(&str, Duration)> {
        self.readers
            .iter()
            .filter_map(|r| Some((r.name.as_str(), r.max_query_duration?)))
            .max_by_key(|(_, d)| *d)
    }

    /// The VACUUM window the inventory asks for: `retention.deleted_file_retention`, or the
    /// longest reader's `max_query_duration` when that is longer (the table's own property
    /// and Delta's 7-day floor are applied on top by the delta crate).
    pub fn vacuum_window(&self) -> Duration {
        let readers = self.longest_reader().map_or(Duration::ZERO, |(_, d)| d);
        self.retention.deleted_file_retention.max(readers)
    }
}

/// Declared protocol features.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProtocolSpec {
    /// Table features the table is expected to have (`changeDataFeed`, `deletionVectors`).
    pub features: Vec<String>,
}

/// Compaction (OPTIMIZE) settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CompactionSpec {
    /// Whether compaction is scheduled.
    pub enabled: bool,
    /// When it runs.
    pub schedule: Schedule,
    /// Target file size in bytes.
    pub target_file_size: u64,
    /// A compaction runs only when at least this many small files exist.
    pub min_small_files: u32,
}

/// Z-order settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZorderSpec {
    /// Whether Z-ordering is scheduled; only ever true with `layout.zorder` columns.
    pub enabled: bool,
    /// When it runs.
    pub schedule: Schedule,
}

/// VACUUM settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VacuumSpec {
    /// Whether VACUUM is scheduled.
    pub enabled: bool,
    /// When it runs.
    pub schedule: Schedule,
    /// Every Nth VACUUM lists the table directory (`VacuumMode::Full`) to reclaim files no
    /// log entry references (left by failed writes); the others read only the log. 1 means
    /// every VACUUM is full.
    pub full_every: u32,
}

/// Checkpoint settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointSpec {
    /// Whether checkpointing is scheduled.
    pub enabled: bool,
    /// When it runs.
    pub schedule: Schedule,
    /// A checkpoint is written once this many commits happened since the last one.
    pub max_commits_since_checkpoint: u64,
}

/// Purge settings (REORG TABLE … APPLY (PURGE)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PurgeSpec {
    /// Whether purging is scheduled (it runs only where files carry deletion vectors).
    pub enabled: bool,
    /// When it runs.
    pub schedule: Schedule,
}

/// Where a table is declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceRef {
    /// The file.
    pub file: PathBuf,
    /// 1-based line of the table's first key.
    pub line: usize,
    /// 1-based column of the table's first key.
    pub column: usize,
}

impl fmt::Display for SourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

fn serialize_tz<S: Serializer>(tz: &chrono_tz::Tz, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(tz.name())
}

fn serialize_optional_duration<S: Serializer>(
    d: &Option<Duration>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => serialize_duration(d, serializer),
        None => serializer.serialize_none(),
    }
}

fn serialize_duration<S: Serializer>(d: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&humantime::format_duration(*d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_and_log_store_use_kebab_case() {
        assert_eq!(
            serde_json::to_string(&Topology::MultiWriter).unwrap(),
            "\"multi-writer\""
        );
        assert_eq!(
            serde_json::to_string(&LogStore::ConditionalPut).unwrap(),
            "\"conditional-put\""
        );
        assert_eq!(
            serde_json::to_string(&LogStore::Dynamodb).unwrap(),
            "\"dynamodb\""
        );
    }

    #[test]
    fn budget_mode_and_importance_use_their_words() {
        assert_eq!(
            serde_json::to_string(&BudgetMode::Enforce).unwrap(),
            "\"enforce\""
        );
        assert_eq!(BudgetMode::Shadow.to_string(), "shadow");
        for importance in Importance::ALL {
            assert_eq!(
                serde_json::to_string(&importance).unwrap(),
                format!("\"{}\"", importance.as_str())
            );
        }
    }
}
