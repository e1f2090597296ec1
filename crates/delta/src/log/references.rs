//! The files a table's log references, read without deltalake: every data and deletion-vector
//! file of every version inside a window, from the table's JSON commits and checkpoints.
//!
//! Owns reading a log that deltalake may not load or whose files it cannot read: a shallow
//! clone (Spark's `SHALLOW CLONE` writes `add` paths as absolute URIs into the source's
//! directory, `file:/…`, `s3a://…`, `abfss://…`), or a table built over another's files. VACUUM
//! of a source keeps what such referrers reference ([`crate::retention::keep`]). Checkpoints are
//! read as classic single- or multi-part Parquet and as v2 (Parquet or JSON, with sidecars).
//! This module only reads: it never writes or deletes anything, under any table.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use deltalake::arrow::array::{Array, AsArray, RecordBatch, StructArray};
use deltalake::logstore::object_store::{GetOptions, ObjectStore};
use deltalake::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use deltalake::parquet::arrow::ProjectionMask;
use deltalake::Path;
use serde_json::{Map, Value};

use crate::error::DeltaError;
use crate::log::deletion_vector::DeletionVector;
use crate::log::path::decode_path;
use crate::log::read::{list_log, read_commit, LogListing};
use crate::open::unguarded_log_store;

/// What a log references inside a window, and at which versions the window starts and ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LogReferences {
    /// The first version of the window (time travel to its start lands here).
    pub from_version: u64,
    /// The latest version.
    pub latest: u64,
    /// Every data file and deletion-vector file referenced by a version in the window, as the
    /// log writes them (percent-decoded): relative to the table root, or absolute URIs.
    pub files: BTreeSet<String>,
}

/// Reads the log at `uri` and collects every file referenced by a version committed after
/// `now_ms - window` (and by the version time travel to that instant lands on).
///
/// A log that cannot be replayed to the window's first version (no checkpoint at or before
/// it and commits missing from 0) is an error: what it references is then unknown.
pub(crate) async fn log_references(
    uri: &str,
    window: Duration,
    now_ms: i64,
) -> Result<LogReferences, DeltaError> {
    let log_store = unguarded_log_store(uri)?;
    let store = log_store.object_store(None);
    let listing = list_log(store.as_ref(), uri).await?;
    let Some(latest) = listing.commits.keys().next_back().copied() else {
        return Err(DeltaError::NotADeltaTable {
            table: uri.to_owned(),
        });
    };
    let cutoff = now_ms.saturating_sub(i64::try_from(window.as_millis()).unwrap_or(i64::MAX));

    // newest first until the commit at or before the cutoff
    let mut window_files = BTreeSet::new();
    let mut start = None;
    for version in listing.commits.keys().rev().copied() {
        let Some(commit) = read_commit(log_store.as_ref(), uri, version).await? else {
            break;
        };
        if commit.window_time_ms() <= cutoff {
            start = Some(version);
            break;
        }
        for add in commit.adds {
            window_files.extend(add.deletion_vector.and_then(|dv| dv.file));
            window_files.push_path(add.path);
        }
    }
    let earliest =
        listing
            .earliest_reconstructable(latest)
            .ok_or_else(|| DeltaError::IncompleteLog {
                table: uri.to_owned(),
                reason:
                    "no checkpoint or complete commit history: the files its versions reference \
                     cannot be known"
                        .into(),
            })?;
    let from_version = start.map_or(earliest, |s| s.max(earliest));
    let mut files = files_at(store, log_store.as_ref(), uri, &listing, from_version).await?;
    files.append(&mut window_files);
    Ok(LogReferences {
        from_version,
        latest,
        files,
    })
}

trait PushPath {
    fn push_path(&mut self, path: String);
}

impl PushPath for BTreeSet<String> {
    fn push_path(&mut self, path: String) {
        if !path.is_empty() {
            self.insert(path);
        }
    }
}

