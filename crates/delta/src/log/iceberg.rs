//! The Iceberg view of a UniForm table: the metadata an Iceberg-enabled Delta writer (Databricks,
//! Delta Spark with `delta.universalFormat.enabledFormats = iceberg`) generates under the
//! table's `metadata/` after its commits — `*.metadata.json` files, Avro manifest lists and
//! manifests — naming the same Parquet files the Delta log names. Iceberg readers (Snowflake,
//! BigQuery, Trino) read the table through it.
//!
//! Owns reading it, never writing it:
//! - [`iceberg_view`]: the newest metadata file and the Delta version its converter last
//!   converted (its `delta-version` table property), for the `iceberg_metadata` drift: a
//!   tablekeeper commit leaves the Iceberg view behind until the writer's next commit converts
//!   again;
//! - [`iceberg_files`]: every file under `metadata/` and every data file a snapshot of any
//!   metadata file there references (manifest lists, then manifests), which VACUUM keeps
//!   ([`crate::retention::keep`]): an Iceberg reader given an older snapshot still finds its
//!   files.
//!
//! Anything that cannot be read is an error naming the file: VACUUM then deletes nothing.

use std::collections::{BTreeSet, HashSet};

use apache_avro::types::Value as Avro;
use deltalake::logstore::object_store::{ObjectStore, ObjectStoreExt as _};
use deltalake::Path;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::DeltaError;
use crate::log::references::under_root;

/// Where Iceberg metadata lives under the table's root.
pub(crate) const METADATA_DIR: &str = "metadata";
const METADATA_SUFFIX: &str = ".metadata.json";
/// The Iceberg table property Delta's converter sets to the Delta version it converted.
const DELTA_VERSION_PROPERTY: &str = "delta-version";

/// The Iceberg metadata Iceberg readers of a UniForm table are given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IcebergView {
    /// The newest `metadata/*.metadata.json`, relative to the table root.
    pub metadata_file: String,
    /// The Delta version it was converted from (`delta-version`), when recorded.
    pub delta_version: Option<u64>,
}

/// What Iceberg metadata keeps under the table's root.
#[derive(Debug, Default)]
pub(crate) struct IcebergFiles {
    /// Every file under `metadata/`, relative to the root.
    pub metadata: BTreeSet<String>,
    /// Data (and delete) files the snapshots of the metadata files reference, relative to the
    /// root.
    pub data: HashSet<String>,
    /// The metadata files read.
    pub metadata_files: usize,
}

/// The newest Iceberg metadata file of the table at `uri` and the Delta version it reflects;
/// `None` when there is none. A metadata file is never rewritten in place, so when the newest
/// is still `known`'s, `known` is the answer and only the listing is paid for.
pub(crate) async fn iceberg_view(
    store: &dyn ObjectStore,
    uri: &str,
    known: Option<&IcebergView>,
) -> Result<Option<IcebergView>, DeltaError> {
    let listed = list_metadata(store, uri).await?;
    let Some(newest) = newest_metadata_file(&listed) else {
        return Ok(None);
    };
    if let Some(known) = known.filter(|k| k.metadata_file == newest) {
        return Ok(Some(known.clone()));
    }
    let metadata = read_json(store, uri, &newest).await?;
    let delta_version = metadata
        .get("properties")
        .and_then(|p| p.get(DELTA_VERSION_PROPERTY))
        .and_then(|v| match v {
            Value::String(s) => s.parse().ok(),
            other => other.as_u64(),
        });
    Ok(Some(IcebergView {
        metadata_file: newest,
        delta_version,
    }))
}

/// Every file the Iceberg metadata of the table at `uri` keeps: `metadata/` itself, and the
/// files every snapshot of every metadata file there references. Empty when the table has no
/// Iceberg metadata.
pub(crate) async fn iceberg_files(
    store: &dyn ObjectStore,
    uri: &str,
) -> Result<IcebergFiles, DeltaError> {
    let listed = list_metadata(store, uri).await?;
    let mut files = IcebergFiles {
        metadata: listed.iter().cloned().collect(),
        ..IcebergFiles::default()
    };
    let mut manifest_lists = BTreeSet::new();
    let mut manifests = BTreeSet::new();
    for name in listed.iter().filter(|n| n.ends_with(METADATA_SUFFIX)) {
        let metadata = read_json(store, uri, name).await?;
        files.metadata_files += 1;
        for snapshot in metadata
            .get("snapshots")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(list) = snapshot.get("manifest-list").and_then(Value::as_str) {
                manifest_lists.insert(relative(uri, name, list)?);
            }
            // format version 1 may list the manifests in the snapshot itself
            for manifest in snapshot
                .get("manifests")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                manifests.insert(relative(uri, name, manifest)?);
            }
        }
    }
    for list in &manifest_lists {
        for manifest in avro_paths(store, uri, list, &["manifest_path"]).await? {
            manifests.insert(relative(uri, list, &manifest)?);
        }
    }
    for manifest in &manifests {
        for file in avro_paths(store, uri, manifest, &["data_file", "file_path"]).await? {
            // a data file outside the root is another table's to keep
            if let Some(path) = under_root(&file, uri) {
                files.data.insert(path);
            }
        }
    }
    Ok(files)
}

