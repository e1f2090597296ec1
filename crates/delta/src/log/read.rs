//! Reading the transaction log directly: listings, single commits, partition keys.
//!
//! deltalake's history API carries no version numbers and its actions fail to parse as a whole
//! when one action is unusual, so this module reads commit JSON itself, line by line, keeping
//! only the fields the probe, the guard and the vacuum cross-check need. It only ever reads:
//! it must never write or delete anything under `_delta_log`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use deltalake::logstore::object_store::GetOptions;
use deltalake::logstore::{commit_uri_from_version, LogStore};
use deltalake::{ObjectStore, ObjectStoreError, Path};
use futures::{StreamExt, TryStreamExt};
use serde_json::{Map, Value};

use crate::error::DeltaError;
use crate::log::deletion_vector::DeletionVector;
use crate::log::path::decode_path;

/// Name of the commitInfo key under which tablekeeper records who wrote a commit.
pub(crate) const MARKER_KEY: &str = "tablekeeper";

/// Concurrent commit reads when catching up on history; small JSON GETs, so a modest fan-out
/// keeps object-store request rates polite while hiding latency (S3 handles thousands/s).
pub(crate) const LOG_READ_CONCURRENCY: usize = 16;

/// The domain in which row tracking keeps its high-water mark.
pub(crate) const ROW_TRACKING_DOMAIN: &str = "delta.rowTracking";

/// Partition value that Hive-style layouts and Spark use for null.
pub(crate) const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// What a listing of `_delta_log` holds.
#[derive(Debug, Default, Clone)]
pub(crate) struct LogListing {
    /// JSON commit versions with their object modification time (ms since epoch).
    pub commits: BTreeMap<u64, i64>,
    /// Checkpoints (single- or multi-part, classic or v2) by version.
    pub checkpoints: BTreeMap<u64, CheckpointFiles>,
    /// Every versioned file (commits, checkpoint files, checksums) with its version and
    /// modification time: what log cleanup may delete.
    pub files: Vec<LogEntry>,
}

/// One versioned file of `_delta_log`.
#[derive(Debug, Clone)]
pub(crate) struct LogEntry {
    pub location: Path,
    pub version: u64,
    pub modified_ms: i64,
}

/// The files of one checkpoint version.
#[derive(Debug, Default, Clone)]
pub(crate) struct CheckpointFiles {
    /// A single-file checkpoint (classic or v2) is present.
    pub single: bool,
    /// Multi-part checkpoints: parts present, by the part count their names declare.
    pub parts: BTreeMap<u32, BTreeSet<u32>>,
}

impl CheckpointFiles {
    /// A reader can load this checkpoint: a single file, or every part of a multi-part one.
    pub fn complete(&self) -> bool {
        self.single
            || self
                .parts
                .iter()
                .any(|(total, present)| (1..=*total).all(|part| present.contains(&part)))
    }

    /// For an incomplete multi-part checkpoint: the missing part numbers and the count.
    pub fn missing_parts(&self) -> Option<(Vec<u32>, u32)> {
        if self.complete() {
            return None;
        }
        let (total, present) = self.parts.iter().next_back()?;
        Some((
            (1..=*total).filter(|p| !present.contains(p)).collect(),
            *total,
        ))
    }
}

impl LogListing {
    /// Versions that have a complete checkpoint.
    pub fn complete_checkpoints(&self) -> impl DoubleEndedIterator<Item = u64> + '_ {
        self.checkpoints
            .iter()
            .filter(|(_, files)| files.complete())
            .map(|(v, _)| *v)
    }

    /// The oldest version whose state can still be reconstructed from the files on disk: 0 when
    /// every commit from 0 is present, else the oldest complete checkpoint followed by
    /// contiguous commits up to `latest`.
    pub fn earliest_reconstructable(&self, latest: u64) -> Option<u64> {
        let contiguous_from =
            |start: u64| (start + 1..=latest).all(|v| self.commits.contains_key(&v));
        if self.commits.contains_key(&0) && contiguous_from(0) {
            return Some(0);
        }
        self.complete_checkpoints()
            .filter(|cp| *cp <= latest)
            .find(|cp| contiguous_from(*cp))
    }
}