/// Every file (data and deletion vector) of the table's state at `version`: the newest
/// complete checkpoint at or before it, then the JSON commits up to it.
async fn files_at(
    store: Arc<dyn ObjectStore>,
    log_store: &dyn deltalake::logstore::LogStore,
    uri: &str,
    listing: &LogListing,
    version: u64,
) -> Result<BTreeSet<String>, DeltaError> {
    let contiguous = |from: u64| (from + 1..=version).all(|v| listing.commits.contains_key(&v));
    let base = listing
        .complete_checkpoints()
        .rev()
        .filter(|cp| *cp <= version)
        .find(|cp| contiguous(*cp));
    let (mut active, first_commit) = match base {
        Some(cp) => (
            read_checkpoint(&store, uri, listing, cp)
                .await?
                .into_iter()
                .collect::<HashMap<_, _>>(),
            cp + 1,
        ),
        None if listing.commits.contains_key(&0) && contiguous(0) => (Default::default(), 0),
        None => {
            return Err(DeltaError::IncompleteLog {
                table: uri.to_owned(),
                reason: format!(
                "version {version} cannot be rebuilt: no checkpoint at or before it and commits \
                     missing since 0"
            ),
            })
        }
    };
    for v in first_commit..=version {
        let Some(commit) = read_commit(log_store, uri, v).await? else {
            return Err(DeltaError::IncompleteLog {
                table: uri.to_owned(),
                reason: format!("commit {v} disappeared while the log was read"),
            });
        };
        for remove in commit.removes {
            active.remove(&remove.path);
        }
        for add in commit.adds {
            active.insert(add.path, add.deletion_vector.and_then(|dv| dv.file));
        }
    }
    let mut files = BTreeSet::new();
    for (path, dv) in active {
        files.push_path(path);
        files.extend(dv);
    }
    Ok(files)
}

/// An active file and the file holding its deletion vector.
type ActiveRef = (String, Option<String>);

/// The adds of one checkpoint version, every part and every sidecar.
async fn read_checkpoint(
    store: &Arc<dyn ObjectStore>,
    uri: &str,
    listing: &LogListing,
    version: u64,
) -> Result<Vec<ActiveRef>, DeltaError> {
    let parts: Vec<&Path> = listing
        .files
        .iter()
        .filter(|entry| {
            entry.version == version
                && entry
                    .location
                    .filename()
                    .is_some_and(|name| name.contains(".checkpoint"))
        })
        .map(|entry| &entry.location)
        .collect();
    // a version may hold a classic and a v2 checkpoint side by side: either describes the
    // same state, so reading both only repeats paths
    let mut adds = Vec::new();
    let mut sidecars = Vec::new();
    for part in parts {
        let bytes = get(store, uri, part).await?;
        let name = part.filename().unwrap_or_default();
        let found = if name.ends_with(".json") {
            json_checkpoint(&bytes)
        } else {
            parquet_checkpoint(bytes)
        }
        .map_err(|reason| DeltaError::MalformedLog {
            table: uri.to_owned(),
            reason: format!("checkpoint `{part}`: {reason}"),
        })?;
        adds.extend(found.adds);
        sidecars.extend(found.sidecars);
    }
    for sidecar in sidecars {
        let location = Path::from(format!("_delta_log/_sidecars/{sidecar}"));
        let bytes = get(store, uri, &location).await?;
        let found = parquet_checkpoint(bytes).map_err(|reason| DeltaError::MalformedLog {
            table: uri.to_owned(),
            reason: format!("sidecar `{location}`: {reason}"),
        })?;
        adds.extend(found.adds);
    }
    Ok(adds)
}

async fn get(
    store: &Arc<dyn ObjectStore>,
    uri: &str,
    location: &Path,
) -> Result<Bytes, DeltaError> {
    let result = store
        .get_opts(location, GetOptions::default())
        .await
        .map_err(|err| DeltaError::store(uri, "reading a checkpoint", err))?;
    result
        .bytes()
        .await
        .map_err(|err| DeltaError::store(uri, "reading a checkpoint", err))
}

#[derive(Debug, Default)]
struct CheckpointPart {
    adds: Vec<ActiveRef>,
    /// Sidecar file names (relative to `_delta_log/_sidecars/`).
    sidecars: Vec<String>,
}

/// A v2 checkpoint in JSON: one action per line.
fn json_checkpoint(bytes: &[u8]) -> Result<CheckpointPart, String> {
    let text = std::str::from_utf8(bytes).map_err(|err| err.to_string())?;
    let mut part = CheckpointPart::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let value: Value = serde_json::from_str(line).map_err(|err| err.to_string())?;
        if let Some(Value::Object(add)) = value.get("add") {
            part.adds.push(add_ref(add));
        } else if let Some(path) = value.pointer("/sidecar/path").and_then(Value::as_str) {
            part.sidecars.push(decode_path(path));
        }
    }
    Ok(part)
}

