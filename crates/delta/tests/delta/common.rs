//! Real Delta tables in temp dirs, written and read with deltalake itself.

use std::collections::BTreeSet;
use std::path::Path as FsPath;
use std::sync::Arc;

use deltalake::arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use deltalake::arrow::compute::cast;
use deltalake::arrow::datatypes::{DataType as ArrowType, Field, Schema};
use deltalake::kernel::{DataType, StructField};
use deltalake::operations::collect_sendable_stream;
use deltalake::operations::create::CreateBuilder;
use deltalake::protocol::SaveMode;
use deltalake::{DeltaTable, DeltaTableBuilder};
use tempfile::TempDir;
use url::Url;

/// (id, event_date, event_type, value)
pub type Row = (i64, String, String, i64);

pub struct TestTable {
    pub dir: TempDir,
    pub uri: String,
}

impl TestTable {
    pub fn url(&self) -> Url {
        Url::from_directory_path(self.dir.path()).expect("absolute temp dir")
    }

    pub fn path(&self) -> &FsPath {
        self.dir.path()
    }

    pub async fn open(&self) -> DeltaTable {
        deltalake::open_table(self.url()).await.expect("open")
    }

    pub async fn open_at(&self, version: u64) -> DeltaTable {
        DeltaTableBuilder::from_url(self.url())
            .expect("url")
            .with_version(version)
            .load()
            .await
            .expect("load version")
    }

    pub async fn version(&self) -> u64 {
        self.open().await.version().expect("loaded")
    }

    pub async fn rows(&self) -> Vec<Row> {
        read_rows(self.open().await).await
    }

    pub async fn rows_at(&self, version: u64) -> Vec<Row> {
        read_rows(self.open_at(version).await).await
    }

    /// Every version's rows, oldest first.
    pub async fn rows_by_version(&self) -> Vec<(u64, Vec<Row>)> {
        let latest = self.version().await;
        let mut all = Vec::new();
        for v in 0..=latest {
            all.push((v, self.rows_at(v).await));
        }
        all
    }

    pub async fn append(&self, rows: &[Row]) {
        self.open()
            .await
            .write(vec![batch(rows)])
            .with_save_mode(SaveMode::Append)
            .await
            .expect("append");
    }

    pub async fn delete(&self, predicate: &str) {
        self.open()
            .await
            .delete()
            .with_predicate(predicate)
            .await
            .expect("delete");
    }

    pub async fn update_value(&self, predicate: &str, expression: &str) {
        self.open()
            .await
            .update()
            .with_predicate(predicate)
            .with_update("value", expression)
            .await
            .expect("update");
    }

    /// Active data file paths, relative to the table root.
    pub async fn active_paths(&self) -> BTreeSet<String> {
        let table = self.open().await;
        table
            .snapshot()
            .expect("snapshot")
            .snapshot()
            .log_data()
            .into_iter()
            .map(|f| f.path().into_owned())
            .collect()
    }

    /// Parquet files on disk, relative to the table root.
    pub fn parquet_on_disk(&self) -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        collect_parquet(self.path(), self.path(), &mut found);
        found
    }
}

fn collect_parquet(root: &FsPath, dir: &FsPath, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.file_name().is_some_and(|n| n == "_delta_log") {
            continue;
        }
        if path.is_dir() {
            collect_parquet(root, &path, found);
        } else if path.extension().is_some_and(|e| e == "parquet") {
            let rel = path.strip_prefix(root).expect("under root");
            found.insert(rel.to_string_lossy().into_owned());
        }
    }
}

/// Compaction of every partition holding two or more files under 64 MiB, no retry.
pub fn compact_small_files() -> tablekeeper_delta::CompactOptions {
    tablekeeper_delta::CompactOptions {
        target_file_size: 64 * 1024 * 1024,
        min_small_files: 2,
        small_file_factor: 1.0,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 0,
    }
}

/// A purge of every file carrying a deletion vector, 64 MiB files, no retry.
pub fn purge_vectors() -> tablekeeper_delta::PurgeOptions {
    tablekeeper_delta::PurgeOptions {
        target_file_size: 64 * 1024 * 1024,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 0,
    }
}

/// A Z-order of every partition on `columns`, 64 MiB files, no retry.
pub fn zorder_on(columns: &[&str]) -> tablekeeper_delta::ZorderOptions {
    tablekeeper_delta::ZorderOptions {
        columns: columns.iter().map(|c| (*c).to_owned()).collect(),
        target_file_size: 64 * 1024 * 1024,
        since_version: None,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 0,
    }
}

