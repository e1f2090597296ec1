//! The raw model: the shape of one inventory file as written, for the JSON Schema.
//!
//! These types describe the file, not the checked inventory: every key as it appears in
//! YAML, optional where the file may leave it out, documented for editors (the doc
//! comments become the schema's descriptions). They derive `Deserialize` with
//! `deny_unknown_fields` so a test can confirm that every example file deserializes into
//! them strictly, and their key sets are compared with the key lists of `check.rs`, so the
//! schema and the validator cannot drift apart.
//!
//! The schema cannot say everything the validator checks (unique names across files,
//! retention floors, Z-order vs partitions); it must never accept a key or value type the
//! validator rejects outright.

// The fields are read by serde and schemars only (and by the strict-deserialization test).
#![allow(dead_code)]

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::Deserialize;

use tablekeeper_vocab::Codec;

use crate::model::{BudgetMode, Importance, LogStore, RewriteOwner, Topology};

/// One tablekeeper inventory file: either a list of tables with optional defaults, or a
/// single table (one table per file keeps inventory pull requests free of conflicts).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
#[schemars(title = "tablekeeper inventory file")]
pub(crate) enum InventoryFile {
    /// A list of tables under `tables:`, with optional `defaults:` and `budget:` blocks (each
    /// in one file of the inventory only).
    Tables(Box<TablesFile>),
    /// A single table.
    Table(Box<TableEntry>),
}

/// A file listing tables.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TablesFile {
    /// Settings merged under every table's own `maintenance:` settings, field by field.
    /// Allowed in one file only across the whole inventory.
    pub defaults: Option<DefaultsEntry>,
    /// What budgeted maintenance may spend per window, fleet-wide (all replicas): the planner
    /// ranks due maintenance by benefit per cost within it. Allowed in one file only across
    /// the whole inventory. Optional: no budget by default.
    pub budget: Option<BudgetEntry>,
    /// The tables.
    pub tables: Option<Vec<TableEntry>>,
}

/// The fleet's maintenance budget.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BudgetEntry {
    /// The accounting window; the budget refills at each window's start. At least `1m`.
    /// Default `1h`.
    pub window: Option<DurationText>,
    /// CPU-seconds budgeted maintenance may spend per window across all replicas, e.g.
    /// `3600` (one core for an hour). Required.
    pub cpu_seconds: CpuSeconds,
    /// Caps per owner (a table's `owner`), CPU-seconds per window, each at most
    /// `cpu_seconds`, e.g. `{ finance: 600 }`. Every owner named must own a table. Owners
    /// not listed have no cap of their own.
    pub owners: Option<BTreeMap<String, CpuSeconds>>,
    /// `shadow` (default: nothing changes, the plan records what `enforce` would defer) or
    /// `enforce` (due work past the budget is deferred).
    pub mode: Option<BudgetMode>,
}

/// Fleet-wide defaults for table maintenance.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DefaultsEntry {
    /// How much a table's maintenance matters when a budget forces a choice: `high`,
    /// `normal` or `low`. Default `normal`.
    pub importance: Option<Importance>,
    /// Repair stale writes automatically (a `repair` job as soon as a probe finds one).
    /// Default true.
    pub auto_repair: Option<bool>,
    /// IANA timezone the schedules are read in. Default `UTC`.
    pub timezone: Option<TimezoneText>,
    /// Attempts per job before it is marked failed (at least 1). Default 3.
    #[schemars(range(min = 1))]
    pub max_attempts: Option<u32>,
    /// Longest one attempt may run. Default `2h`.
    pub timeout: Option<DurationText>,
    /// A compaction, Z-order or purge job is split into tasks (any replica runs them) of at
    /// most this much input. Default `8GiB`.
    pub max_task_bytes: Option<SizeText>,
    /// Compaction (OPTIMIZE) defaults.
    pub compaction: Option<CompactionEntry>,
    /// Z-order defaults; `enabled: true` here applies only to tables with `layout.zorder`
    /// columns.
    pub zorder: Option<ZorderEntry>,
    /// VACUUM defaults.
    pub vacuum: Option<VacuumEntry>,
    /// Checkpoint defaults.
    pub checkpoint: Option<CheckpointEntry>,
    /// Purge defaults.
    pub purge: Option<PurgeEntry>,
}

