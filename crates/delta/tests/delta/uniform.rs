//! UniForm: Delta's reference `icebergCompatV2` table (Spark 3.5 / Delta 3.3, column mapping by
//! id, arrays and maps with nested field ids) with Iceberg metadata under `metadata/` written
//! the way UniForm lays it out, read back by pyiceberg. Compaction writes the field ids Iceberg
//! readers need; a full VACUUM with no retention keeps the Iceberg metadata and every file its
//! snapshot names, while deleting a real orphan; the Iceberg view still reads the same rows,
//! and the probe reports it behind the Delta log.

use std::collections::BTreeSet;

use serde_json::Value;
use tablekeeper_delta::fixtures::iceberg::{iceberg_data_files, iceberg_rows, make_iceberg_view};
use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_delta::fixtures::read_rows_sorted;
use tablekeeper_delta::vacuum;
use tokio_util::sync::CancellationToken;

use crate::aged::reference_table;
use crate::common::{
    expired_orphan, latest_metadata, probe_once, vacuum_every_unreferenced_file, write_commit,
};
use crate::feature_rules::{compact_into_one, footer};

/// The rows of a UniForm table through its three readers: pyiceberg (the Iceberg metadata
/// `metadata`), python deltalake and deltalake.
#[derive(Debug, PartialEq, Eq)]
struct Views {
    iceberg: Vec<String>,
    python: Vec<String>,
    rust: Vec<String>,
}

impl Views {
    async fn read(uri: &str, metadata: &str) -> Views {
        let views = Views {
            iceberg: iceberg_rows(metadata).expect("pyiceberg reads the Iceberg view"),
            python: python_rows(uri, None).expect("python deltalake"),
            rust: read_rows_sorted(uri, None).await.expect("deltalake"),
        };
        assert_eq!(views.iceberg, views.python, "Iceberg and Delta agree");
        views
    }
}

/// The field ids of a Parquet file's columns, nested ones included.
fn field_ids(path: &std::path::Path) -> BTreeSet<String> {
    footer(path).into_iter().map(|(_, id)| id).collect()
}

#[tokio::test]
async fn vacuum_keeps_what_the_iceberg_view_reads_after_a_compaction() {
    let dir = reference_table("table-with-icebegCompatV2Enabled");
    let uri = dir.path().to_str().expect("utf-8").to_owned();
    let metadata = make_iceberg_view(dir.path()).expect("pyiceberg writes the Iceberg view");
    let before = Views::read(&uri, &metadata).await;
    assert_eq!(before.iceberg.len(), 6);
    let iceberg_files: Vec<String> = std::fs::read_dir(dir.path().join("metadata"))
        .expect("metadata/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let originals: Vec<String> = iceberg_data_files(&metadata)
        .expect("files")
        .iter()
        .map(|f| f.rsplit('/').next().expect("name").to_owned())
        .collect();
    assert_eq!(originals.len(), 2);
    let original_ids = field_ids(&dir.path().join(&originals[0]));

    let add = compact_into_one(&uri, 2).await;
    let stats: Value = serde_json::from_str(add["stats"].as_str().expect("stats")).expect("json");
    assert_eq!(
        stats["numRecords"], 6,
        "icebergCompatV2 asks numRecords: {stats}"
    );
    assert!(add.get("deletionVector").is_none_or(Value::is_null));
    // every field id the writer's files carry, nested ones (array elements, map keys and
    // values) included, is in the file tablekeeper wrote
    let ours = field_ids(&dir.path().join(add["path"].as_str().expect("path")));
    assert!(original_ids.len() >= 50, "{original_ids:?}");
    assert_eq!(ours, original_ids, "field ids of the rewritten file");

    // a real orphan, long expired: VACUUM still deletes it
    let orphan = expired_orphan(
        dir.path(),
        "part-00009-0rphan00-0000-0000-0000-000000000000-c000.snappy.parquet",
    );
    let report = vacuum(
        &uri,
        &vacuum_every_unreferenced_file(),
        &CancellationToken::new(),
    )
    .await
    .expect("full vacuum of a UniForm table");
    assert!(!orphan.exists(), "the orphan is deleted: {report:?}");
    let kept = report
        .kept
        .iter()
        .find(|k| k.reason == "iceberg")
        .unwrap_or_else(|| panic!("the Iceberg metadata keeps files: {report:?}"));
    assert_eq!(
        kept.files,
        (originals.len() + iceberg_files.len()) as u64,
        "{report:?}"
    );
    assert!(
        report.kept_listed_files >= 2,
        "deltalake's listing took the compacted files for deletable: {report:?}"
    );
    for file in &originals {
        assert!(dir.path().join(file).exists(), "{file} deleted");
    }
    for file in &iceberg_files {
        assert!(
            dir.path().join("metadata").join(file).exists(),
            "{file} deleted"
        );
    }

    assert_eq!(Views::read(&uri, &metadata).await, before);

    // the Iceberg view still reflects version 0; the table moved on
    let probe = probe_once(&uri).await;
    let view = probe.iceberg.expect("the probe reads the Iceberg view");
    assert_eq!(view.delta_version, Some(0));
    assert!(
        view.metadata_file.starts_with("metadata/00001-"),
        "{view:?}"
    );
    assert!(probe.version >= 3, "{}", probe.version);
}

/// Four appends in two partitions (`day`) of a name-mapped table, written by python deltalake.
const WRITE_MAPPED: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import write_deltalake
for i in range(4):
    table = pa.table({
        "id": pa.array(range(i * 10, i * 10 + 10), pa.int64()),
        "name": pa.array([f"n{i}-{j}" for j in range(10)]),
        "day": pa.array(["2026-01-0%d" % (i % 2 + 1)] * 10),
    })
    config = {"delta.columnMapping.mode": "name"} if i == 0 else None
    write_deltalake(sys.argv[1], table, mode="append", partition_by=["day"], configuration=config)
sys.stdout.flush()
os._exit(0)
"#;

/// Turns UniForm on as Spark's `ALTER TABLE … SET TBLPROPERTIES
/// ('delta.enableIcebergCompatV2' = 'true', 'delta.universalFormat.enabledFormats' =
/// 'iceberg')` writes it: the `icebergCompatV2` writer feature beside column mapping, and the
/// two properties.
fn enable_uniform(dir: &std::path::Path) {
    let (mut metadata, version) = latest_metadata(dir);
    let configuration = &mut metadata["configuration"];
    configuration["delta.enableIcebergCompatV2"] = "true".into();
    configuration["delta.universalFormat.enabledFormats"] = "iceberg".into();
    write_commit(
        dir,
        version,
        &[
            serde_json::json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(),
                "operation": "SET TBLPROPERTIES", "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0"}}),
            serde_json::json!({"protocol": {"minReaderVersion": 2, "minWriterVersion": 7,
                "writerFeatures": ["columnMapping", "icebergCompatV2", "appendOnly", "invariants"]}}),
            serde_json::json!({ "metaData": metadata }),
        ],
    );
}