/// Every file under `metadata/`, relative to the root, sorted.
async fn list_metadata(store: &dyn ObjectStore, uri: &str) -> Result<Vec<String>, DeltaError> {
    let prefix = Path::from(METADATA_DIR);
    let mut out = Vec::new();
    let mut entries = store.list(Some(&prefix));
    while let Some(entry) = entries.next().await {
        let meta = entry.map_err(|err| DeltaError::store(uri, "listing Iceberg metadata", err))?;
        out.push(meta.location.to_string());
    }
    out.sort();
    Ok(out)
}

/// The metadata file Iceberg readers are given: the highest version number
/// (`00012-<uuid>.metadata.json`, `v12.metadata.json`), the last name among equals.
fn newest_metadata_file(listed: &[String]) -> Option<String> {
    listed
        .iter()
        .filter(|name| name.ends_with(METADATA_SUFFIX))
        .max_by_key(|name| {
            let file = name.rsplit('/').next().unwrap_or(name);
            let digits: String = file
                .trim_start_matches('v')
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            (digits.parse::<u64>().unwrap_or(0), (*name).clone())
        })
        .cloned()
}

/// `reference` (an absolute location written in `within`) relative to the table root.
fn relative(uri: &str, within: &str, reference: &str) -> Result<String, DeltaError> {
    under_root(reference, uri).ok_or_else(|| DeltaError::IcebergUnreadable {
        table: uri.to_owned(),
        file: within.to_owned(),
        reason: format!(
            "it references {reference}, outside the table's root, which tablekeeper cannot read"
        ),
    })
}

async fn read_bytes(
    store: &dyn ObjectStore,
    uri: &str,
    path: &str,
) -> Result<bytes::Bytes, DeltaError> {
    let unreadable = |reason: String| DeltaError::IcebergUnreadable {
        table: uri.to_owned(),
        file: path.to_owned(),
        reason,
    };
    let location = Path::parse(path).map_err(|e| unreadable(e.to_string()))?;
    let result = store
        .get(&location)
        .await
        .map_err(|err| DeltaError::store(uri, "reading Iceberg metadata", err))?;
    result
        .bytes()
        .await
        .map_err(|err| DeltaError::store(uri, "reading Iceberg metadata", err))
}

async fn read_json(store: &dyn ObjectStore, uri: &str, path: &str) -> Result<Value, DeltaError> {
    let bytes = read_bytes(store, uri, path).await?;
    serde_json::from_slice(&bytes).map_err(|e| DeltaError::IcebergUnreadable {
        table: uri.to_owned(),
        file: path.to_owned(),
        reason: format!("not JSON: {e}"),
    })
}

/// The string at `field` (a path of record fields) of every record of the Avro file `path`.
async fn avro_paths(
    store: &dyn ObjectStore,
    uri: &str,
    path: &str,
    field: &[&str],
) -> Result<Vec<String>, DeltaError> {
    let bytes = read_bytes(store, uri, path).await?;
    let unreadable = |reason: String| DeltaError::IcebergUnreadable {
        table: uri.to_owned(),
        file: path.to_owned(),
        reason,
    };
    let reader = apache_avro::Reader::new(bytes.as_ref())
        .map_err(|e| unreadable(format!("not Avro: {e}")))?;
    let mut out = Vec::new();
    for record in reader {
        let record = record.map_err(|e| unreadable(format!("a damaged Avro record: {e}")))?;
        let value = field
            .iter()
            .try_fold(&record, |value, name| record_field(value, name));
        match value {
            Some(Avro::String(s)) => out.push(s.clone()),
            _ => {
                return Err(unreadable(format!(
                    "a record without `{}`",
                    field.join(".")
                )))
            }
        }
    }
    Ok(out)
}

/// Field `name` of an Avro record (through an optional field's union).
fn record_field<'a>(value: &'a Avro, name: &str) -> Option<&'a Avro> {
    match value {
        Avro::Union(_, inner) => record_field(inner, name),
        Avro::Record(fields) => fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| match v {
                Avro::Union(_, inner) => inner.as_ref(),
                other => other,
            }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_metadata_file_has_the_highest_version() {
        let listed = [
            "metadata/00000-a.metadata.json",
            "metadata/00002-c.metadata.json",
            "metadata/00001-b.metadata.json",
            "metadata/snap-1-1-x.avro",
        ]
        .map(str::to_owned);
        assert_eq!(
            newest_metadata_file(&listed).as_deref(),
            Some("metadata/00002-c.metadata.json")
        );
        let hadoop = ["metadata/v9.metadata.json", "metadata/v10.metadata.json"].map(str::to_owned);
        assert_eq!(
            newest_metadata_file(&hadoop).as_deref(),
            Some("metadata/v10.metadata.json")
        );
        assert_eq!(newest_metadata_file(&[]), None);
    }
}