/// One Delta table and how tablekeeper maintains it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TableEntry {
    /// Unique table name, `[A-Za-z0-9_.-]+`; appears in metric labels and job rows.
    pub name: TableName,
    /// Table location, unique across the inventory: an absolute path or a file://, s3://,
    /// gs://, az://, abfss:// URL. Credentials come from the environment, never from here.
    pub path: TablePathText,
    /// The team alerted when maintenance fails or falls behind.
    #[schemars(length(min = 1))]
    pub owner: String,
    /// Jobs with the same key never overlap; tables may share a key on purpose. Default
    /// `table:<name>`.
    #[schemars(length(min = 1))]
    pub concurrency_key: Option<String>,
    /// Who else commits to the table.
    pub writers: Option<WritersEntry>,
    /// Physical layout.
    pub layout: Option<LayoutEntry>,
    /// Retention windows.
    pub retention: Option<RetentionEntry>,
    /// Declared protocol features; drift from the live table is reported.
    pub protocol: Option<ProtocolEntry>,
    /// Readers of the table: a name (`spark-4.0-platform-image`), or
    /// `{ name, max_query_duration }` for a reader whose queries run long; VACUUM's window is
    /// at least the longest `max_query_duration`.
    pub readers: Option<Vec<ReaderEntry>>,
    /// Per-table maintenance settings, overriding `defaults:`.
    pub maintenance: Option<MaintenanceEntry>,
}

/// The table's writers.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WritersEntry {
    /// `single-writer` (default) or `multi-writer`.
    pub topology: Option<Topology>,
    /// The commit protocol of the other writers of an s3:// table: `conditional-put`
    /// (S3 conditional writes, as deltalake 1.x) or `dynamodb` (Spark's
    /// S3DynamoDBLogStore; tablekeeper then refuses to commit). Required for multi-writer
    /// s3:// tables, not allowed on other stores.
    pub log_store: Option<LogStore>,
    /// Commits per hour the writers are expected to stay under (at least 1).
    #[schemars(range(min = 1))]
    pub commit_budget_per_hour: Option<u32>,
    /// When other writers fully overwrite the table (`mode=overwrite`, `CREATE OR REPLACE`):
    /// no compaction or Z-order starts or commits inside these windows. Without it, a table
    /// whose log shows recent full overwrites is not compacted at all, because an overwrite
    /// planned before a compaction brings the old rows back.
    pub overwrites: Option<OverwritesEntry>,
    /// Who compacts, Z-orders and purges the table: `tablekeeper` (default) or `external`
    /// (another engine owns its rewrites; tablekeeper runs VACUUM and checkpoints only). Only
    /// one engine may rewrite a table: two compactions from different snapshots both commit
    /// and every row they share is visible twice.
    pub rewrites: Option<RewriteOwner>,
}

/// One reader of a table.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum ReaderEntry {
    /// The reader's name.
    Name(String),
    /// A reader whose longest query VACUUM must outlive.
    Timed(TimedReaderEntry),
}

/// A reader with its longest query.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TimedReaderEntry {
    pub name: String,
    /// The engine it runs: `delta-spark`, `databricks`, `trino`, `athena`, `delta-rs`,
    /// `duckdb`, `snowflake`, `bigquery`, `fabric`, ... (`plan --base` checks that it can read
    /// the table's features).
    pub engine: Option<String>,
    /// The engine's version, e.g. `"476"` for Trino or `"15.4"` for Databricks Runtime.
    pub version: Option<String>,
    /// How long its longest query runs, e.g. `12h`: files a version this recent needs stay.
    pub max_query_duration: Option<DurationText>,
}

/// Recurring windows of other writers' full overwrites.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OverwritesEntry {
    /// When each window opens (cron, in the table's timezone).
    pub schedule: ScheduleText,
    /// How long it stays open, e.g. `2h`.
    pub duration: DurationText,
}