/// Lists `_delta_log` once.
pub(crate) async fn list_log(
    store: &dyn ObjectStore,
    table: &str,
) -> Result<LogListing, DeltaError> {
    let prefix = Path::from("_delta_log");
    let mut listing = LogListing::default();
    let mut entries = store.list(Some(&prefix));
    while let Some(entry) = entries.next().await {
        let meta = entry.map_err(|err| DeltaError::store(table, "listing _delta_log", err))?;
        listing.add(&meta.location, meta.last_modified.timestamp_millis());
    }
    Ok(listing)
}

impl LogListing {
    /// Takes in one listed object, given relative to the table root (`_delta_log/NAME`).
    pub(crate) fn add(&mut self, location: &Path, modified_ms: i64) {
        // files in subdirectories of _delta_log (e.g. `_commits/`, `_sidecars/`) are not
        // versioned log files
        if location.parts().count() != 2 {
            return;
        }
        let Some(kind) = location.filename().and_then(classify_log_file) else {
            return;
        };
        let version = match kind {
            LogFile::Commit(version) => {
                self.commits.insert(version, modified_ms);
                version
            }
            LogFile::Checkpoint { version, part } => {
                let files = self.checkpoints.entry(version).or_default();
                match part {
                    Some((part, total)) => {
                        files.parts.entry(total).or_default().insert(part);
                    }
                    None => files.single = true,
                }
                version
            }
            LogFile::Checksum(version) => version,
        };
        self.files.push(LogEntry {
            location: location.clone(),
            version,
            modified_ms,
        });
    }
}

/// The version of a JSON commit directly in `_delta_log` newer than `after`.
fn newer_commit(location: &Path, after: u64) -> Option<u64> {
    if location.parts().count() != 2 {
        return None;
    }
    match location.filename().and_then(classify_log_file) {
        Some(LogFile::Commit(version)) if version > after => Some(version),
        _ => None,
    }
}

/// JSON commit versions newer than `after`, ascending, listed from `after` on (one LIST request
/// per 1,000 entries past it, however long the log).
pub(crate) async fn commits_after(
    store: &dyn ObjectStore,
    table: &str,
    after: u64,
) -> Result<Vec<u64>, DeltaError> {
    let prefix = Path::from("_delta_log");
    let offset = commit_uri_from_version(Some(after));
    let mut versions = Vec::new();
    let mut entries = store.list_with_offset(Some(&prefix), &offset);
    while let Some(entry) = entries.next().await {
        let meta = entry.map_err(|err| DeltaError::store(table, "listing _delta_log", err))?;
        versions.extend(newer_commit(&meta.location, after));
    }
    versions.sort_unstable();
    Ok(versions)
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LogFile {
    Commit(u64),
    /// A checkpoint file; `part` is (part, parts) for a classic multi-part checkpoint.
    Checkpoint {
        version: u64,
        part: Option<(u32, u32)>,
    },
    Checksum(u64),
}

/// Recognises `<20 digits>.json`, `<20 digits>.crc` and the checkpoint names:
/// `.checkpoint.parquet`, `.checkpoint.<part>.<parts>.parquet` and v2's
/// `.checkpoint.<uuid>.parquet|json`. Log compaction files (`<v>.<v>.compacted.json`) and
/// anything else are not versioned files of their own.
pub(crate) fn classify_log_file(name: &str) -> Option<LogFile> {
    let (digits, rest) = name.split_at_checked(20)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let version: u64 = digits.parse().ok()?;
    match rest {
        ".json" => return Some(LogFile::Commit(version)),
        ".crc" => return Some(LogFile::Checksum(version)),
        _ => {}
    }
    if rest == ".checkpoint.parquet" {
        return Some(LogFile::Checkpoint {
            version,
            part: None,
        });
    }
    let middle = rest.strip_prefix(".checkpoint.")?;
    let middle = middle
        .strip_suffix(".parquet")
        .or_else(|| middle.strip_suffix(".json"))?;
    if middle.is_empty() {
        return None;
    }
    let part = match middle.split_once('.') {
        Some((part, total))
            if part.bytes().all(|b| b.is_ascii_digit())
                && total.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Some((part.parse().ok()?, total.parse().ok()?))
        }
        _ => None,
    };
    Some(LogFile::Checkpoint { version, part })
}