/// A checkpoint now, whatever the commit count, leaving the log as it is.
pub fn forced_checkpoint() -> tablekeeper_delta::CheckpointOptions {
    tablekeeper_delta::CheckpointOptions {
        max_commits_since_checkpoint: 1,
        log_retention: std::time::Duration::from_secs(30 * 86_400),
        force: true,
        log_cleanup: tablekeeper_delta::LogCleanup::Unrecorded,
        pins: Vec::new(),
    }
}

pub fn row(id: i64, date: &str) -> Row {
    (id, date.to_owned(), format!("type{}", id % 3), id * 10)
}

pub fn rows(ids: std::ops::Range<i64>, date: &str) -> Vec<Row> {
    ids.map(|id| row(id, date)).collect()
}

fn arrow_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", ArrowType::Int64, false),
        Field::new("event_date", ArrowType::Utf8, true),
        Field::new("event_type", ArrowType::Utf8, true),
        Field::new("value", ArrowType::Int64, true),
    ]))
}

pub fn batch(rows: &[Row]) -> RecordBatch {
    RecordBatch::try_new(
        arrow_schema(),
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.1.as_str()),
            )),
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.2.as_str()),
            )),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
        ],
    )
    .expect("batch")
}

/// Creates an empty table; `partitioned` partitions by `event_date`.
pub async fn create_table(partitioned: bool, properties: &[(&str, &str)]) -> TestTable {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().to_str().expect("utf-8 path").to_owned();
    let mut builder = CreateBuilder::new()
        .with_location(uri.clone())
        .with_columns(vec![
            StructField::new("id", DataType::LONG, false),
            StructField::new("event_date", DataType::STRING, true),
            StructField::new("event_type", DataType::STRING, true),
            StructField::new("value", DataType::LONG, true),
        ])
        .with_configuration(properties.iter().map(|(k, v)| (*k, Some(*v))));
    if partitioned {
        builder = builder.with_partition_columns(["event_date"]);
    }
    builder.await.expect("create table");
    TestTable { dir, uri }
}

pub async fn read_rows(table: DeltaTable) -> Vec<Row> {
    let (_, stream) = table.scan_table().await.expect("scan");
    let batches = collect_sendable_stream(stream).await.expect("collect");
    let mut out = Vec::new();
    for batch in batches {
        let col = |name: &str, ty: &ArrowType| {
            let idx = batch.schema().index_of(name).expect("column");
            cast(batch.column(idx), ty).expect("cast")
        };
        let ids = col("id", &ArrowType::Int64);
        let dates = col("event_date", &ArrowType::Utf8);
        let types = col("event_type", &ArrowType::Utf8);
        let values = col("value", &ArrowType::Int64);
        let ids = ids.as_any().downcast_ref::<Int64Array>().expect("ids");
        let dates = dates.as_any().downcast_ref::<StringArray>().expect("dates");
        let types = types.as_any().downcast_ref::<StringArray>().expect("types");
        let values = values
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("values");
        for i in 0..batch.num_rows() {
            out.push((
                ids.value(i),
                dates.value(i).to_owned(),
                types.value(i).to_owned(),
                if values.is_null(i) {
                    i64::MIN
                } else {
                    values.value(i)
                },
            ));
        }
    }
    out.sort();
    out
}

/// Files (active) per partition directory prefix.
pub fn count_in_partition(paths: &BTreeSet<String>, date: &str) -> usize {
    let prefix = format!("event_date={date}/");
    paths.iter().filter(|p| p.starts_with(&prefix)).count()
}

/// Runs compaction, Z-order (on `event_type`) and a full VACUUM with zero retention on
/// `t`: every operation that rewrites or deletes files. Refusal tests expect each to fail.
pub async fn rewriting_operations(
    t: &TestTable,
) -> Vec<Result<tablekeeper_delta::OpReport, tablekeeper_delta::DeltaError>> {
    use tablekeeper_delta::{optimize, vacuum, CompactOptions, Optimize, ZorderOptions};
    let cancel = tokio_util::sync::CancellationToken::new();
    let target = 64 * 1024 * 1024;
    vec![
        optimize(
            &t.uri,
            Optimize::Compact(&CompactOptions {
                target_file_size: target,
                min_small_files: 2,
                small_file_factor: 0.75,
                compression: Default::default(),
                dry_run: false,
                max_conflict_retries: 0,
            }),
            &cancel,
        )
        .await,
        optimize(
            &t.uri,
            Optimize::ZOrder(&ZorderOptions {
                columns: vec!["event_type".into()],
                target_file_size: target,
                since_version: None,
                compression: Default::default(),
                dry_run: false,
                max_conflict_retries: 0,
            }),
            &cancel,
        )
        .await,
        vacuum(&t.uri, &vacuum_every_unreferenced_file(), &cancel).await,
    ]
}

