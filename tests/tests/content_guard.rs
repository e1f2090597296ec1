//! What a rewrite keeps, through the real binary (`tablekeeper maintain`): every partition value
//! string of the log and every row, on tables written as Spark writes them, and a table whose
//! deletion vector is gone from storage reported damaged and left alone.
//!
//! Python deltalake cannot write what Spark writes for some partition types (a `binary` value as
//! its raw string, a timestamp with an offset, a `timestamp_ntz`, `null` partitions), so the
//! log of those tables is written by hand (`SPARK_TABLE`), their data files by pyarrow. Each
//! rewrite (compaction by tasks, Z-order, purge of deletion vectors, liquid clustering's
//! compaction) is checked by reading the log's `partitionValues` strings directly (every file a
//! rewrite added carries the strings of a file it replaced, and the table keeps the same set of
//! partitions) and the rows through deltalake and python deltalake.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use tablekeeper_delta::fixtures::aged::copy_reference;
use tablekeeper_delta::fixtures::peers::run_python;
use tablekeeper_delta::fixtures::{both_readers, delete_with_deletion_vectors};
use tablekeeper_tests::setup::InventoryFile;
use tablekeeper_tests::{maintain, maintained, run};

/// A table as Spark 3.5 / Delta 3.1 logs it, written by hand. argv: root, variant. `all`: one
/// partition column of every Delta partition type, three partitions of three files each (one
/// partition all `null`), with strings that need escaping, a binary value as Spark writes it
/// (the raw string), timestamps in both of the protocol's spellings, `timestamp_ntz`, a decimal
/// keeping its scale, a double written `2021.0`; deletion vectors enabled. `offsets`: a
/// timestamp partition column whose values carry UTC offsets.
const SPARK_TABLE: &str = r#"
import json, os, sys, uuid
import pyarrow as pa, pyarrow.parquet as pq
root, variant = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(root, "_delta_log"))
def field(name, kind):
    return {"name": name, "type": kind, "nullable": True, "metadata": {}}
columns = [("p_str", "string"), ("p_bin", "binary"), ("p_date", "date"), ("p_ts", "timestamp"),
           ("p_ntz", "timestamp_ntz"), ("p_dec", "decimal(10,2)"), ("p_int", "integer"),
           ("p_long", "long"), ("p_double", "double"), ("p_bool", "boolean")]
if variant == "offsets":
    columns = [("p_ts", "timestamp")]
    parts = [{"p_ts": "2021-01-01 01:00:00+01:00"}, {"p_ts": "2021-06-30T23:59:59.123456-07:00"}]
else:
    parts = [
        {"p_str": "a/b %c d=e \u00fc", "p_bin": "hello", "p_date": "2021-01-01",
         "p_ts": "2021-01-01 00:00:00", "p_ntz": "2021-01-01 12:30:00", "p_dec": "1.50",
         "p_int": "7", "p_long": "-9000000000", "p_double": "2021.0", "p_bool": "true"},
        {"p_str": "\U0001F608 x", "p_bin": "\U0001F608", "p_date": "1999-12-31",
         "p_ts": "2021-06-01T10:00:00.000000Z", "p_ntz": "2021-01-01 00:00:00.123456",
         "p_dec": "-0.01", "p_int": "-3", "p_long": "0", "p_double": "1.0E-5", "p_bool": "false"},
        {name: None for name, _ in columns},
    ]
schema = {"type": "struct", "fields": [field("id", "long"), field("value", "string")]
          + [field(n, k) for n, k in columns]}