/// An add or remove action, reduced to what this crate needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileAction {
    /// Path relative to the table root, percent-decoded.
    pub path: String,
    pub size: Option<u64>,
    pub partition_values: HashMap<String, Option<String>>,
    pub data_change: bool,
    pub deletion_timestamp: Option<i64>,
    /// `stats.numRecords` of an add, when the writer recorded statistics.
    pub num_records: Option<u64>,
    /// Its deletion vector, when it has one (removes carry the vector of the file they end).
    pub deletion_vector: Option<DeletionVector>,
}

impl FileAction {
    /// Rows its deletion vector marks deleted; 0 without one.
    pub fn deleted_rows(&self) -> u64 {
        self.deletion_vector.as_ref().map_or(0, |dv| dv.cardinality)
    }

    /// Rows still visible in it, when its statistics say how many it holds.
    pub fn live_rows(&self) -> Option<u64> {
        self.num_records
            .map(|rows| rows.saturating_sub(self.deleted_rows()))
    }
}

/// One JSON commit, reduced.
#[derive(Debug, Clone, Default)]
pub(crate) struct Commit {
    pub version: u64,
    /// Modification time of the commit file, when it was read from storage.
    pub modified_ms: Option<i64>,
    pub commit_info: Option<Map<String, Value>>,
    pub adds: Vec<FileAction>,
    pub removes: Vec<FileAction>,
    /// Change-data files (`cdc` actions) the commit wrote.
    pub cdc_files: u64,
    /// The commit holds a `metaData` action.
    pub changes_metadata: bool,
    /// The commit holds a `protocol` action.
    pub changes_protocol: bool,
    /// The row tracking high-water mark the commit set (`delta.rowTracking` domain).
    pub row_id_high_water_mark: Option<i64>,
}

impl Commit {
    /// Parses newline-delimited actions; unknown actions are ignored.
    pub fn parse(version: u64, bytes: &[u8]) -> Result<Commit, String> {
        let text = std::str::from_utf8(bytes)
            .map_err(|err| format!("commit {version} is not utf-8: {err}"))?;
        let mut commit = Commit {
            version,
            ..Commit::default()
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let value: Value = serde_json::from_str(line)
                .map_err(|err| format!("commit {version} holds invalid json: {err}"))?;
            let Value::Object(mut action) = value else {
                continue;
            };
            if let Some(Value::Object(info)) = action.remove("commitInfo") {
                commit.commit_info = Some(info);
            } else if let Some(Value::Object(add)) = action.remove("add") {
                commit.adds.push(file_action(&add));
            } else if let Some(Value::Object(remove)) = action.remove("remove") {
                commit.removes.push(file_action(&remove));
            } else if action.contains_key("cdc") {
                commit.cdc_files += 1;
            } else if action.contains_key("metaData") {
                commit.changes_metadata = true;
            } else if action.contains_key("protocol") {
                commit.changes_protocol = true;
            } else if let Some(Value::Object(domain)) = action.remove("domainMetadata") {
                if domain.get("domain").and_then(Value::as_str) == Some(ROW_TRACKING_DOMAIN) {
                    commit.row_id_high_water_mark = domain
                        .get("configuration")
                        .and_then(Value::as_str)
                        .and_then(high_water_mark_of);
                }
            }
        }
        Ok(commit)
    }