/// Physical layout.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LayoutEntry {
    /// Partition columns.
    pub partition_by: Option<Vec<String>>,
    /// Whether the writers use optimized writes. Default false.
    pub optimize_write: Option<bool>,
    /// Z-order columns; must not name a partition column. Z-order is scheduled only when
    /// this is non-empty.
    pub zorder: Option<Vec<String>>,
    /// The average file size below which the table is alerted as slow
    /// (`TablekeeperAverageFileSizeLow`). Default: a quarter of the compaction target.
    pub min_average_file_size: Option<SizeText>,
    /// The Parquet compression of the files tablekeeper writes when it re-encodes rows
    /// (compaction bins it decodes, Z-order, purge): a codec, or a codec and level. Row
    /// groups compaction copies keep their own encoding. Default `zstd` level 4.
    pub compression: Option<CompressionEntry>,
}

/// A compression codec, alone (its default level) or with a level.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum CompressionEntry {
    /// The codec at its default level (zstd 4, gzip 6, brotli 1).
    Codec(Codec),
    /// A codec and a level.
    Leveled(LeveledCompressionEntry),
}

/// A codec and a level inside its range (zstd 1–22, gzip 0–9, brotli 0–11; snappy, lz4 and
/// uncompressed have none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeveledCompressionEntry {
    /// The codec.
    pub codec: Codec,
    /// The level; the codec's default when left out.
    pub level: Option<u32>,
}

/// Retention windows.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RetentionEntry {
    /// How long VACUUM keeps removed files. Default `7d`; below `168h` only with
    /// `allow_short_retention: true`.
    pub deleted_file_retention: Option<DurationText>,
    /// How long log entries are kept; not shorter than `deleted_file_retention`. Default
    /// `30d`.
    pub log_retention: Option<DurationText>,
    /// Allows `deleted_file_retention` below 168h. Default false.
    pub allow_short_retention: Option<bool>,
    /// Deleted rows must be physically gone from storage within this time of their
    /// deletion (purge, then VACUUM after `deleted_file_retention`); longer than
    /// `deleted_file_retention`. Optional: no deadline by default.
    pub erasure_deadline: Option<DurationText>,
    /// Shallow clones of this table outside the inventory (paths of their roots): VACUUM
    /// keeps every file their logs reference, and refuses while one cannot be read.
    pub clones: Option<Vec<String>>,
    /// Versions others rely on (a model registry, an audit): every file of the version and
    /// the log that loads it are kept until `until`.
    pub pins: Option<Vec<PinEntry>>,
}

/// One pinned version: `version` or `timestamp`, and `until`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PinEntry {
    /// The table version held.
    pub version: Option<u64>,
    /// Instead of `version`: the version time travel to this instant lands on (RFC 3339, or a
    /// date for its midnight UTC).
    pub timestamp: Option<String>,
    /// Until when (RFC 3339, or a date: through the end of that day, UTC). An expired pin is
    /// reported and no longer honoured.
    pub until: String,
    /// Why the version is pinned, e.g. `model run 88`.
    pub reason: Option<String>,
}

/// Declared protocol.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProtocolEntry {
    /// Table features the table is expected to have, e.g. `changeDataFeed`,
    /// `deletionVectors`.
    pub features: Option<Vec<String>>,
}

/// Per-table maintenance settings.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct MaintenanceEntry {
    /// When true, nothing is scheduled for the table. Default false.
    pub paused: Option<bool>,
    /// How much the table's maintenance matters when a budget forces a choice: `high`,
    /// `normal` or `low` (weights its benefit in the planner's ranking). Default: `defaults:`,
    /// else `normal`.
    pub importance: Option<Importance>,
    /// Repair stale writes automatically (a `repair` job as soon as a probe finds one).
    /// Default true.
    pub auto_repair: Option<bool>,
    /// IANA timezone the schedules are read in.
    pub timezone: Option<TimezoneText>,
    /// Attempts per job before it is marked failed (at least 1).
    #[schemars(range(min = 1))]
    pub max_attempts: Option<u32>,
    /// Longest one attempt may run.
    pub timeout: Option<DurationText>,
    /// A compaction, Z-order or purge job is split into tasks (any replica runs them) of at
    /// most this much input.
    pub max_task_bytes: Option<SizeText>,
    /// Compaction (OPTIMIZE).
    pub compaction: Option<CompactionEntry>,
    /// Z-order (OPTIMIZE ZORDER BY `layout.zorder`); `enabled: true` needs `layout.zorder`
    /// columns.
    pub zorder: Option<ZorderEntry>,
    /// VACUUM.
    pub vacuum: Option<VacuumEntry>,
    /// Checkpoints.
    pub checkpoint: Option<CheckpointEntry>,
    /// Purge of deleted rows (REORG TABLE … APPLY (PURGE)) on tables with deletion vectors.
    pub purge: Option<PurgeEntry>,
}