features = ["deletionVectors"] + (["timestampNtz"] if variant == "all" else [])
lines = [
    {"commitInfo": {"timestamp": 1700000000000, "operation": "WRITE",
                    "operationParameters": {"mode": "Append",
                                            "partitionBy": json.dumps([n for n, _ in columns])},
                    "isBlindAppend": True, "engineInfo": "Apache-Spark/3.5.0 Delta-Lake/3.1.0"}},
    {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features,
                  "writerFeatures": features}},
    {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                  "schemaString": json.dumps(schema), "partitionColumns": [n for n, _ in columns],
                  "configuration": {"delta.enableDeletionVectors": "true"},
                  "createdTime": 1700000000000}},
]
n = 0
for k, values in enumerate(parts):
    for f in range(3):
        ids = list(range(n, n + 5))
        n += 5
        texts = ["v%03d" % i if i % 4 else None for i in ids]
        table = pa.table({"id": pa.array(ids, pa.int64()), "value": pa.array(texts, pa.string())})
        # Spark puts a file under its partition directories; the log, not the path, holds the
        # values, so plain directories keep this script short
        rel = "part%d/part-%05d-%s.c000.snappy.parquet" % (k, f, uuid.uuid4())
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        pq.write_table(table, os.path.join(root, rel))
        present = [t for t in texts if t is not None]
        stats = {"numRecords": 5, "minValues": {"id": min(ids), "value": min(present)},
                 "maxValues": {"id": max(ids), "value": max(present)},
                 "nullCount": {"id": 0, "value": len(texts) - len(present)}}
        lines.append({"add": {"path": rel, "partitionValues": values,
                              "size": os.path.getsize(os.path.join(root, rel)),
                              "modificationTime": 1700000000000, "dataChange": True,
                              "stats": json.dumps(stats)}})
with open(os.path.join(root, "_delta_log", "00000000000000000000.json"), "w") as log:
    for line in lines:
        log.write(json.dumps(line) + "\n")
"#;

/// A file's partition values as the log spells them.
type Values = BTreeMap<String, Option<String>>;

/// The log's JSON commits replayed: the active files' partition values by path, and the
/// partition values of every file tablekeeper's commits added.
fn log_values(table: &Path) -> (BTreeMap<String, Values>, Vec<Values>) {
    let mut names: Vec<_> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json") && !n.starts_with('_'))
        .collect();
    names.sort();
    let mut active = BTreeMap::new();
    let mut ours = Vec::new();
    for name in names {
        let text = std::fs::read_to_string(table.join("_delta_log").join(&name)).unwrap();
        let actions: Vec<serde_json::Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let by_us = actions
            .iter()
            .any(|a| a["commitInfo"].get("tablekeeper").is_some());
        for action in &actions {
            if let Some(remove) = action.get("remove") {
                active.remove(remove["path"].as_str().unwrap());
            }
            if let Some(add) = action.get("add") {
                let values: Values =
                    serde_json::from_value(add["partitionValues"].clone()).unwrap();
                if by_us {
                    ours.push(values.clone());
                }
                active.insert(add["path"].as_str().unwrap().to_owned(), values);
            }
        }
    }
    (active, ours)
}

