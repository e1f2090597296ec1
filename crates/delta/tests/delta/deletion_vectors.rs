//! Tables with deletion vectors, as Databricks writes them by default: compaction, Z-order,
//! purge, VACUUM and checkpoints keep every live row (read back by deltalake and by python
//! deltalake), never bring a deleted row back, and purge + VACUUM leave no deleted row on
//! storage. Deletes are written with deletion vectors by the crate's fixture (the Delta
//! kernel's vector writer), or come from the Databricks-written reference tables.

use std::collections::BTreeSet;
use std::time::Duration;

use deltalake::kernel::transaction::CommitBuilder;
use deltalake::kernel::{Action, Add};
use deltalake::protocol::DeltaOperation;
use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_delta::fixtures::{delete_with_deletion_vectors, ids_in_parquet_files};
use tablekeeper_delta::{
    checkpoint, optimize, vacuum, verify_rewrite_commit, CheckpointOptions, CompactOptions,
    DeltaError, LogCleanup, OpReport, Optimize, ProbeOptions, Prober, PurgeOptions, VacuumMode,
    VacuumOptions, ZorderOptions, DEFAULT_STALE_WATCH,
};
use tokio_util::sync::CancellationToken;

use crate::aged::reference_table;
use crate::common::{create_table, rows, TestTable};

const TARGET: u64 = 64 * 1024 * 1024;

async fn dv_table(partitioned: bool) -> TestTable {
    create_table(partitioned, &[("delta.enableDeletionVectors", "true")]).await
}

fn compact_options() -> CompactOptions {
    CompactOptions {
        target_file_size: TARGET,
        min_small_files: 2,
        small_file_factor: 0.75,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 0,
    }
}

fn zorder_options(column: &str) -> ZorderOptions {
    ZorderOptions {
        columns: vec![column.to_owned()],
        target_file_size: TARGET,
        since_version: None,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 0,
    }
}

fn purge_options() -> PurgeOptions {
    PurgeOptions {
        target_file_size: TARGET,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 0,
    }
}

fn vacuum_now() -> VacuumOptions {
    VacuumOptions {
        inventory_retention: Duration::ZERO,
        allow_short_retention: true,
        mode: VacuumMode::Full,
        dry_run: false,
        stale_watch: DEFAULT_STALE_WATCH,
        keep: Default::default(),
    }
}

async fn purge(uri: &str) -> Result<OpReport, DeltaError> {
    optimize(
        uri,
        Optimize::Purge(&purge_options()),
        &CancellationToken::new(),
    )
    .await
}

async fn probe(uri: &str) -> tablekeeper_delta::Probe {
    Prober::new()
        .probe(uri, &ProbeOptions::for_target(TARGET))
        .await
        .expect("probe")
}

/// Both readers' rows of the latest version.
async fn both_readers(uri: &str) -> (Vec<String>, Vec<String>) {
    tablekeeper_delta::fixtures::both_readers(uri)
        .await
        .expect("both readers read it")
}

/// The JSON actions of one commit file.
fn actions(t: &std::path::Path, version: i64) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(t.join(format!("_delta_log/{version:020}.json")))
        .expect("commit file");
    text.lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

fn deletion_vector_files(root: &std::path::Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("deletion_vector_"))
            {
                found.insert(
                    path.strip_prefix(root)
                        .expect("under root")
                        .display()
                        .to_string(),
                );
            }
        }
    }
    found
}