/// Compaction (OPTIMIZE) settings.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CompactionEntry {
    /// Whether compaction is scheduled. Default true.
    pub enabled: Option<bool>,
    /// When it runs. Default `0 2 * * *`.
    pub schedule: Option<ScheduleText>,
    /// Target file size. Default `512MiB`.
    pub target_file_size: Option<SizeText>,
    /// Compaction runs only when at least this many small files exist (at least 1).
    /// Default 10.
    #[schemars(range(min = 1))]
    pub min_small_files: Option<u32>,
}

/// Z-order settings.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ZorderEntry {
    /// Whether Z-ordering is scheduled. Default: true when `layout.zorder` has columns.
    pub enabled: Option<bool>,
    /// When it runs. Default `0 4 * * 0`.
    pub schedule: Option<ScheduleText>,
}

/// VACUUM settings.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VacuumEntry {
    /// Whether VACUUM is scheduled. Default true.
    pub enabled: Option<bool>,
    /// When it runs. Default `0 3 * * 0`.
    pub schedule: Option<ScheduleText>,
    /// Every Nth VACUUM lists the table directory to reclaim orphaned files (at least 1;
    /// 1 = always). Default 4.
    #[schemars(range(min = 1))]
    pub full_every: Option<u32>,
}

/// Checkpoint settings.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckpointEntry {
    /// Whether checkpointing is scheduled. Default true.
    pub enabled: Option<bool>,
    /// When it runs. Default `*/30 * * * *`.
    pub schedule: Option<ScheduleText>,
    /// A checkpoint is written once this many commits happened since the last (at least
    /// 1). Default 100.
    #[schemars(range(min = 1))]
    pub max_commits_since_checkpoint: Option<u64>,
}

/// Purge settings.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PurgeEntry {
    /// Whether purging is scheduled; it runs only on tables whose files carry deletion
    /// vectors. Default true.
    pub enabled: Option<bool>,
    /// When it runs. Default `0 5 * * *`.
    pub schedule: Option<ScheduleText>,
}

/// Declares a string leaf type whose schema is written by hand.
macro_rules! text_leaf {
    ($name:ident, $schema_name:literal, $schema:tt) => {
        #[derive(Debug, Deserialize)]
        #[serde(transparent)]
        pub(crate) struct $name(pub String);

        impl JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                Cow::Borrowed($schema_name)
            }

            fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
                json_schema!($schema)
            }
        }
    };
}

text_leaf!(TableName, "TableName", {
    "type": "string",
    "description": "Unique table name: letters, digits, `_`, `.`, `-`.",
    "pattern": "^[A-Za-z0-9_.-]+$",
    "examples": ["silver.events"]
});

text_leaf!(TablePathText, "TablePath", {
    "type": "string",
    "description": "Absolute path or file://, s3://, gs://, az://, abfss:// URL.",
    "pattern": "^\\s*(/|[Ff][Ii][Ll][Ee]:///|[Ss]3://[^/]|[Gg][Ss]://[^/]|[Aa][Zz]://[^/]|[Aa][Bb][Ff][Ss][Ss]://[^/])",
    "examples": ["s3://lake/silver/events", "file:///data/lake/events", "/data/lake/events"]
});

text_leaf!(DurationText, "Duration", {
    "type": "string",
    "description": "A duration: `30m`, `168h`, `7d`, `2w` (humantime; no months or years), or Delta's `interval 7 days`.",
    "pattern": "^\\s*(0|([0-9]+\\s*[A-Za-zµ]+\\s*)+|[Ii][Nn][Tt][Ee][Rr][Vv][Aa][Ll](\\s+[0-9]+\\s+[A-Za-z]+)+)\\s*$",
    "examples": ["7d", "168h", "30m", "2w", "interval 7 days"]
});

