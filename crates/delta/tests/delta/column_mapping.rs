//! Column-mapped tables (`delta.columnMapping.mode = name`), written by python deltalake and
//! then changed the way Spark's `RENAME COLUMN` and `DROP COLUMN` change them (a new
//! `metaData` whose schema renames a field under the same physical name, then leaves one
//! out) and deletion vectors turned on and used: purge, compaction and Z-order keep every row
//! through both readers, and the files tablekeeper writes hold physical names with their field
//! ids, as every other writer's do.

use std::path::Path;

use serde_json::Value;
use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_delta::fixtures::read_rows_sorted;
use tablekeeper_delta::{optimize, Optimize};
use tokio_util::sync::CancellationToken;

use crate::common::{compact_small_files, purge_vectors, zorder_on};

/// Four appends in two partitions (`day`), each of ten rows, on a name-mapped table.
const WRITE: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import write_deltalake
path, start, columns = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
for i in range(start, start + 4):
    data = {
        "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
        "name": pa.array([f"n{i}-{j}" for j in range(10)]),
        "day": pa.array(["2026-01-0%d" % (i % 2 + 1)] * 10),
        "extra": pa.array([i + 0.5] * 10),
    }
    renamed = {"name": "full_name"} if "full_name" in columns else {}
    table = pa.table({renamed.get(k, k): v for k, v in data.items() if renamed.get(k, k) in columns})
    config = {"delta.columnMapping.mode": "name"} if i == 0 else None
    write_deltalake(path, table, mode="append", partition_by=["day"], configuration=config)
sys.stdout.flush()
os._exit(0)
"#;

/// The physical column names and field ids of one Parquet file, as pyarrow reads its footer.
const FOOTER: &str = r#"
import json, os, sys
import pyarrow.parquet as pq
schema = pq.read_schema(sys.argv[1])
print(json.dumps({f.name: (f.metadata or {}).get(b"PARQUET:field_id", b"").decode() for f in schema}))
sys.stdout.flush()
os._exit(0)
"#;

fn latest_metadata(dir: &Path) -> (u64, Value) {
    let mut found = None;
    let mut latest = 0;
    let mut entries: Vec<_> = std::fs::read_dir(dir.join("_delta_log"))
        .unwrap()
        .filter_map(|e| e.ok()?.path().to_str().map(str::to_owned))
        .filter(|p| p.ends_with(".json"))
        .collect();
    entries.sort();
    for path in entries {
        let version: u64 = Path::new(&path)
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        latest = latest.max(version);
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let action: Value = serde_json::from_str(line).unwrap();
            if let Some(metadata) = action.get("metaData") {
                found = Some(metadata.clone());
            }
        }
    }
    (latest, found.expect("a metaData action"))
}

/// Commits a new schema, as an ALTER TABLE does: `change` edits the schema's field list.
fn alter(dir: &Path, operation: &str, change: impl FnOnce(&mut Vec<Value>)) {
    let (latest, mut metadata) = latest_metadata(dir);
    let mut schema: Value =
        serde_json::from_str(metadata["schemaString"].as_str().unwrap()).unwrap();
    change(schema["fields"].as_array_mut().unwrap());
    metadata["schemaString"] = Value::String(schema.to_string());
    let info = serde_json::json!({"commitInfo": {
        "timestamp": chrono::Utc::now().timestamp_millis(),
        "operation": operation,
        "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0",
    }});
    let text = format!("{info}\n{}\n", serde_json::json!({ "metaData": metadata }));
    std::fs::write(
        dir.join("_delta_log")
            .join(format!("{:020}.json", latest + 1)),
        text,
    )
    .unwrap();
}

/// Turns deletion vectors on: the protocol lists them (and column mapping, as a table
/// feature) and the metadata enables them.
fn enable_deletion_vectors(dir: &Path) {
    let (latest, mut metadata) = latest_metadata(dir);
    metadata["configuration"]["delta.enableDeletionVectors"] = Value::String("true".into());
    let lines = [
        serde_json::json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(),
            "operation": "SET TBLPROPERTIES", "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0"}}),
        serde_json::json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
            "readerFeatures": ["columnMapping", "deletionVectors"],
            "writerFeatures": ["appendOnly", "invariants", "columnMapping", "deletionVectors"]}}),
        serde_json::json!({ "metaData": metadata }),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(
        dir.join("_delta_log")
            .join(format!("{:020}.json", latest + 1)),
        text,
    )
    .unwrap();
}

fn tablekeeper_files(dir: &Path, before: &std::collections::BTreeSet<String>) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() && !path.ends_with("_delta_log") {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                let p = path.to_str().unwrap().to_owned();
                if !before.contains(&p) {
                    found.push(p);
                }
            }
        }
    }
    found
}