#[tokio::test]
async fn compaction_and_zorder_apply_deletion_vectors_and_keep_every_live_row() {
    let t = dv_table(true).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-01")).await;
    }
    for i in 4..6 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-02")).await;
    }
    let deleted: BTreeSet<i64> = [1, 2, 13, 25, 41, 59].into();
    assert_eq!(
        delete_with_deletion_vectors(&t.uri, &deleted)
            .await
            .expect("delete"),
        6
    );
    let before = both_readers(&t.uri).await;
    assert_eq!(before.0.len(), 54, "the deletion vectors hide six rows");
    assert_eq!(
        before.1.len(),
        54,
        "python applies the deletion vectors too"
    );
    let with_vectors = probe(&t.uri).await;
    assert_eq!(with_vectors.deleted_rows, 6);
    assert_eq!(with_vectors.files_with_deletion_vectors, 5);

    let compacted = optimize(
        &t.uri,
        Optimize::Compact(&compact_options()),
        &CancellationToken::new(),
    )
    .await
    .expect("compaction of a deletion-vector table");
    assert!(!compacted.commits.is_empty(), "{compacted:?}");
    assert!(compacted.warnings.is_empty(), "{compacted:?}");
    assert_eq!(both_readers(&t.uri).await, before, "rows after compaction");
    // every remove of a file with a vector carries the vector (the protocol's file identity)
    let mut removes_with_vectors = 0;
    for version in &compacted.commits {
        for action in actions(t.path(), *version) {
            if let Some(remove) = action.get("remove") {
                if remove.get("deletionVector").is_some_and(|d| !d.is_null()) {
                    removes_with_vectors += 1;
                }
            }
        }
    }
    assert_eq!(removes_with_vectors, 5, "removes must carry their vectors");
    assert_eq!(
        probe(&t.uri).await.deleted_rows,
        0,
        "compaction applied the vectors"
    );

    let zordered = optimize(
        &t.uri,
        Optimize::ZOrder(&zorder_options("event_type")),
        &CancellationToken::new(),
    )
    .await
    .expect("z-order of a deletion-vector table");
    assert!(!zordered.commits.is_empty(), "{zordered:?}");
    assert_eq!(both_readers(&t.uri).await, before, "rows after z-order");
}

#[tokio::test]
async fn purge_then_vacuum_leaves_no_deleted_row_on_storage() {
    let t = dv_table(false).await;
    // one large-enough file alone is never a compaction candidate: only a purge rewrites it
    t.append(&rows(0..200, "2024-01-01")).await;
    t.append(&rows(200..210, "2024-01-01")).await;
    let deleted: BTreeSet<i64> = [3, 50, 199, 205].into();
    delete_with_deletion_vectors(&t.uri, &deleted)
        .await
        .expect("delete");
    let before = both_readers(&t.uri).await;
    assert_eq!(before.0.len(), 206);
    let stored = ids_in_parquet_files(t.path()).expect("scan files");
    assert!(
        deleted.is_subset(&stored),
        "a soft delete leaves the rows in the files"
    );
    let soft = probe(&t.uri).await;
    assert_eq!(soft.deleted_rows, 4);
    assert_eq!(soft.files_with_deletion_vectors, 2);
    assert_eq!(soft.rows_in_files_with_deletion_vectors, 210);
    assert!(soft.history.erasure_pending_since.is_some(), "{soft:?}");

    // a dry run changes nothing
    let dry = optimize(
        &t.uri,
        Optimize::Purge(&PurgeOptions {
            compression: Default::default(),
            dry_run: true,
            ..purge_options()
        }),
        &CancellationToken::new(),
    )
    .await
    .expect("dry run");
    assert_eq!(dry.files_removed, 2, "{dry:?}");
    assert!(dry.commits.is_empty());
    assert_eq!(probe(&t.uri).await.deleted_rows, 4);

    let purged = purge(&t.uri).await.expect("purge");
    assert_eq!(purged.commits.len(), 1, "{purged:?}");
    assert_eq!(purged.files_removed, 2, "{purged:?}");
    assert!(purged.warnings.is_empty(), "{purged:?}");
    assert_eq!(both_readers(&t.uri).await, before, "rows after purge");
    let after_purge = probe(&t.uri).await;
    assert_eq!(after_purge.files_with_deletion_vectors, 0);
    assert_eq!(after_purge.deleted_rows, 0);
    assert!(
        after_purge.history.erasure_pending_since.is_some(),
        "the purged files still hold the rows until VACUUM: {after_purge:?}"
    );
    assert!(after_purge.history.erasure_last_removal_at.is_some());
    // idempotent
    let again = purge(&t.uri).await.expect("second purge");
    assert!(
        again.commits.is_empty() && again.skipped.is_some(),
        "{again:?}"
    );

    let vacuumed = vacuum(&t.uri, &vacuum_now(), &CancellationToken::new())
        .await
        .expect("vacuum");
    assert!(vacuumed.files_removed >= 2, "{vacuumed:?}");
    let stored = ids_in_parquet_files(t.path()).expect("scan files");
    assert!(
        stored.is_disjoint(&deleted),
        "deleted rows still on storage: {:?}",
        stored.intersection(&deleted).collect::<Vec<_>>()
    );
    assert!(
        deletion_vector_files(t.path()).is_empty(),
        "unreferenced deletion-vector files are vacuumed like data files"
    );
    assert_eq!(both_readers(&t.uri).await, before, "rows after vacuum");
    let erased = probe(&t.uri).await;
    assert_eq!(erased.history.erasure_pending_since, None, "{erased:?}");
    assert_eq!(erased.deleted_rows, 0);
}

