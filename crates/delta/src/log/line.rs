//! One line of a JSON commit, read into the one action [`crate::log::read::Commit`] keeps of
//! it, and an `add` or `remove` reduced to the fields this crate reads ([`FileAction`]).
//!
//! Most of a log's bytes are its `add` actions: statistics, tags, partition values. Reading a
//! line into a JSON tree first allocates every key and string of them (the largest part of a
//! first probe's history read, measured); [`read_typed`] reads the fields kept straight into
//! their types and skips the rest. A line it does not accept — a field of an unexpected type,
//! a key written twice, a line that is not an object — is read again as a JSON tree
//! ([`read_tree`]), whose lenient reading of each field is the rule: both readings keep the
//! same action of every line they both accept.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::log::deletion_vector::DeletionVector;
use crate::log::path::decode_path;

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

/// `numRecords` out of an add's `stats` JSON string, without parsing the column statistics.
pub(crate) fn num_records_of(stats: &str) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Rows {
        #[serde(rename = "numRecords")]
        num_records: Option<u64>,
    }
    serde_json::from_str::<Rows>(stats).ok()?.num_records
}

/// The action a line holds, by the precedence commits are read with: `commitInfo`, `add`,
/// `remove`, `cdc`, `metaData`, `protocol`, `domainMetadata`.
#[derive(Debug, PartialEq)]
pub(crate) enum Action {
    Info(Map<String, Value>),
    Add(FileAction),
    Remove(FileAction),
    Cdc,
    MetaData,
    Protocol,
    Domain(Map<String, Value>),
    /// An action the reader keeps nothing of (`txn`, `checkpointMetadata`, ...).
    Other,
}

/// Reads one line: typed when it can, else as a JSON tree. The error names the version.
pub(crate) fn read_line(version: u64, line: &str) -> Result<Action, String> {
    match serde_json::from_str::<TypedLine<'_>>(line) {
        Ok(typed) => Ok(typed.into_action()),
        Err(_) => read_tree(version, line),
    }
}

/// The JSON-tree reading, the rule [`read_typed`] follows.
fn read_tree(version: u64, line: &str) -> Result<Action, String> {
    let value: Value = serde_json::from_str(line)
        .map_err(|err| format!("commit {version} holds invalid json: {err}"))?;
    let Value::Object(mut action) = value else {
        return Ok(Action::Other);
    };
    Ok(
        if let Some(Value::Object(info)) = action.remove("commitInfo") {
            Action::Info(info)
        } else if let Some(Value::Object(add)) = action.remove("add") {
            Action::Add(tree_file_action(&add))
        } else if let Some(Value::Object(remove)) = action.remove("remove") {
            Action::Remove(tree_file_action(&remove))
        } else if action.contains_key("cdc") {
            Action::Cdc
        } else if action.contains_key("metaData") {
            Action::MetaData
        } else if action.contains_key("protocol") {
            Action::Protocol
        } else if let Some(Value::Object(domain)) = action.remove("domainMetadata") {
            Action::Domain(domain)
        } else {
            Action::Other
        },
    )
}

fn tree_file_action(obj: &Map<String, Value>) -> FileAction {
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

/// A key that is present, whatever its value (`null` included), as `contains_key` reads it.
#[derive(Debug, Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(deserializer).map(|_| Present(true))
    }
}

/// The keys of a line the reader looks at; every other key is skipped unread.
#[derive(Deserialize)]
struct TypedLine<'a> {
    #[serde(rename = "commitInfo")]
    commit_info: Option<Value>,
    #[serde(borrow)]
    add: Option<TypedFile<'a>>,
    #[serde(borrow)]
    remove: Option<TypedFile<'a>>,
    #[serde(default)]
    cdc: Present,
    #[serde(default, rename = "metaData")]
    meta_data: Present,
    #[serde(default)]
    protocol: Present,
    #[serde(rename = "domainMetadata")]
    domain_metadata: Option<Value>,
}

impl TypedLine<'_> {
    fn into_action(self) -> Action {
        if let Some(Value::Object(info)) = self.commit_info {
            Action::Info(info)
        } else if let Some(add) = self.add {
            Action::Add(add.into_file_action())
        } else if let Some(remove) = self.remove {
            Action::Remove(remove.into_file_action())
        } else if self.cdc.0 {
            Action::Cdc
        } else if self.meta_data.0 {
            Action::MetaData
        } else if self.protocol.0 {
            Action::Protocol
        } else if let Some(Value::Object(domain)) = self.domain_metadata {
            Action::Domain(domain)
        } else {
            Action::Other
        }
    }
}