    /// The commit's own timestamp: in-commit timestamp when present, else commitInfo.timestamp.
    pub fn info_timestamp_ms(&self) -> Option<i64> {
        let info = self.commit_info.as_ref()?;
        info.get("inCommitTimestamp")
            .and_then(Value::as_i64)
            .or_else(|| info.get("timestamp").and_then(Value::as_i64))
    }

    /// When the commit happened: its own timestamp, else its file's modification time.
    pub fn committed_ms(&self) -> Option<i64> {
        self.info_timestamp_ms().or(self.modified_ms)
    }

    /// The commit time retention windows compare with: the later of its own timestamp and
    /// its file's modification time, so a disagreement between the two keeps more, never
    /// less; `i64::MAX` (inside every window) when neither is known.
    pub fn window_time_ms(&self) -> i64 {
        match (self.info_timestamp_ms(), self.modified_ms) {
            (Some(own), Some(file)) => own.max(file),
            (own, file) => own.or(file).unwrap_or(i64::MAX),
        }
    }

    /// Which engine wrote the commit: `commitInfo.engineInfo` (Spark, Databricks, delta-rs
    /// since 0.17), else `clientVersion` (older delta-rs).
    pub fn engine(&self) -> Option<&str> {
        self.info("engineInfo")
            .or_else(|| self.info("clientVersion"))
            .and_then(Value::as_str)
    }

    /// `commitInfo.operation`, e.g. `OPTIMIZE`, `VACUUM END`.
    pub fn operation(&self) -> Option<&str> {
        self.commit_info.as_ref()?.get("operation")?.as_str()
    }

    /// True for an OPTIMIZE whose `operationParameters.zOrderBy` names at least one column.
    ///
    /// Spark records `zOrderBy` as a JSON string (`"[\"eventType\"]"`); tablekeeper writes the
    /// same through deltalake's commit metadata, since deltalake 1.1.x records no Z-order columns.
    pub fn is_zorder(&self) -> bool {
        if self.operation() != Some("OPTIMIZE") {
            return false;
        }
        let Some(params) = self
            .commit_info
            .as_ref()
            .and_then(|info| info.get("operationParameters"))
            .and_then(Value::as_object)
        else {
            return false;
        };
        match params.get("zOrderBy") {
            Some(Value::String(s)) => serde_json::from_str::<Vec<Value>>(s)
                .map(|cols| !cols.is_empty())
                .unwrap_or(!s.trim().is_empty() && s.trim() != "[]"),
            Some(Value::Array(cols)) => !cols.is_empty(),
            _ => false,
        }
    }

    /// The tablekeeper run id recorded in this commit, if tablekeeper wrote it.
    pub fn run_id(&self) -> Option<&str> {
        self.marker()?.get("runId")?.as_str()
    }

    /// tablekeeper's marker object (`commitInfo.tablekeeper`), if tablekeeper wrote it.
    pub fn marker(&self) -> Option<&Map<String, Value>> {
        self.commit_info.as_ref()?.get(MARKER_KEY)?.as_object()
    }

    /// The tablekeeper operation that wrote this commit (`compact`, `zorder`, `vacuum`,
    /// `repair`, ...), if tablekeeper wrote it.
    pub fn marker_operation(&self) -> Option<&str> {
        self.marker()?.get("operation")?.as_str()
    }

    /// A rewrite, whoever wrote it: files removed and added with `dataChange: false` and no
    /// change data, so rows only moved between files (compaction, Z-order, purge). A repair
    /// commit of tablekeeper's is none: it takes away the rows a stale commit left visible.
    pub fn is_rewrite(&self) -> bool {
        !self.removes.is_empty()
            && self.cdc_files == 0
            && self
                .removes
                .iter()
                .chain(&self.adds)
                .all(|a| !a.data_change)
            && self.marker_operation() != Some("repair")
    }