fn add_ref(add: &Map<String, Value>) -> ActiveRef {
    let path = decode_path(add.get("path").and_then(Value::as_str).unwrap_or_default());
    let dv = DeletionVector::from_json(add.get("deletionVector")).and_then(|dv| dv.file);
    (path, dv)
}

/// A Parquet checkpoint part or sidecar: its `add` (and, for v2, `sidecar`) columns only.
fn parquet_checkpoint(bytes: Bytes) -> Result<CheckpointPart, String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|err| err.to_string())?;
    let schema = builder.schema().clone();
    let roots: Vec<usize> = ["add", "sidecar"]
        .iter()
        .filter_map(|name| schema.index_of(name).ok())
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(mask)
        .build()
        .map_err(|err| err.to_string())?;
    let mut part = CheckpointPart::default();
    for batch in reader {
        let batch = batch.map_err(|err| err.to_string())?;
        if let Some(adds) = struct_column(&batch, "add") {
            part.adds.extend(parquet_adds(adds));
        }
        if let Some(sidecars) = struct_column(&batch, "sidecar") {
            if let Some(paths) = sidecars.column_by_name("path") {
                let paths = paths
                    .as_string_opt::<i32>()
                    .ok_or("sidecar.path is not a string")?;
                for row in 0..sidecars.len() {
                    if sidecars.is_valid(row) && paths.is_valid(row) {
                        part.sidecars.push(decode_path(paths.value(row)));
                    }
                }
            }
        }
    }
    Ok(part)
}

fn struct_column<'a>(batch: &'a RecordBatch, name: &str) -> Option<&'a StructArray> {
    batch.column_by_name(name)?.as_struct_opt()
}

fn parquet_adds(adds: &StructArray) -> Vec<ActiveRef> {
    let Some(paths) = adds
        .column_by_name("path")
        .and_then(|c| c.as_string_opt::<i32>())
    else {
        return Vec::new();
    };
    let dvs = adds
        .column_by_name("deletionVector")
        .and_then(|c| c.as_struct_opt());
    (0..adds.len())
        .filter(|row| adds.is_valid(*row) && paths.is_valid(*row))
        .map(|row| {
            let dv = dvs
                .filter(|dvs| dvs.is_valid(row))
                .and_then(|dvs| dv_json(dvs, row))
                .and_then(|json| DeletionVector::from_json(Some(&json)))
                .and_then(|dv| dv.file);
            (decode_path(paths.value(row)), dv)
        })
        .collect()
}

/// One row of a checkpoint's `add.deletionVector` struct as the JSON descriptor it stands for.
fn dv_json(dvs: &StructArray, row: usize) -> Option<Value> {
    let text = |name: &str| {
        let column = dvs.column_by_name(name)?.as_string_opt::<i32>()?;
        column.is_valid(row).then(|| column.value(row).to_owned())
    };
    let number = |name: &str| -> Option<i64> {
        let column = dvs.column_by_name(name)?;
        if !column.is_valid(row) {
            return None;
        }
        use deltalake::arrow::datatypes::{Int32Type, Int64Type};
        column
            .as_primitive_opt::<Int64Type>()
            .map(|c| c.value(row))
            .or_else(|| {
                column
                    .as_primitive_opt::<Int32Type>()
                    .map(|c| i64::from(c.value(row)))
            })
    };
    let mut descriptor = Map::new();
    descriptor.insert("storageType".into(), text("storageType")?.into());
    descriptor.insert("pathOrInlineDv".into(), text("pathOrInlineDv")?.into());
    if let Some(offset) = number("offset") {
        descriptor.insert("offset".into(), offset.into());
    }
    descriptor.insert(
        "sizeInBytes".into(),
        number("sizeInBytes").unwrap_or(0).into(),
    );
    descriptor.insert(
        "cardinality".into(),
        number("cardinality").unwrap_or(0).into(),
    );
    Some(Value::Object(descriptor))
}

/// The path under `root` (an inventory table path) that an absolute reference names, relative
/// to the root and decoded; `None` for a relative reference or one outside the root.
///
/// Engines spell one location several ways: Spark writes local files as `file:/p`, Hadoop's
/// S3 connectors `s3a://` or `s3n://`, Azure `abfss://container@account.dfs.core.windows.net/p`
/// where deltalake's inventory paths may say `az://container/p`. All of them match.
pub(crate) fn under_root(reference: &str, root: &str) -> Option<String> {
    let (ref_scheme, ref_rest) = location(reference)?;
    let (root_scheme, root_rest) = location(root)?;
    if ref_scheme != root_scheme {
        return None;
    }
    let root_rest = format!("{}/", root_rest.trim_end_matches('/'));
    ref_rest
        .strip_prefix(root_rest.as_str())
        .filter(|rest| !rest.is_empty())
        .map(str::to_owned)
}