/// A full VACUUM with no retention at all: every file no version references goes, unless
/// something else keeps it.
pub fn vacuum_every_unreferenced_file() -> tablekeeper_delta::VacuumOptions {
    use tablekeeper_delta::{VacuumMode, VacuumOptions};
    VacuumOptions {
        inventory_retention: std::time::Duration::ZERO,
        allow_short_retention: true,
        mode: VacuumMode::Full,
        dry_run: false,
        stale_watch: tablekeeper_delta::DEFAULT_STALE_WATCH,
        keep: Default::default(),
    }
}

/// A file no version references, `name` under the table at `dir`, written long ago (as a
/// failed rewrite leaves one): any VACUUM may delete it.
pub fn expired_orphan(dir: &FsPath, name: &str) -> std::path::PathBuf {
    let orphan = dir.join(name);
    std::fs::write(&orphan, b"PAR1").expect("orphan");
    std::fs::File::options()
        .write(true)
        .open(&orphan)
        .and_then(|f| {
            f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(86_400))
        })
        .expect("backdate");
    orphan
}

/// The `add` actions of the newest commit of the table at `dir`.
pub fn last_adds(dir: &FsPath) -> Vec<serde_json::Value> {
    let lines = log_lines(dir);
    let newest = lines.last().map_or(0, |(v, _)| *v);
    lines
        .into_iter()
        .filter(|(v, _)| *v == newest)
        .filter_map(|(_, action)| action.get("add").cloned())
        .collect()
}

/// What a refused operation must leave unchanged: version, data files, log entries.
#[derive(Debug, PartialEq, Eq)]
pub struct Footprint {
    version: u64,
    data_files: BTreeSet<String>,
    log_entries: usize,
}

impl Footprint {
    pub async fn of(t: &TestTable) -> Self {
        Self {
            version: t.version().await,
            data_files: t.parquet_on_disk(),
            log_entries: std::fs::read_dir(t.path().join("_delta_log"))
                .expect("read _delta_log")
                .count(),
        }
    }
}

/// Every action of the table's JSON log, in version order (for tables without checkpoints).
pub fn log_lines(dir: &FsPath) -> Vec<(u64, serde_json::Value)> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir.join("_delta_log")).unwrap().flatten() {
        let path = entry.path();
        let Some(version) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            lines.push((version, serde_json::from_str(line).unwrap()));
        }
    }
    lines.sort_by_key(|(v, _)| *v);
    lines
}

/// The table's latest `metaData` action and the version a next commit takes, from
/// [`log_lines`]: what a hand-written `SET TBLPROPERTIES` commit starts from.
pub fn latest_metadata(dir: &FsPath) -> (serde_json::Value, u64) {
    let lines = log_lines(dir);
    let next = lines.last().map_or(0, |(v, _)| v + 1);
    let metadata = lines
        .into_iter()
        .rev()
        .find_map(|(_, a)| a.get("metaData").cloned())
        .expect("the log has a metaData action");
    (metadata, next)
}

/// The active files' `add` actions, replayed from [`log_lines`].
pub fn active_adds(dir: &FsPath) -> Vec<serde_json::Value> {
    let mut active: std::collections::BTreeMap<String, serde_json::Value> = Default::default();
    for (_, action) in log_lines(dir) {
        if let Some(add) = action.get("add") {
            active.insert(add["path"].as_str().unwrap().to_owned(), add.clone());
        } else if let Some(remove) = action.get("remove") {
            active.remove(remove["path"].as_str().unwrap());
        }
    }
    active.into_values().collect()
}

/// A first probe of the table at `uri` (64 MiB target files).
pub async fn probe_once(uri: &str) -> tablekeeper_delta::Probe {
    tablekeeper_delta::Prober::new()
        .probe(
            uri,
            &tablekeeper_delta::ProbeOptions::for_target(64 * 1024 * 1024),
        )
        .await
        .expect("probe")
}

/// Writes `actions` as commit `version` of the table at `dir`, as another engine's commit
/// lands: the hand-written log of a feature no writer here turns on.
pub fn write_commit(dir: &FsPath, version: u64, actions: &[serde_json::Value]) {
    let text: String = actions.iter().map(|a| format!("{a}\n")).collect();
    std::fs::write(
        dir.join("_delta_log").join(format!("{version:020}.json")),
        text,
    )
    .expect("write the commit");
}
