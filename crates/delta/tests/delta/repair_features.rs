//! Repairs on tables with the writer features deltalake's own commit path refuses: row tracking
//! (a file added back keeps its own row ids, no id is handed out twice) and in-commit
//! timestamps (the repair's `commitInfo` comes first, its timestamp above the previous
//! commit's). The stale write is Spark's `DELETE WHERE id < 10` from a snapshot taken before
//! tablekeeper's compaction, written by hand as Spark writes it on such a table (no writer here
//! writes these features): it removes the whole file holding ids 0–9, which the compaction had
//! already replaced. The repair undoes the compaction's bin and adds back the other three inputs.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value};
use tablekeeper_delta::fixtures::peers::python_rows;
use tablekeeper_delta::{optimize, repair, Optimize, RepairOptions};
use tokio_util::sync::CancellationToken;

use crate::common::{
    active_adds, compact_small_files, create_table, latest_metadata, log_lines, rows, TestTable,
};
use crate::row_tracking::{enable_row_tracking, row_ids, ROW_ID, ROW_VERSION};

const SPARK: &str = "Apache-Spark/3.5.1 Delta-Lake/3.2.0";

/// Four appends of ten rows each (ids 0–39), one file each.
async fn four_files() -> TestTable {
    let t = create_table(false, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-01")).await;
    }
    t
}

fn next_version(dir: &Path) -> u64 {
    log_lines(dir).last().map_or(0, |(v, _)| v + 1)
}

/// The highest `inCommitTimestamp` in the log, if any commit has one.
fn last_in_commit_timestamp(dir: &Path) -> Option<i64> {
    log_lines(dir)
        .iter()
        .filter_map(|(_, a)| a.get("commitInfo")?.get("inCommitTimestamp")?.as_i64())
        .max()
}

/// A `commitInfo` as Spark writes it, with the in-commit timestamp first where the table keeps
/// them.
fn commit_info(dir: &Path, operation: &str, extra: Value) -> Value {
    let now = chrono::Utc::now().timestamp_millis();
    let mut info = serde_json::Map::new();
    if let Some(previous) = last_in_commit_timestamp(dir) {
        info.insert("inCommitTimestamp".into(), json!(now.max(previous + 1)));
    }
    info.insert("timestamp".into(), json!(now));
    info.insert("operation".into(), json!(operation));
    info.insert("engineInfo".into(), json!(SPARK));
    if let Value::Object(extra) = extra {
        info.extend(extra);
    }
    json!({ "commitInfo": info })
}

fn write_version(dir: &Path, version: u64, actions: &[Value]) {
    let text: String = actions.iter().map(|a| format!("{a}\n")).collect();
    std::fs::write(
        dir.join("_delta_log").join(format!("{version:020}.json")),
        text,
    )
    .unwrap();
}

/// Turns in-commit timestamps on as Delta does (`ALTER TABLE ... SET TBLPROPERTIES`): the
/// writer feature, the enablement version and timestamp, and the commit's own timestamp.
fn enable_in_commit_timestamps(dir: &Path) {
    let (mut metadata, version) = latest_metadata(dir);
    let ict = chrono::Utc::now().timestamp_millis();
    let configuration = metadata["configuration"].as_object_mut().unwrap();
    configuration.insert("delta.enableInCommitTimestamps".into(), json!("true"));
    configuration.insert(
        "delta.inCommitTimestampEnablementVersion".into(),
        json!(version.to_string()),
    );
    configuration.insert(
        "delta.inCommitTimestampEnablementTimestamp".into(),
        json!(ict.to_string()),
    );
    write_version(
        dir,
        version,
        &[
            json!({"commitInfo": {"inCommitTimestamp": ict, "timestamp": ict,
                "operation": "SET TBLPROPERTIES", "engineInfo": SPARK}}),
            json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 7,
                "writerFeatures": ["appendOnly", "invariants", "inCommitTimestamp"]}}),
            json!({ "metaData": metadata }),
        ],
    );
}

/// The active file holding id 0, as the log has it.
fn file_with_id_zero(dir: &Path) -> Value {
    active_adds(dir)
        .into_iter()
        .find(|add| {
            let stats: Value = serde_json::from_str(add["stats"].as_str().unwrap()).unwrap();
            stats["minValues"]["id"] == 0
        })
        .expect("a file holds id 0")
}

/// Spark's `DELETE WHERE id < 10` from the snapshot at `read_version`, in which `file` (all of
/// whose rows match) was active: one remove, carrying the file's row ids.
fn stale_delete(dir: &Path, read_version: u64, file: &Value) {
    let version = next_version(dir);
    let info = commit_info(
        dir,
        "DELETE",
        json!({"operationParameters": {"predicate": "[\"(id#1L < 10)\"]"},
            "readVersion": read_version, "isolationLevel": "WriteSerializable",
            "isBlindAppend": false}),
    );
    let mut remove = json!({
        "path": file["path"], "deletionTimestamp": chrono::Utc::now().timestamp_millis(),
        "dataChange": true, "extendedFileMetadata": true,
        "partitionValues": file["partitionValues"], "size": file["size"],
    });
    for key in ["baseRowId", "defaultRowCommitVersion"] {
        if !file[key].is_null() {
            remove[key] = file[key].clone();
        }
    }
    write_version(dir, version, &[info, json!({ "remove": remove })]);
}