#[tokio::test]
async fn vacuum_never_deletes_a_deletion_vector_file_the_table_still_needs() {
    let t = dv_table(false).await;
    t.append(&rows(0..20, "2024-01-01")).await;
    t.append(&rows(20..40, "2024-01-01")).await;
    delete_with_deletion_vectors(&t.uri, &[5, 25].into())
        .await
        .expect("delete");
    let needed = deletion_vector_files(t.path());
    assert_eq!(needed.len(), 2);
    let before = both_readers(&t.uri).await;

    // zero retention, full listing: the vectors of the active files must survive it
    let result = vacuum(&t.uri, &vacuum_now(), &CancellationToken::new()).await;
    match &result {
        Ok(report) => assert!(
            report
                .would_delete_paths
                .iter()
                .all(|p| !needed.contains(p)),
            "{report:?}"
        ),
        Err(DeltaError::UnsafeVacuum { files, .. }) => {
            assert!(files.iter().all(|f| needed.contains(f)), "{files:?}")
        }
        Err(other) => panic!("unexpected {other}"),
    }
    assert_eq!(deletion_vector_files(t.path()), needed);
    assert_eq!(
        both_readers(&t.uri).await,
        before,
        "the table reads as before"
    );
}

#[tokio::test]
async fn the_row_check_catches_a_rewrite_that_brings_deleted_rows_back() {
    let t = dv_table(false).await;
    t.append(&rows(0..10, "2024-01-01")).await;
    delete_with_deletion_vectors(&t.uri, &[1, 2].into())
        .await
        .expect("delete");
    // a "rewrite" that ends the logical file with its vector and adds the same data file
    // without it: the two deleted rows come back
    let table = t.open().await;
    let snapshot = table.snapshot().expect("snapshot").clone();
    let file = snapshot
        .snapshot()
        .log_data()
        .into_iter()
        .next()
        .expect("one file");
    let add = Add {
        path: file.path().into_owned(),
        partition_values: file.partition_values_map(),
        size: file.size(),
        modification_time: file.modification_time(),
        data_change: false,
        stats: file.stats(),
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    };
    let version = CommitBuilder::default()
        .with_actions(vec![
            Action::Remove(file.remove_action(false)),
            Action::Add(add),
        ])
        .build(
            Some(snapshot.snapshot()),
            table.log_store(),
            DeltaOperation::Optimize {
                predicate: None,
                target_size: 1,
            },
        )
        .await
        .expect("commit")
        .version();
    match verify_rewrite_commit(&t.uri, i64::try_from(version).unwrap()).await {
        Err(DeltaError::RowsChanged {
            expected, found, ..
        }) => assert_eq!((expected, found), (8, 10)),
        other => panic!("expected a row violation, got {other:?}"),
    }
}

/// Rows of every Parquet file on storage (live or not), as python reads them from the files
/// themselves: with no deletion vector left and nothing superseded, exactly the live rows.
fn rows_in_files(root: &std::path::Path) -> Vec<String> {
    const CODE: &str = r#"
import json, os, sys, pathlib
import pyarrow.parquet as pq
rows = []
for path in pathlib.Path(sys.argv[1]).rglob("*.parquet"):
    if "_delta_log" in path.parts:
        continue
    rows.extend(pq.read_table(path).to_pylist())
print(json.dumps(sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)))
sys.stdout.flush()
os._exit(0)
"#;
    let out = run_python(CODE, &[root.to_str().expect("utf-8")]).expect("python");
    serde_json::from_str(out.trim()).expect("row list")
}