text_leaf!(ScheduleText, "Schedule", {
    "type": "string",
    "description": "Cron: 5 fields (minute hour day-of-month month day-of-week), 6 fields with leading seconds, or @hourly, @daily, @weekly, @monthly, @yearly. Do not restrict both day-of-month and day-of-week.",
    "pattern": "^\\s*(@[A-Za-z]+|\\S+(\\s+\\S+){4,5})\\s*$",
    "examples": ["0 2 * * *", "*/30 * * * *", "0 0 */6 * * *", "@daily"]
});

text_leaf!(TimezoneText, "Timezone", {
    "type": "string",
    "description": "IANA timezone name.",
    "minLength": 1,
    "examples": ["UTC", "Europe/Berlin", "America/New_York"]
});

/// A positive number of CPU-seconds, whole or decimal.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub(crate) struct CpuSeconds(pub f64);

impl JsonSchema for CpuSeconds {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("CpuSeconds")
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "number",
            "description": "CPU-seconds per budget window: a positive number, whole or decimal.",
            "exclusiveMinimum": 0,
            "examples": [3600, 600, 0.5]
        })
    }
}

/// A size: text with a unit or a number of bytes.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum SizeText {
    Bytes(u64),
    Text(String),
}

impl JsonSchema for SizeText {
    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Size")
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A size: `128MB` (10^6 bytes each), `512MiB` (2^20), `1GiB`, or a number of bytes.",
            "anyOf": [
                { "type": "integer", "minimum": 1 },
                {
                    "type": "string",
                    "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*([KkMmGgTtPpEe][Ii]?)?[Bb]?\\s*$"
                }
            ],
            "examples": ["512MiB", "128MB", "1GiB", 134217728]
        })
    }
}

/// The JSON Schema of one inventory file, either shape. An empty file (YAML null) holds no
/// tables and is valid too.
pub(crate) fn json_schema() -> serde_json::Value {
    let mut schema = schemars::schema_for!(InventoryFile).to_value();
    if let Some(any_of) = schema.get_mut("anyOf").and_then(|v| v.as_array_mut()) {
        any_of.push(serde_json::json!({
            "type": "null",
            "description": "An empty file (or only comments): no tables."
        }));
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check;

    fn property_names(schema: &serde_json::Value, def: &str) -> Vec<String> {
        let mut names: Vec<String> = schema["$defs"][def]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("no properties for {def}"))
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    }

    fn sorted(keys: &[&str]) -> Vec<String> {
        let mut keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        keys.sort();
        keys
    }

    /// The validator's key lists and the schema's properties are the same sets.
    #[test]
    fn schema_and_validator_know_the_same_keys() {
        let schema = json_schema();
        for (def, keys) in [
            ("TablesFile", check::FILE_KEYS),
            ("BudgetEntry", crate::budget::BUDGET_KEYS),
            ("TableEntry", check::TABLE_KEYS),
            ("DefaultsEntry", check::DEFAULTS_KEYS),
            ("WritersEntry", check::WRITERS_KEYS),
            ("OverwritesEntry", check::OVERWRITES_KEYS),
            ("LayoutEntry", check::LAYOUT_KEYS),
            (
                "LeveledCompressionEntry",
                crate::compression::COMPRESSION_KEYS,
            ),
            ("RetentionEntry", check::RETENTION_KEYS),
            ("PinEntry", crate::keep::PIN_KEYS),
            ("ProtocolEntry", check::PROTOCOL_KEYS),
            ("MaintenanceEntry", check::MAINTENANCE_KEYS),
            ("CompactionEntry", check::COMPACTION_KEYS),
            ("ZorderEntry", check::ZORDER_KEYS),
            ("VacuumEntry", check::VACUUM_KEYS),
            ("CheckpointEntry", check::CHECKPOINT_KEYS),
            ("PurgeEntry", check::PURGE_KEYS),
        ] {
            assert_eq!(property_names(&schema, def), sorted(keys), "{def}");
        }
    }

    /// Every example file deserializes strictly (`deny_unknown_fields`) into the raw model.
    #[test]
    fn examples_deserialize_strictly() {
        let config = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
        let mut files = vec![config.join("inventory.example.yaml")];
        for entry in std::fs::read_dir(config.join("inventory.d")).unwrap() {
            files.push(entry.unwrap().path());
        }
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            if let Err(e) = serde_saphyr::from_str::<InventoryFile>(&text) {
                panic!("{}: {e}", file.display());
            }
        }
    }
}