    /// For a repair commit of tablekeeper's: the stale writes it repaired.
    pub fn repaired_versions(&self) -> Vec<u64> {
        if self.marker_operation() != Some("repair") {
            return Vec::new();
        }
        self.marker()
            .and_then(|m| m.get("repairs"))
            .and_then(Value::as_array)
            .map(|versions| versions.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    }

    /// A field of `commitInfo`.
    pub fn info(&self, key: &str) -> Option<&Value> {
        self.commit_info.as_ref()?.get(key)
    }

    /// A parameter of `commitInfo.operationParameters`, as text (engines write them as
    /// strings; a few write JSON values).
    pub fn parameter(&self, key: &str) -> Option<String> {
        match self.info("operationParameters")?.get(key)? {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    }

    /// True for a commit by another writer that replaced the table's (or whole partitions')
    /// contents without a predicate: a `WRITE` in overwrite mode, or a `CREATE OR REPLACE` /
    /// `REPLACE TABLE`. Such a writer removes every file its snapshot held, so when its
    /// snapshot predates a compaction the compacted copies of the old rows survive (DESIGN.md
    /// hazards). Overwrites with a predicate (`replaceWhere`) conflict correctly and do not
    /// count.
    pub fn is_full_overwrite(&self) -> bool {
        if self.marker().is_some() {
            return false;
        }
        let has_predicate = ["predicate", "replaceWhere"].iter().any(|key| {
            self.parameter(key)
                .is_some_and(|p| !p.trim().is_empty() && p != "[]")
        });
        if has_predicate {
            return false;
        }
        match self.operation() {
            Some("WRITE" | "CREATE TABLE AS SELECT" | "CREATE OR REPLACE TABLE AS SELECT") => self
                .parameter("mode")
                .is_some_and(|mode| mode.eq_ignore_ascii_case("overwrite")),
            Some("CREATE OR REPLACE TABLE" | "REPLACE TABLE" | "REPLACE TABLE AS SELECT") => {
                !self.removes.is_empty()
            }
            _ => false,
        }
    }
}

fn file_action(obj: &Map<String, Value>) -> FileAction {
    let path = obj.get("path").and_then(Value::as_str).unwrap_or_default();
    let partition_values = obj
        .get("partitionValues")
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned)))
                .collect()
        })
        .unwrap_or_default();
    FileAction {
        path: decode_path(path),
        size: obj.get("size").and_then(Value::as_u64),
        partition_values,
        // the protocol requires dataChange; a missing flag is treated as a data change, the
        // cautious reading for every check in this crate
        data_change: obj
            .get("dataChange")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        deletion_timestamp: obj.get("deletionTimestamp").and_then(Value::as_i64),
        num_records: obj
            .get("stats")
            .and_then(Value::as_str)
            .and_then(num_records_of),
        deletion_vector: DeletionVector::from_json(obj.get("deletionVector")),
    }
}

/// `rowIdHighWaterMark` out of the `delta.rowTracking` domain's configuration.
pub(crate) fn high_water_mark_of(configuration: &str) -> Option<i64> {
    serde_json::from_str::<Value>(configuration)
        .ok()?
        .get("rowIdHighWaterMark")?
        .as_i64()
}

/// `numRecords` out of an add's `stats` JSON string, without parsing the column statistics.
pub(crate) fn num_records_of(stats: &str) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Rows {
        #[serde(rename = "numRecords")]
        num_records: Option<u64>,
    }
    serde_json::from_str::<Rows>(stats).ok()?.num_records
}

/// Reads one JSON commit; `None` when it is not (or no longer) on disk. The commit carries its
/// file's modification time, the commit time of last resort (writers that record no
/// `commitInfo`).
pub(crate) async fn read_commit(
    log_store: &dyn LogStore,
    table: &str,
    version: u64,
) -> Result<Option<Commit>, DeltaError> {
    let path = commit_uri_from_version(Some(version));
    let store = log_store.object_store(None);
    let result = match store.get_opts(&path, GetOptions::default()).await {
        Ok(result) => result,
        Err(ObjectStoreError::NotFound { .. }) => return Ok(None),
        Err(err) => return Err(DeltaError::store(table, "reading a commit", err)),
    };
    let modified_ms = result.meta.last_modified.timestamp_millis();
    let bytes = match result.bytes().await {
        Ok(bytes) => bytes,
        // cleaned up between the request and the read of its body
        Err(ObjectStoreError::NotFound { .. }) => return Ok(None),
        Err(err) => return Err(DeltaError::store(table, "reading a commit", err)),
    };
    let mut commit = Commit::parse(version, &bytes).map_err(|reason| DeltaError::MalformedLog {
        table: table.to_owned(),
        reason,
    })?;
    commit.modified_ms = Some(modified_ms);
    Ok(Some(commit))
}