#[tokio::test]
async fn databricks_deletion_vector_tables_are_maintained_and_erased() {
    for (name, column) in [
        ("table-with-dv-small", "value"),
        ("table_with_deletion_logs", "id"),
    ] {
        let dir = reference_table(name);
        let uri = dir.path().to_str().expect("utf-8").to_owned();
        let before = both_readers(&uri).await;
        assert!(!before.0.is_empty(), "{name}");
        assert_eq!(
            before.0.len(),
            before.1.len(),
            "{name}: the readers disagree"
        );
        let soft = probe(&uri).await;
        assert!(soft.deleted_rows > 0, "{name}: {soft:?}");
        let cancel = CancellationToken::new();

        optimize(&uri, Optimize::Compact(&compact_options()), &cancel)
            .await
            .unwrap_or_else(|e| panic!("{name}: compaction: {e}"));
        assert_eq!(
            both_readers(&uri).await,
            before,
            "{name}: rows after compaction"
        );
        optimize(&uri, Optimize::ZOrder(&zorder_options(column)), &cancel)
            .await
            .unwrap_or_else(|e| panic!("{name}: z-order: {e}"));
        assert_eq!(
            both_readers(&uri).await,
            before,
            "{name}: rows after z-order"
        );
        purge(&uri)
            .await
            .unwrap_or_else(|e| panic!("{name}: purge: {e}"));
        assert_eq!(both_readers(&uri).await, before, "{name}: rows after purge");
        let purged = probe(&uri).await;
        assert_eq!(purged.files_with_deletion_vectors, 0, "{name}: {purged:?}");
        checkpoint(
            &uri,
            &CheckpointOptions {
                max_commits_since_checkpoint: 1,
                log_retention: Duration::from_secs(3650 * 86_400),
                force: true,
                log_cleanup: LogCleanup::Unrecorded,
                pins: Vec::new(),
            },
            &cancel,
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: checkpoint: {e}"));
        vacuum(&uri, &vacuum_now(), &cancel)
            .await
            .unwrap_or_else(|e| panic!("{name}: vacuum: {e}"));
        assert_eq!(
            both_readers(&uri).await,
            before,
            "{name}: rows after vacuum"
        );
        assert_eq!(
            rows_in_files(dir.path()),
            python_rows(&uri, None).expect("python"),
            "{name}: storage holds rows the table no longer has"
        );
        assert_eq!(
            probe(&uri).await.history.erasure_pending_since,
            None,
            "{name}"
        );
    }
}

#[tokio::test]
async fn vacuum_keeps_the_deletion_vectors_a_version_inside_the_window_reads() {
    let t = dv_table(false).await;
    t.append(&rows(0..20, "2024-01-01")).await;
    delete_with_deletion_vectors(&t.uri, &[4, 7].into())
        .await
        .expect("delete");
    let soft_version = t.version().await;
    let soft_rows = python_rows(&t.uri, Some(soft_version)).expect("python");
    assert_eq!(soft_rows.len(), 18);
    let vectors = deletion_vector_files(t.path());
    purge(&t.uri).await.expect("purge");
    // the vector now serves only the version before the purge, which the 7-day window keeps;
    // its file looks a month old, as after a slow week of deletes
    let month_ago = std::time::SystemTime::now() - Duration::from_secs(30 * 86_400);
    for file in &vectors {
        std::fs::File::options()
            .write(true)
            .open(t.path().join(file))
            .expect("open")
            .set_modified(month_ago)
            .expect("set mtime");
    }

    let result = vacuum(
        &t.uri,
        &VacuumOptions {
            inventory_retention: Duration::from_secs(7 * 86_400),
            allow_short_retention: false,
            ..vacuum_now()
        },
        &CancellationToken::new(),
    )
    .await;
    if let Err(err) = &result {
        assert!(matches!(err, DeltaError::UnsafeVacuum { .. }), "{err}");
    }
    assert_eq!(deletion_vector_files(t.path()), vectors, "{result:?}");
    assert_eq!(
        python_rows(&t.uri, Some(soft_version)).expect("time travel inside the window"),
        soft_rows
    );
}

#[tokio::test]
async fn purge_rewrites_only_the_files_with_vectors_in_a_partitioned_table() {
    let t = dv_table(true).await;
    for (i, day) in [
        (0, "2024-01-01"),
        (1, "2024-01-01"),
        (2, "2024-01-02"),
        (3, "2024-01-03"),
    ] {
        t.append(&rows(i * 10..i * 10 + 10, day)).await;
    }
    let untouched: BTreeSet<String> = t
        .active_paths()
        .await
        .into_iter()
        .filter(|p| p.contains("2024-01-03") || p.contains("2024-01-01"))
        .collect();
    // vectors on one file of 2024-01-01 and on the file of 2024-01-02
    delete_with_deletion_vectors(&t.uri, &[3, 21, 22].into())
        .await
        .expect("delete");
    let before = both_readers(&t.uri).await;
    assert_eq!(before.0.len(), 37);

    let purged = purge(&t.uri).await.expect("purge");
    assert_eq!(purged.files_removed, 2, "{purged:?}");
    assert_eq!(
        purged.partitions_touched,
        vec!["event_date=2024-01-01", "event_date=2024-01-02"],
        "{purged:?}"
    );
    assert_eq!(both_readers(&t.uri).await, before, "rows after purge");
    let after = t.active_paths().await;
    let kept: Vec<&String> = untouched.iter().filter(|p| after.contains(*p)).collect();
    assert_eq!(
        kept.len(),
        2,
        "the clean file of 2024-01-01 and the file of 2024-01-03 stay: {after:?}"
    );
    assert_eq!(probe(&t.uri).await.files_with_deletion_vectors, 0);
}

/// The stale-write hazard with deletion vectors, Databricks' default DELETE: a writer that read
/// the table before a compaction marks a row deleted in a file the compaction had replaced.
/// deltalake's own conflict check refuses that commit; a writer whose check misses it
/// re-activates the old file (with its vector) next to the compacted copy, so every other row
/// of that file would exist twice: the stale-write watch finds it and the repair restores
/// exactly what the writer meant.
#[tokio::test]
async fn a_deletion_vector_delete_planned_before_a_compaction_is_found_and_repaired() {
    use tablekeeper_delta::fixtures::{delete_with_deletion_vectors_planned_at, ConflictCheck};
    let t = dv_table(false).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-01")).await;
    }
    let planned_at = t.version().await;
    let compacted = optimize(
        &t.uri,
        Optimize::Compact(&compact_options()),
        &CancellationToken::new(),
    )
    .await
    .expect("compaction");
    assert!(!compacted.commits.is_empty(), "{compacted:?}");
    let refused = delete_with_deletion_vectors_planned_at(
        &t.uri,
        &[5].into(),
        Some(planned_at),
        ConflictCheck::Deltalake,
    )
    .await
    .expect_err("deltalake's conflict check refuses the stale delete");
    assert!(
        refused
            .to_string()
            .contains("a concurrent transactions added new data"),
        "{refused}"
    );
    assert_eq!(t.rows().await.len(), 40);

    let deleted = delete_with_deletion_vectors_planned_at(
        &t.uri,
        &[5].into(),
        Some(planned_at),
        ConflictCheck::None,
    )
    .await
    .expect("the stale delete lands");
    assert_eq!(deleted, 1);
    // the hazard, reproduced: 39 rows meant; the compacted copy's 40 (the deleted row too)
    // plus the old file's 9 live rows are visible
    assert_eq!(t.rows().await.len(), 49);

    let p = probe(&t.uri).await;
    assert_eq!(
        p.pending_stale_writes().count(),
        1,
        "{:?}",
        p.history.stale_writes
    );
    let repaired = tablekeeper_delta::repair(
        &t.uri,
        &tablekeeper_delta::RepairOptions::default(),
        &CancellationToken::new(),
    )
    .await
    .expect("repair");
    assert_eq!(repaired.commits.len(), 1, "{repaired:?}");
    let expected: Vec<i64> = (0..40).filter(|id| *id != 5).collect();
    let ids: Vec<i64> = t.rows().await.iter().map(|r| r.0).collect();
    assert_eq!(ids, expected, "deltalake: exactly the writer's rows");
    let python = python_rows(&t.uri, None).expect("python");
    assert_eq!(python.len(), 39, "python deltalake: {python:?}");
    assert!(probe(&t.uri).await.pending_stale_writes().next().is_none());
}
