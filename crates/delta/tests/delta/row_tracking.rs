//! Row tracking enabled (`delta.enableRowTracking`): every row keeps its row id and row commit
//! version through purge, compaction and Z-order, read back from the files themselves (the
//! materialized columns where a file holds them, else `baseRowId` + position and
//! `defaultRowCommitVersion`), on a table tablekeeper's fixtures wrote and then switched to
//! row tracking the way Delta's backfill does, and on Databricks' `table_with_liquid_clustering`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{json, Value};
use tablekeeper_delta::fixtures::delete_with_deletion_vectors;
use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_delta::fixtures::read_rows_sorted;
use tablekeeper_delta::{optimize, Optimize};
use tokio_util::sync::CancellationToken;

use crate::common::{
    active_adds, compact_small_files, create_table, latest_metadata, log_lines, purge_vectors,
    rows, zorder_on,
};

pub(crate) const ROW_ID: &str = "_row-id-col-7c1a";
pub(crate) const ROW_VERSION: &str = "_row-commit-version-col-7c1a";

/// `id` and the materialized columns (null where absent) of one Parquet file, in file order.
const COLUMNS: &str = r#"
import json, os, sys
import pyarrow.parquet as pq
table = pq.read_table(sys.argv[1])
def column(name):
    return table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows
print(json.dumps([column("id"), column(sys.argv[2]), column(sys.argv[3])]))
sys.stdout.flush()
os._exit(0)
"#;

/// Each live row's (row id, row commit version) by its `id`, from the files; rows whose id is
/// in `deleted` are skipped (a deletion vector hides them).
pub(crate) fn row_ids(
    dir: &Path,
    row_id: &str,
    version: &str,
    deleted: &BTreeSet<i64>,
) -> BTreeMap<i64, (i64, i64)> {
    let mut ids = BTreeMap::new();
    for add in active_adds(dir) {
        let base = add["baseRowId"]
            .as_i64()
            .unwrap_or_else(|| panic!("baseRowId: {add}"));
        let default = add["defaultRowCommitVersion"]
            .as_i64()
            .expect("defaultRowCommitVersion");
        let file = dir.join(urlencoding_decode(add["path"].as_str().unwrap()));
        let columns: Vec<Vec<Option<i64>>> = serde_json::from_str(
            run_python(COLUMNS, &[file.to_str().unwrap(), row_id, version])
                .unwrap()
                .trim(),
        )
        .unwrap();
        for (position, key) in columns[0].iter().enumerate() {
            let key = key.expect("id");
            if deleted.contains(&key) {
                continue;
            }
            let id = columns[1][position].unwrap_or(base + position as i64);
            let commit = columns[2][position].unwrap_or(default);
            assert!(ids.insert(key, (id, commit)).is_none(), "id {key} twice");
        }
    }
    ids
}

fn urlencoding_decode(path: &str) -> String {
    path.replace("%3D", "=").replace("%20", " ")
}

/// Switches row tracking on as Delta does for an existing table: the protocol with the
/// feature, the metadata naming the materialized columns, every active file restated with
/// its `baseRowId` and `defaultRowCommitVersion`, and the high-water mark.
pub(crate) fn enable_row_tracking(dir: &Path) {
    let (mut metadata, version) = latest_metadata(dir);
    let configuration = metadata["configuration"].as_object_mut().unwrap();
    configuration.insert("delta.enableRowTracking".into(), json!("true"));
    configuration.insert(
        "delta.rowTracking.materializedRowIdColumnName".into(),
        json!(ROW_ID),
    );
    configuration.insert(
        "delta.rowTracking.materializedRowCommitVersionColumnName".into(),
        json!(ROW_VERSION),
    );
    let mut out = vec![
        json!({"commitInfo": {"timestamp": chrono::Utc::now().timestamp_millis(),
            "operation": "SET TBLPROPERTIES", "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0"}}),
        json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["appendOnly", "invariants", "deletionVectors", "domainMetadata",
                "rowTracking"]}}),
        json!({ "metaData": metadata }),
    ];
    let mut next = 0i64;
    for mut add in active_adds(dir) {
        let stats: Value = serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
        add["baseRowId"] = json!(next);
        add["defaultRowCommitVersion"] = json!(version);
        add["dataChange"] = json!(false);
        next += stats["numRecords"].as_i64().unwrap();
        out.push(json!({ "add": add }));
    }
    out.push(json!({"domainMetadata": {"domain": "delta.rowTracking",
        "configuration": json!({"rowIdHighWaterMark": next - 1}).to_string(), "removed": false}}));
    let text: String = out.iter().map(|a| format!("{a}\n")).collect();
    std::fs::write(
        dir.join("_delta_log").join(format!("{version:020}.json")),
        text,
    )
    .unwrap();
}