/// Runs `operation` on the table and checks what it must keep: every file it added carries a
/// partition's values exactly as the log spelled them before, the table keeps the same
/// partitions, and both readers read the same rows. Returns the maintain result.
async fn keeps(dir: &Path, table: &Path, extra: &str, operation: &str) -> serde_json::Value {
    let uri = table.to_str().unwrap();
    let (before, ours_before) = log_values(table);
    let partitions: BTreeSet<Values> = before.values().cloned().collect();
    let (rust, python) = both_readers(uri)
        .await
        .expect("both readers read the table");
    let inventory = InventoryFile::one(dir, "t", table, extra);
    let result = maintained(&inventory.path, "t", operation);
    let (after, ours) = log_values(table);
    let added = &ours[ours_before.len()..];
    assert!(!added.is_empty(), "{operation} added no file: {result:#}");
    for values in added {
        assert!(
            partitions.contains(values),
            "{operation} added a file with partition values {values:?}, which no file had: \
             {partitions:#?}"
        );
    }
    assert_eq!(
        after.values().cloned().collect::<BTreeSet<Values>>(),
        partitions,
        "{operation} changed the table's partitions"
    );
    let (rust_after, python_after) = both_readers(uri).await.expect("both readers read it");
    assert_eq!(rust_after, rust, "{operation}: deltalake reads other rows");
    assert_eq!(
        python_after, python,
        "{operation}: python deltalake reads other rows"
    );
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_rewrite_keeps_the_partition_values_spark_wrote_and_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("spark");
    run_python(SPARK_TABLE, &[table.to_str().unwrap(), "all"]).expect("the table is written");
    let (start, _) = log_values(&table);
    assert!(
        start
            .values()
            .any(|v| v["p_bin"].as_deref() == Some("hello")
                && v["p_double"].as_deref() == Some("2021.0")),
        "{start:?}"
    );

    // compaction of three partitions: three tasks, each bin decoded (the files are small)
    keeps(dir.path(), &table, "", "compact").await;
    assert_eq!(log_values(&table).0.len(), 3, "one file a partition");
    // rows deleted by deletion vectors in every partition, then purged
    let deleted =
        delete_with_deletion_vectors(table.to_str().unwrap(), &BTreeSet::from([1, 2, 16, 31, 44]))
            .await
            .expect("rows deleted with deletion vectors");
    assert_eq!(deleted, 5);
    keeps(dir.path(), &table, "", "purge").await;
    // Z-order of every partition, one commit
    keeps(
        dir.path(),
        &table,
        "    layout: { zorder: [value] }\n",
        "zorder",
    )
    .await;

    // timestamps with offsets: kept as written, whatever instant they parse to
    let offsets = dir.path().join("offsets");
    run_python(SPARK_TABLE, &[offsets.to_str().unwrap(), "offsets"]).expect("written");
    keeps(dir.path(), &offsets, "", "compact").await;
    let (after, _) = log_values(&offsets);
    let spelled: BTreeSet<Option<String>> = after.values().map(|v| v["p_ts"].clone()).collect();
    assert_eq!(
        spelled,
        BTreeSet::from([
            Some("2021-01-01 01:00:00+01:00".to_owned()),
            Some("2021-06-30T23:59:59.123456-07:00".to_owned())
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_tables_keep_their_partition_values_and_rows() {
    // python deltalake 1.1 wrote `2021.0` and `2020` for one double partition column; Delta 2.2
    // an integer and a string partition; Databricks clustered a table by liquid clustering
    for (name, operation) in [
        ("partition-type-primitives", "compact"),
        ("delta-2.2.0-partitioned-types", "zorder"),
        ("table_with_liquid_clustering", "compact"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join(name);
        copy_reference(name, &table);
        let extra = if operation == "zorder" {
            "    layout: { zorder: [c3] }\n"
        } else {
            ""
        };
        let uri = table.to_str().unwrap();
        let (rust, python) = both_readers(uri).await.expect("both readers");
        let inventory = InventoryFile::one(dir.path(), "t", &table, extra);
        let (before, _) = log_values(&table);
        let partitions: BTreeSet<Values> = before.values().cloned().collect();
        let out = maintain(&inventory.path, "t", operation);
        assert!(
            out.status.success(),
            "{name} {operation}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (after, ours) = log_values(&table);
        for values in &ours {
            assert!(partitions.contains(values), "{name}: {values:?} is new");
        }
        assert_eq!(
            after.values().cloned().collect::<BTreeSet<Values>>(),
            partitions,
            "{name}"
        );
        assert_eq!(
            both_readers(uri).await.expect("both readers"),
            (rust, python),
            "{name}: rows changed"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_deletion_vector_file_is_damage_and_no_operation_touches_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("dv");
    copy_reference("table-with-dv-small", &table);
    let vector = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin";
    let data = "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet";
    std::fs::remove_file(table.join(vector)).unwrap();
    let log_before: Vec<_> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let inventory = InventoryFile::one(
        dir.path(),
        "dv",
        &table,
        "    layout: { zorder: [value] }\n",
    );
    let named = format!("{vector} (the deletion vector of {data})");

    let plan = run(&[
        "plan",
        "--inventory",
        inventory.path.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(
        plan.status.code(),
        Some(3),
        "plan exits 3 on an unreadable table"
    );
    let views: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let view = views
        .as_array()
        .and_then(|v| v.first())
        .or_else(|| views["tables"].as_array().and_then(|v| v.first()))
        .cloned()
        .unwrap_or(views.clone());
    assert_eq!(view["health"], "unreadable", "{view:#}");
    assert!(
        view["probe_error"]
            .as_str()
            .unwrap_or_default()
            .contains(&named),
        "{view:#}"
    );

    for operation in ["compact", "zorder", "purge", "vacuum", "checkpoint"] {
        let out = maintain(&inventory.path, "dv", operation);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{operation}: {stderr}");
        assert!(
            stderr.contains("is damaged") && stderr.contains(&named),
            "{operation}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{operation}: {stderr}");
    }
    let log_after: Vec<_> = std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(log_after, log_before, "an operation wrote to the log");
}