/// A location as (storage family, `bucket/key` or `/local/path`), decoded.
fn location(text: &str) -> Option<(&'static str, String)> {
    let text = decode_path(text);
    if text.starts_with('/') {
        return Some(("file", collapse_slashes(&text)));
    }
    let (scheme, rest) = text.split_once(':')?;
    let family = match scheme.to_ascii_lowercase().as_str() {
        "file" => return Some(("file", collapse_slashes(rest))),
        "s3" | "s3a" | "s3n" => "s3",
        "gs" | "gcs" => "gs",
        "az" | "adl" | "abfs" | "abfss" | "wasb" | "wasbs" | "azure" => "azure",
        _ => return None,
    };
    let rest = rest.strip_prefix("//")?;
    let rest = if family == "azure" {
        // `container@account.host/path` → `container/path`
        match rest.split_once('/') {
            Some((authority, path)) => {
                let container = authority.split_once('@').map_or(authority, |(c, _)| c);
                format!("{container}/{path}")
            }
            None => rest.split_once('@').map_or(rest, |(c, _)| c).to_owned(),
        }
    } else {
        rest.to_owned()
    };
    Some((family, rest))
}

fn collapse_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out
}

/// Whether a path as the log writes it is absolute (names its own location).
pub(crate) fn is_absolute(path: &str) -> bool {
    location(path).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log read here sees the same files as deltalake's replay, on tables other engines
    /// wrote: classic and multi-part checkpoints (Spark), v2 checkpoints with sidecars
    /// (Databricks 17.0), deletion vectors (Databricks).
    #[tokio::test]
    async fn the_latest_version_references_what_deltalake_replays() {
        for name in [
            "simple_table_with_checkpoint",
            "checkpoint-v2-table",
            "table_with_deletion_logs",
            "table-with-dv-small",
            "delta-0.8.0-partitioned",
        ] {
            let dir = tempfile::tempdir().expect("temp dir");
            crate::fixtures::aged::copy_reference(name, dir.path());
            let uri = dir.path().to_str().expect("utf-8");
            let table = crate::open::open_table(uri)
                .await
                .expect("deltalake loads it");
            let expected: BTreeSet<String> = crate::snapshot::needed_files(
                &crate::snapshot::active_files(&table, uri)
                    .await
                    .expect("files"),
            )
            .into_iter()
            .collect();
            let read = log_references(uri, Duration::ZERO, chrono::Utc::now().timestamp_millis())
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(read.files, expected, "{name}");
            assert_eq!(Some(read.latest), table.version(), "{name}");
        }
    }

    #[test]
    fn spark_spellings_of_one_location_match() {
        let root = "/data/silver/orders";
        for reference in [
            "file:/data/silver/orders/part-0.parquet",
            "file:///data/silver/orders/part-0.parquet",
            "/data/silver/orders/part-0.parquet",
        ] {
            assert_eq!(
                under_root(reference, root).as_deref(),
                Some("part-0.parquet"),
                "{reference}"
            );
        }
        assert_eq!(
            under_root(
                "s3a://lake/silver/orders/d=1/part%20a.parquet",
                "s3://lake/silver/orders"
            )
            .as_deref(),
            Some("d=1/part a.parquet")
        );
        assert_eq!(
            under_root(
                "abfss://lake@acct.dfs.core.windows.net/silver/orders/p.parquet",
                "az://lake/silver/orders/"
            )
            .as_deref(),
            Some("p.parquet")
        );
    }

    #[test]
    fn other_roots_and_relative_paths_do_not_match() {
        assert_eq!(
            under_root(
                "file:/data/silver/orders_v2/p.parquet",
                "/data/silver/orders"
            ),
            None
        );
        assert_eq!(under_root("part-0.parquet", "/data/silver/orders"), None);
        assert_eq!(
            under_root("gs://lake/silver/orders/p", "s3://lake/silver/orders"),
            None
        );
        assert!(!is_absolute("part-0.parquet"));
        assert!(!is_absolute("d=1:2/part-0.parquet"));
        assert!(is_absolute("s3a://lake/p"));
        assert!(is_absolute("file:/p"));
    }
}