/// A partitioned UniForm table: compaction writes the partition column into the file (with
/// its field id, after the data columns), the Iceberg view keeps reading its own files through
/// a VACUUM, and the probe sees UniForm on and the view one version behind.
#[tokio::test]
async fn a_partitioned_uniform_table_gets_its_partition_values_inside_the_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let uri = dir.path().to_str().expect("utf-8").to_owned();
    run_python(WRITE_MAPPED, &[&uri]).expect("python deltalake writes");
    enable_uniform(dir.path());
    let metadata = make_iceberg_view(dir.path()).expect("pyiceberg writes the Iceberg view");
    let before = Views::read(&uri, &metadata).await;
    assert_eq!(before.iceberg.len(), 40);

    // two partitions of two files, one commit each: the newest holds one file
    let add = compact_into_one(&uri, 4).await;
    let schema: Value = serde_json::from_str(
        latest_metadata(dir.path()).0["schemaString"]
            .as_str()
            .expect("schemaString"),
    )
    .expect("schema");
    let physical_day = schema["fields"]
        .as_array()
        .and_then(|fields| fields.iter().find(|f| f["name"] == "day"))
        .and_then(|f| f["metadata"]["delta.columnMapping.physicalName"].as_str())
        .expect("day's physical name")
        .to_owned();
    let columns = footer(&dir.path().join(add["path"].as_str().expect("path")));
    let (last, id) = columns.last().expect("columns");
    assert_eq!(
        last, &physical_day,
        "the partition column last: {columns:?}"
    );
    assert!(!id.is_empty(), "with its field id: {columns:?}");
    assert_eq!(
        add["partitionValues"].as_object().map(|m| m.len()),
        Some(1),
        "{add}"
    );

    vacuum(
        &uri,
        &vacuum_every_unreferenced_file(),
        &CancellationToken::new(),
    )
    .await
    .expect("full vacuum of a UniForm table");
    assert_eq!(Views::read(&uri, &metadata).await, before);
    let probe = probe_once(&uri).await;
    assert!(probe.uniform_iceberg);
    let view = probe.iceberg.expect("the Iceberg view");
    assert!(
        view.delta_version
            .is_some_and(|v| i64::try_from(v).unwrap() < probe.version),
        "{view:?} at {}",
        probe.version
    );
}