fn parquet_files(dir: &Path) -> std::collections::BTreeSet<String> {
    tablekeeper_files(dir, &Default::default())
        .into_iter()
        .collect()
}

#[tokio::test]
async fn a_renamed_and_dropped_column_mapped_table_is_purged_compacted_and_z_ordered() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap().to_owned();
    run_python(WRITE, &[&uri, "0", "id,name,day,extra"]).expect("python writes");
    alter(dir.path(), "RENAME COLUMN", |fields| {
        let name = fields.iter_mut().find(|f| f["name"] == "name").unwrap();
        name["name"] = Value::String("full_name".into());
    });
    alter(dir.path(), "DROP COLUMNS", |fields| {
        fields.retain(|f| f["name"] != "extra");
    });
    // python writes through the new schema: files without `extra`, `name` as `full_name`
    run_python(WRITE, &[&uri, "4", "id,full_name,day"]).expect("python appends");
    // deletion vectors on, as Databricks turns them on, then rows deleted with them
    enable_deletion_vectors(dir.path());
    let deleted =
        tablekeeper_delta::fixtures::delete_with_deletion_vectors(&uri, &[3, 41, 77].into())
            .await
            .expect("deletion vectors on a column-mapped table");
    assert_eq!(deleted, 3);

    let python_before = python_rows(&uri, None).expect("python reads");
    let rust_before = read_rows_sorted(&uri, None).await.expect("deltalake reads");
    assert_eq!(python_before.len(), 77);
    assert!(
        python_before[0].contains("full_name") && !python_before[0].contains("extra"),
        "{}",
        python_before[0]
    );
    let cancel = CancellationToken::new();
    let purged = optimize(&uri, Optimize::Purge(&purge_vectors()), &cancel)
        .await
        .expect("purge of a column-mapped table");
    assert_eq!(purged.files_removed, 3, "{purged:?}");
    assert_eq!(python_rows(&uri, None).unwrap(), python_before);
    assert_eq!(read_rows_sorted(&uri, None).await.unwrap(), rust_before);
    let before = parquet_files(dir.path());
    let report = optimize(&uri, Optimize::Compact(&compact_small_files()), &cancel)
        .await
        .expect("compaction of a column-mapped table");
    assert_eq!(report.files_removed, 7, "{report:?}");
    assert_eq!(report.files_added, 2, "one file per partition: {report:?}");
    assert_eq!(python_rows(&uri, None).unwrap(), python_before);
    assert_eq!(read_rows_sorted(&uri, None).await.unwrap(), rust_before);

    let (_, metadata) = latest_metadata(dir.path());
    let schema: Value = serde_json::from_str(metadata["schemaString"].as_str().unwrap()).unwrap();
    let physical: std::collections::BTreeMap<String, String> = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["name"] != "day")
        .map(|f| {
            (
                f["metadata"]["delta.columnMapping.physicalName"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                f["metadata"]["delta.columnMapping.id"].to_string(),
            )
        })
        .collect();
    let written = tablekeeper_files(dir.path(), &before);
    assert_eq!(written.len(), 2, "{written:?}");
    for file in &written {
        let footer: std::collections::BTreeMap<String, String> =
            serde_json::from_str(run_python(FOOTER, &[file]).unwrap().trim()).unwrap();
        assert_eq!(footer, physical, "{file}: physical names and field ids");
    }
    // the log keys the new files' partition values and statistics by physical names
    let (latest, _) = latest_metadata(dir.path());
    let commit = std::fs::read_to_string(
        dir.path()
            .join("_delta_log")
            .join(format!("{latest:020}.json")),
    )
    .unwrap();
    let add: Value = commit
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find_map(|a| a.get("add").cloned())
        .expect("an add");
    let day = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "day")
        .unwrap()["metadata"]["delta.columnMapping.physicalName"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(add["partitionValues"].get(&day).is_some(), "{add}");
    let stats: Value = serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
    for name in physical.keys() {
        assert!(stats["minValues"].get(name).is_some(), "{name} in {stats}");
    }

    let report = optimize(
        &uri,
        Optimize::ZOrder(&zorder_on(&["full_name", "id"])),
        &cancel,
    )
    .await
    .expect("z-order of a column-mapped table by logical names");
    assert_eq!(report.files_removed, 2, "{report:?}");
    assert_eq!(python_rows(&uri, None).unwrap(), python_before);
    assert_eq!(read_rows_sorted(&uri, None).await.unwrap(), rust_before);
}