/// The fields of an `add` or `remove` the reader keeps.
#[derive(Deserialize)]
struct TypedFile<'a> {
    #[serde(borrow)]
    path: Option<Cow<'a, str>>,
    size: Option<u64>,
    #[serde(rename = "partitionValues")]
    partition_values: Option<HashMap<String, Option<String>>>,
    #[serde(rename = "dataChange")]
    data_change: Option<bool>,
    #[serde(rename = "deletionTimestamp")]
    deletion_timestamp: Option<i64>,
    #[serde(borrow)]
    stats: Option<Cow<'a, str>>,
    #[serde(rename = "deletionVector")]
    deletion_vector: Option<Value>,
}

impl TypedFile<'_> {
    fn into_file_action(self) -> FileAction {
        FileAction {
            path: decode_path(self.path.as_deref().unwrap_or_default()),
            size: self.size,
            partition_values: self.partition_values.unwrap_or_default(),
            data_change: self.data_change.unwrap_or(true),
            deletion_timestamp: self.deletion_timestamp,
            num_records: self.stats.as_deref().and_then(num_records_of),
            deletion_vector: DeletionVector::from_json(self.deletion_vector.as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both readings of `line`: the typed one (`None` when it rejects the line), the tree's.
    fn both(line: &str) -> (Option<Action>, Action) {
        let typed = serde_json::from_str::<TypedLine<'_>>(line)
            .ok()
            .map(TypedLine::into_action);
        (typed, read_tree(0, line).expect("valid json"))
    }

    #[test]
    fn the_typed_reading_keeps_what_the_tree_keeps() {
        for line in [
            r#"{"commitInfo":{"timestamp":1,"operation":"WRITE"}}"#,
            r#"{"add":{"path":"day=2024-01-01/a%20b.parquet","size":12,"partitionValues":{"day":"2024-01-01","h":null},"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":7,\"minValues\":{\"id\":1}}","tags":{"x":"y"}}}"#,
            r#"{"add":{"path":"p","size":1,"partitionValues":{},"dataChange":false,"deletionVector":{"storageType":"u","pathOrInlineDv":"vBn[lx{q8@P<9BNH/isA","offset":1,"sizeInBytes":36,"cardinality":2}}}"#,
            r#"{"remove":{"path":"p","deletionTimestamp":5,"dataChange":true,"size":3}}"#,
            r#"{"remove":{"path":"q"}}"#,
            r#"{"cdc":{"path":"c","partitionValues":{},"size":1,"dataChange":false}}"#,
            r#"{"cdc":null}"#,
            r#"{"metaData":{"id":"x","format":{"provider":"parquet"},"schemaString":"{}","partitionColumns":[]}}"#,
            r#"{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}"#,
            r#"{"domainMetadata":{"domain":"delta.rowTracking","configuration":"{\"rowIdHighWaterMark\":9}","removed":false}}"#,
            r#"{"txn":{"appId":"a","version":1}}"#,
            r#"{"commitInfo":null,"add":{"path":"after-a-null-info"}}"#,
            r#"{"add":null,"remove":{"path":"r"}}"#,
        ] {
            let (typed, tree) = both(line);
            assert_eq!(typed, Some(tree), "{line}");
        }
    }

    #[test]
    fn lines_the_typed_reading_rejects_are_read_as_a_tree() {
        for line in [
            // a negative size, a number as a partition value, a key written twice, no object
            r#"{"add":{"path":"p","size":-1,"dataChange":true}}"#,
            r#"{"add":{"path":"p","partitionValues":{"n":3},"dataChange":true}}"#,
            r#"{"add":{"path":"p","path":"q"}}"#,
            r#"{"add":7}"#,
            r#"[1,2]"#,
        ] {
            let (typed, _) = both(line);
            assert!(typed.is_none(), "{line}: the typed reading accepted it");
            let (_, tree) = both(line);
            assert_eq!(read_line(0, line).expect("read as a tree"), tree, "{line}");
        }
        assert!(read_line(3, "{not json").unwrap_err().contains("commit 3"));
    }
    /// Every line of every reference table's log (Spark, Databricks, older Delta releases,
    /// python deltalake): wherever the typed reading accepts a line, it keeps what the tree keeps.
    #[test]
    fn the_typed_reading_agrees_on_every_reference_log() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reference");
        let (mut lines, mut typed_lines) = (0, 0);
        for table in std::fs::read_dir(&root).expect("reference tables") {
            let log = table.expect("a table").path().join("_delta_log");
            let Ok(entries) = std::fs::read_dir(&log) else {
                continue;
            };
            for entry in entries {
                let path = entry.expect("a log file").path();
                if path.extension().is_none_or(|e| e != "json") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).expect("a commit");
                for line in text.lines().filter(|l| !l.trim().is_empty()) {
                    lines += 1;
                    let (typed, tree) = both(line);
                    if let Some(typed) = typed {
                        typed_lines += 1;
                        assert_eq!(typed, tree, "{}: {line}", path.display());
                    }
                }
            }
        }
        assert!(lines > 100, "{lines} lines read");
        assert_eq!(typed_lines, lines, "every reference line reads typed");
    }
}