async fn same_rows(uri: &str, python: &[String], rust: &[String]) {
    assert_eq!(python_rows(uri, None).expect("python reads"), python);
    assert_eq!(
        read_rows_sorted(uri, None).await.expect("deltalake reads"),
        rust
    );
}

#[tokio::test]
async fn rows_keep_their_ids_through_purge_compaction_and_z_order() {
    let t = create_table(false, &[("delta.enableDeletionVectors", "true")]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-01")).await;
    }
    let deleted: BTreeSet<i64> = [3, 17].into();
    delete_with_deletion_vectors(&t.uri, &deleted)
        .await
        .expect("delete");
    enable_row_tracking(t.path());
    let before = row_ids(t.path(), ROW_ID, ROW_VERSION, &deleted);
    assert_eq!(before.len(), 38);
    let python = python_rows(&t.uri, None).expect("python reads");
    let rust = read_rows_sorted(&t.uri, None)
        .await
        .expect("deltalake reads");
    let cancel = CancellationToken::new();

    let purged = optimize(&t.uri, Optimize::Purge(&purge_vectors()), &cancel)
        .await
        .expect("purge of a row-tracking table");
    assert_eq!(purged.files_removed, 2, "{purged:?}");
    // the deleted rows are gone from the files now, so nothing is skipped any more
    assert_eq!(
        row_ids(t.path(), ROW_ID, ROW_VERSION, &BTreeSet::new()),
        before
    );
    same_rows(&t.uri, &python, &rust).await;

    let compacted = optimize(&t.uri, Optimize::Compact(&compact_small_files()), &cancel)
        .await
        .expect("compaction of a row-tracking table");
    assert_eq!(compacted.files_added, 1, "{compacted:?}");
    assert_eq!(
        row_ids(t.path(), ROW_ID, ROW_VERSION, &BTreeSet::new()),
        before
    );
    same_rows(&t.uri, &python, &rust).await;

    let zordered = optimize(
        &t.uri,
        Optimize::ZOrder(&zorder_on(&["value", "id"])),
        &cancel,
    )
    .await
    .expect("z-order of a row-tracking table");
    assert_eq!(zordered.files_removed, 1, "{zordered:?}");
    assert_eq!(
        row_ids(t.path(), ROW_ID, ROW_VERSION, &BTreeSet::new()),
        before
    );
    same_rows(&t.uri, &python, &rust).await;

    // fresh default ids above the mark for every new file, and the mark advanced
    let marks: Vec<i64> = log_lines(t.path())
        .into_iter()
        .filter_map(|(_, a)| a.get("domainMetadata").cloned())
        .filter(|d| d["domain"] == "delta.rowTracking")
        .map(|d| {
            serde_json::from_str::<Value>(d["configuration"].as_str().unwrap()).unwrap()
                ["rowIdHighWaterMark"]
                .as_i64()
                .unwrap()
        })
        .collect();
    assert!(marks.windows(2).all(|w| w[1] > w[0]), "{marks:?}");
    assert_eq!(
        marks.len(),
        4,
        "backfill, purge, compaction, z-order: {marks:?}"
    );
}

#[tokio::test]
async fn databricks_liquid_clustered_rows_keep_their_ids_when_clustered() {
    let dir = crate::aged::reference_table("table_with_liquid_clustering");
    let uri = dir.path().to_str().unwrap().to_owned();
    let (row_id, version) = (
        "_row-id-col-4cbc7924-f662-4db1-aa59-22c23f59eb5d",
        "_row-commit-version-col-2f60dcc1-9e36-4424-95e7-799b707e4ddb",
    );
    let before = row_ids(dir.path(), row_id, version, &BTreeSet::new());
    let python = python_rows(&uri, None).expect("python reads");
    let rust = read_rows_sorted(&uri, None).await.expect("deltalake reads");
    let report = optimize(
        &uri,
        Optimize::Compact(&compact_small_files()),
        &CancellationToken::new(),
    )
    .await
    .expect("clustering of a Databricks table with row tracking");
    assert_eq!(report.files_removed, 10, "{report:?}");
    let adds = active_adds(dir.path());
    assert_eq!(adds.len(), 1);
    assert_eq!(adds[0]["clusteringProvider"], "tablekeeper");
    assert_eq!(
        row_ids(dir.path(), row_id, version, &BTreeSet::new()),
        before
    );
    same_rows(&uri, &python, &rust).await;
}