/// Reads the commits `versions` concurrently, in ascending order; missing ones are `None`.
pub(crate) async fn read_commits(
    log_store: &dyn LogStore,
    table: &str,
    versions: impl IntoIterator<Item = u64>,
) -> Result<Vec<(u64, Option<Commit>)>, DeltaError> {
    futures::stream::iter(versions)
        .map(|v| async move { read_commit(log_store, table, v).await.map(|c| (v, c)) })
        .buffered(LOG_READ_CONCURRENCY)
        .try_collect()
        .await
}

/// The human-readable partition key, `col=value[/col=value]` in partition-column order;
/// `""` for an unpartitioned table and [`NULL_PARTITION`] for null values.
pub(crate) fn partition_key(
    partition_columns: &[String],
    values: &HashMap<String, Option<String>>,
) -> String {
    partition_columns
        .iter()
        .map(|col| {
            let value = values.get(col).cloned().flatten();
            format!("{col}={}", value.as_deref().unwrap_or(NULL_PARTITION))
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The partition values in partition-column order, for building filters.
pub(crate) fn ordered_partition_values(
    partition_columns: &[String],
    values: &HashMap<String, Option<String>>,
) -> Vec<(String, Option<String>)> {
    partition_columns
        .iter()
        .map(|col| (col.clone(), values.get(col).cloned().flatten()))
        .collect()
}

/// The `_last_checkpoint` hint: the newest checkpoint's version and when it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LastCheckpoint {
    pub version: u64,
    pub written_at_ms: i64,
}

/// Reads `_delta_log/_last_checkpoint`; `None` when the table never had a checkpoint.
pub(crate) async fn last_checkpoint(
    store: &dyn ObjectStore,
    uri: &str,
) -> Result<Option<LastCheckpoint>, DeltaError> {
    let path = Path::from("_delta_log/_last_checkpoint");
    let result = match store.get_opts(&path, GetOptions::new()).await {
        Ok(result) => result,
        Err(ObjectStoreError::NotFound { .. }) => return Ok(None),
        Err(err) => return Err(DeltaError::store(uri, "reading _last_checkpoint", err)),
    };
    let written_at_ms = result.meta.last_modified.timestamp_millis();
    let bytes = result
        .bytes()
        .await
        .map_err(|err| DeltaError::store(uri, "reading _last_checkpoint", err))?;
    // a malformed hint is not fatal for readers (they list the log instead); treat it as absent
    let version = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v.get("version").and_then(Value::as_u64));
    Ok(version.map(|version| LastCheckpoint {
        version,
        written_at_ms,
    }))
}

/// Commits after the newest checkpoint (all commits when there is none).
pub(crate) fn commits_since(version: u64, checkpoint: Option<LastCheckpoint>) -> u64 {
    match checkpoint {
        Some(cp) => version.saturating_sub(cp.version),
        None => version + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commits_since_counts_from_the_checkpoint() {
        let cp = LastCheckpoint {
            version: 10,
            written_at_ms: 0,
        };
        assert_eq!(commits_since(15, Some(cp)), 5);
        assert_eq!(commits_since(10, Some(cp)), 0);
        assert_eq!(commits_since(4, None), 5);
    }

    #[test]
    fn recognises_commits_and_checkpoints() {
        assert_eq!(
            classify_log_file("00000000000000000012.json"),
            Some(LogFile::Commit(12))
        );
        assert_eq!(
            classify_log_file("00000000000000000010.checkpoint.parquet"),
            Some(LogFile::Checkpoint {
                version: 10,
                part: None
            })
        );
        assert_eq!(
            classify_log_file("00000000000000000010.checkpoint.0000000001.0000000002.parquet"),
            Some(LogFile::Checkpoint {
                version: 10,
                part: Some((1, 2))
            })
        );
        assert_eq!(
            classify_log_file(
                "00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"
            ),
            Some(LogFile::Checkpoint {
                version: 10,
                part: None
            })
        );
        assert_eq!(
            classify_log_file("00000000000000000010.crc"),
            Some(LogFile::Checksum(10))
        );
        assert_eq!(classify_log_file("_last_checkpoint"), None);
        assert_eq!(
            classify_log_file("00000000000000000001.00000000000000000003.compacted.json"),
            None
        );
    }

    #[test]
    fn earliest_reconstructable_needs_a_checkpoint_after_cleanup() {
        let mut listing = LogListing::default();
        for v in 5..=12 {
            listing.commits.insert(v, 0);
        }
        assert_eq!(listing.earliest_reconstructable(12), None);
        listing
            .checkpoints
            .entry(8)
            .or_default()
            .parts
            .entry(2)
            .or_default()
            .insert(1);
        assert_eq!(
            listing.earliest_reconstructable(12),
            None,
            "part 2 of 2 is missing"
        );
        listing.checkpoints.entry(8).or_default().single = true;
        assert_eq!(listing.earliest_reconstructable(12), Some(8));
        for v in 0..5 {
            listing.commits.insert(v, 0);
        }
        assert_eq!(listing.earliest_reconstructable(12), Some(0));
    }

    #[test]
    fn parses_commit_actions_and_markers() {
        let text = r#"{"commitInfo":{"timestamp":1700000000000,"operation":"OPTIMIZE","operationParameters":{"zOrderBy":"[\"kind\"]","targetSize":"1024"},"tablekeeper":{"runId":"r1"}}}
{"remove":{"path":"d=1/a%20b.parquet","dataChange":false,"size":10,"deletionTimestamp":5,"partitionValues":{"d":"1"}}}
{"add":{"path":"d=1/c.parquet","dataChange":false,"size":20,"partitionValues":{"d":"1"},"modificationTime":1}}
{"txn":{"appId":"x","version":1}}"#;
        let commit = Commit::parse(7, text.as_bytes()).expect("parses");
        assert_eq!(commit.version, 7);
        assert_eq!(commit.info_timestamp_ms(), Some(1_700_000_000_000));
        assert!(commit.is_zorder());
        assert_eq!(commit.run_id(), Some("r1"));
        assert_eq!(commit.removes[0].path, "d=1/a b.parquet");
        assert!(!commit.removes[0].data_change);
        assert_eq!(commit.adds[0].size, Some(20));
    }

    #[test]
    fn plain_optimize_is_not_a_zorder() {
        let text =
            r#"{"commitInfo":{"operation":"OPTIMIZE","operationParameters":{"zOrderBy":"[]"}}}"#;
        assert!(!Commit::parse(1, text.as_bytes())
            .expect("parses")
            .is_zorder());
        let text =
            r#"{"commitInfo":{"operation":"OPTIMIZE","operationParameters":{"targetSize":"1"}}}"#;
        assert!(!Commit::parse(1, text.as_bytes())
            .expect("parses")
            .is_zorder());
    }

    #[test]
    fn partition_keys_follow_column_order() {
        let cols = vec!["d".to_owned(), "k".to_owned()];
        let values = HashMap::from([
            ("k".to_owned(), None),
            ("d".to_owned(), Some("2024-01-01".to_owned())),
        ]);
        assert_eq!(
            partition_key(&cols, &values),
            "d=2024-01-01/k=__HIVE_DEFAULT_PARTITION__"
        );
        assert_eq!(partition_key(&[], &HashMap::new()), "");
    }
}