/// Compacts, lets the stale DELETE in, repairs; returns the repair's commit, line by line.
async fn compact_delete_and_repair(t: &TestTable) -> Vec<Value> {
    let read_version = next_version(t.path()) - 1;
    let deleted = file_with_id_zero(t.path());
    let cancel = CancellationToken::new();
    let compacted = optimize(&t.uri, Optimize::Compact(&compact_small_files()), &cancel)
        .await
        .expect("compaction");
    assert_eq!(compacted.files_removed, 4, "{compacted:?}");
    stale_delete(t.path(), read_version, &deleted);
    // the hazard: the deleted rows live on in the compacted file
    assert_eq!(python_rows(&t.uri, None).unwrap().len(), 40);

    let report = repair(&t.uri, &RepairOptions::default(), &cancel)
        .await
        .expect("the repair commits on this table");
    assert_eq!(report.repairs.len(), 1, "{report:?}");
    let plan = &report.repairs[0];
    assert_eq!(plan.refused, None, "{report:?}");
    assert_eq!(plan.re_add.len(), 3, "the three files the DELETE kept");
    let version = plan.committed_version.expect("committed") as u64;
    let commit: Vec<Value> = log_lines(t.path())
        .into_iter()
        .filter(|(v, _)| *v == version)
        .map(|(_, a)| a)
        .collect();
    assert_eq!(
        commit[0]["commitInfo"]["operation"], "RESTORE",
        "{commit:#?}"
    );

    // what the DELETE meant, through both readers
    let mut ids: Vec<i64> = python_rows(&t.uri, None)
        .unwrap()
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_i64()
                .unwrap()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (10..40).collect::<Vec<_>>(), "python deltalake");
    assert_eq!(t.rows().await.len(), 30, "deltalake");
    commit
}

#[tokio::test]
async fn a_repair_on_a_row_tracking_table_gives_restored_files_their_own_row_ids() {
    let t = four_files().await;
    enable_row_tracking(t.path());
    let before = row_ids(t.path(), ROW_ID, ROW_VERSION, &BTreeSet::new());
    let marks = || -> Vec<i64> {
        log_lines(t.path())
            .into_iter()
            .filter_map(|(_, a)| a.get("domainMetadata").cloned())
            .map(|d| {
                serde_json::from_str::<Value>(d["configuration"].as_str().unwrap()).unwrap()
                    ["rowIdHighWaterMark"]
                    .as_i64()
                    .unwrap()
            })
            .collect()
    };

    let commit = compact_delete_and_repair(&t).await;
    let marks_after = marks();

    // every remaining row has the id and commit version it had before any of this
    let after = row_ids(t.path(), ROW_ID, ROW_VERSION, &BTreeSet::new());
    let kept: std::collections::BTreeMap<_, _> =
        before.into_iter().filter(|(id, _)| *id >= 10).collect();
    assert_eq!(after, kept);
    // the restored files kept their own ids: nothing new was handed out, the mark stands
    assert!(
        commit.iter().all(|a| a.get("domainMetadata").is_none()),
        "{commit:#?}"
    );
    assert!(
        marks_after.windows(2).all(|w| w[1] >= w[0]),
        "{marks_after:?}"
    );
    for add in commit.iter().filter_map(|a| a.get("add")) {
        assert!(add["baseRowId"].is_i64(), "{add}");
    }
    for remove in commit.iter().filter_map(|a| a.get("remove")) {
        assert!(remove["baseRowId"].is_i64(), "{remove}");
    }
}

#[tokio::test]
async fn a_repair_on_an_in_commit_timestamp_table_records_a_later_timestamp_first() {
    let t = four_files().await;
    enable_in_commit_timestamps(t.path());
    let version_before = next_version(t.path());
    let previous = || last_in_commit_timestamp(t.path()).unwrap();
    let commit = compact_delete_and_repair(&t).await;
    let repaired = commit[0]["commitInfo"]["inCommitTimestamp"]
        .as_i64()
        .unwrap_or_else(|| panic!("the repair records its in-commit timestamp: {commit:#?}"));
    // every commit since the feature was turned on, the repair included, increases it
    let stamps: Vec<i64> = log_lines(t.path())
        .iter()
        .filter(|(v, _)| *v >= version_before - 1)
        .filter_map(|(_, a)| a.get("commitInfo")?.get("inCommitTimestamp")?.as_i64())
        .collect();
    assert!(stamps.windows(2).all(|w| w[1] > w[0]), "{stamps:?}");
    assert_eq!(repaired, previous());
}
