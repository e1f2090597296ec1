use std::collections::BTreeSet;
use std::time::Duration;

use chrono::Utc;
use deltalake::kernel::transaction::CommitBuilder;
use deltalake::kernel::Action;
use deltalake::protocol::DeltaOperation;
use tablekeeper_delta::{
    optimize, vacuum, DeltaError, ErrorClass, Optimize, VacuumMode, VacuumOptions,
};
use tokio_util::sync::CancellationToken;

use crate::common::{create_table, rows, TestTable};

const WEEK: Duration = Duration::from_secs(7 * 86_400);

fn options(
    retention: Duration,
    allow_short: bool,
    mode: VacuumMode,
    dry_run: bool,
) -> VacuumOptions {
    VacuumOptions {
        inventory_retention: retention,
        allow_short_retention: allow_short,
        mode,
        dry_run,
        stale_watch: tablekeeper_delta::DEFAULT_STALE_WATCH,
        keep: Default::default(),
    }
}

/// A partitioned table with tombstones from a delete, an update and a compaction.
async fn table_with_tombstones() -> TestTable {
    let t = create_table(true, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-06-01")).await;
    }
    t.append(&rows(100..110, "2024-06-02")).await;
    t.delete("id % 4 = 0").await;
    t.update_value("id = 101", "7").await;
    optimize(
        &t.uri,
        Optimize::Compact(&tablekeeper_delta::fixtures::compact_every_small_file(2, 0)),
        &CancellationToken::new(),
    )
    .await
    .expect("compaction");
    t
}

#[tokio::test]
async fn retention_under_a_week_is_refused_without_the_flag() {
    let t = table_with_tombstones().await;
    let version = t.version().await;
    let disk = t.parquet_on_disk();
    let err = vacuum(
        &t.uri,
        &options(Duration::from_secs(3600), false, VacuumMode::Lite, false),
        &CancellationToken::new(),
    )
    .await
    .expect_err("refused");
    assert!(
        matches!(
            err,
            DeltaError::RetentionTooShort {
                requested_hours: 1,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert!(err.to_string().contains("allow_short_retention"), "{err}");
    assert_eq!(t.parquet_on_disk(), disk);
    assert_eq!(t.version().await, version);
}

#[tokio::test]
async fn a_week_of_retention_keeps_fresh_tombstones() {
    let t = table_with_tombstones().await;
    let disk = t.parquet_on_disk();
    let history = t.rows_by_version().await;
    let report = vacuum(
        &t.uri,
        &options(WEEK, false, VacuumMode::Full, false),
        &CancellationToken::new(),
    )
    .await
    .expect("vacuum");
    assert_eq!(report.retention_used_secs, Some(WEEK.as_secs()));
    assert_eq!(report.would_delete_files, Some(0));
    assert!(report.skipped.is_some(), "{report:?}");
    assert_eq!(t.parquet_on_disk(), disk);
    // every version is inside the week: time travel to each still reads the same rows
    for (version, expected) in history {
        assert_eq!(
            t.rows_at(version).await,
            expected,
            "time travel to {version}"
        );
    }
}

#[tokio::test]
async fn short_retention_when_allowed_deletes_exactly_the_unreferenced_files() {
    let t = table_with_tombstones().await;
    let active = t.active_paths().await;
    let disk = t.parquet_on_disk();
    let unreferenced: BTreeSet<String> = disk.difference(&active).cloned().collect();
    assert!(unreferenced.len() >= 4, "setup: {unreferenced:?}");
    let rows_before = t.rows().await;
    let version = t.version().await;

    // the dry run lists exactly the unreferenced files and deletes nothing
    let dry = vacuum(
        &t.uri,
        &options(Duration::ZERO, true, VacuumMode::Lite, true),
        &CancellationToken::new(),
    )
    .await
    .expect("dry run");
    assert!(dry.dry_run);
    assert_eq!(dry.would_delete_files, Some(unreferenced.len() as u64));
    let listed: BTreeSet<String> = dry.would_delete_paths.iter().cloned().collect();
    assert_eq!(listed, unreferenced);
    assert!(dry.would_delete_bytes.unwrap() > 0);
    assert_eq!(t.parquet_on_disk(), disk);
    assert_eq!(t.version().await, version);

    let report = vacuum(
        &t.uri,
        &options(Duration::ZERO, true, VacuumMode::Lite, false),
        &CancellationToken::new(),
    )
    .await
    .expect("vacuum");
    assert_eq!(report.retention_used_secs, Some(0));
    assert_eq!(report.files_removed, unreferenced.len() as u64);
    assert_eq!(report.bytes_removed, dry.would_delete_bytes.unwrap());
    assert_eq!(report.commits.len(), 2, "VACUUM START and END: {report:?}");
    assert_eq!(
        t.parquet_on_disk(),
        active,
        "exactly the active files remain"
    );
    assert_eq!(t.rows().await, rows_before);

    // deltalake lists the deleted files again until a checkpoint drops their tombstones;
    // tablekeeper counts only files that still exist
    let again = vacuum(
        &t.uri,
        &options(Duration::ZERO, true, VacuumMode::Lite, false),
        &CancellationToken::new(),
    )
    .await
    .expect("second vacuum");
    assert_eq!(again.files_removed, 0);
    assert_eq!(again.would_delete_files, Some(0));
    assert!(again.skipped.is_some());
}

#[tokio::test]
async fn full_mode_removes_orphans_that_lite_mode_keeps() {
    let t = create_table(false, &[]).await;
    for i in 0..3 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-06-01")).await;
    }
    let active = t.active_paths().await;
    let some_file = active.iter().next().unwrap().clone();
    let orphan = "part-00000-orphan-of-a-failed-optimize.parquet";
    std::fs::copy(t.path().join(&some_file), t.path().join(orphan)).unwrap();

    let lite = vacuum(
        &t.uri,
        &options(Duration::ZERO, true, VacuumMode::Lite, false),
        &CancellationToken::new(),
    )
    .await
    .expect("lite");
    assert_eq!(lite.files_removed, 0);
    assert!(t.path().join(orphan).exists());

    let full = vacuum(
        &t.uri,
        &options(Duration::ZERO, true, VacuumMode::Full, false),
        &CancellationToken::new(),
    )
    .await
    .expect("full");
    assert_eq!(full.files_removed, 1);
    assert!(!t.path().join(orphan).exists());
    assert_eq!(t.parquet_on_disk(), active);
}

#[tokio::test]
async fn a_tombstone_with_a_skewed_timestamp_is_caught_by_the_cross_check() {
    let t = create_table(false, &[]).await;
    for i in 0..3 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-06-01")).await;
    }
    let version_with_file = t.version().await;
    let rows_then = t.rows().await;
    // a writer whose clock is a month behind removes a file: its tombstone looks expired to
    // VACUUM, yet every version of this table (all inside the week) still references the file
    let table = t.open().await;
    let file = table
        .snapshot()
        .unwrap()
        .snapshot()
        .log_data()
        .into_iter()
        .next()
        .unwrap();
    let victim = file.path().into_owned();
    let mut remove = file.remove_action(true);
    remove.deletion_timestamp = Some(Utc::now().timestamp_millis() - 30 * 86_400_000);
    CommitBuilder::default()
        .with_actions(vec![Action::Remove(remove)])
        .build(
            Some(table.snapshot().unwrap()),
            table.log_store(),
            DeltaOperation::Delete { predicate: None },
        )
        .await
        .expect("commit the skewed remove");

    let err = vacuum(
        &t.uri,
        &options(WEEK, false, VacuumMode::Lite, false),
        &CancellationToken::new(),
    )
    .await
    .expect_err("refused");
    match &err {
        DeltaError::UnsafeVacuum { files, .. } => assert_eq!(files, &vec![victim.clone()]),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert!(t.path().join(&victim).exists(), "nothing was deleted");
    assert_eq!(
        t.rows_at(version_with_file).await,
        rows_then,
        "time travel still works"
    );
}

#[tokio::test]
async fn a_retention_property_spelled_without_interval_still_counts() {
    // Databricks documents `'30 days'`; the Delta kernel's parser wants `interval 30 days` and
    // deltalake 1.1.2 silently reads this table as its 7-day default (measured), so its own
    // VACUUM would delete files the table asked to keep for a month
    let t = create_table(false, &[("delta.deletedFileRetentionDuration", "30 days")]).await;
    t.append(&rows(0..10, "2024-06-01")).await;
    let report = vacuum(
        &t.uri,
        &options(WEEK, false, VacuumMode::Lite, true),
        &CancellationToken::new(),
    )
    .await
    .expect("dry run");
    assert_eq!(report.retention_used_secs, Some(30 * 86_400));
    let drift = report
        .retention_drift
        .expect("drift against the inventory's week");
    assert_eq!(drift.table_secs, 30 * 86_400);
    assert_eq!(drift.inventory_secs, WEEK.as_secs());
}

/// Found by the cost-growth benchmark: until a checkpoint drops old tombstones, deltalake's
/// lite VACUUM lists files an earlier VACUUM already deleted, and on local storage reports
/// them back by absolute path. The plan check must not mistake those for unplanned
/// deletions: a second and third VACUUM succeed and count only what they reclaimed.
#[tokio::test]
async fn repeated_lite_vacuums_succeed_while_old_tombstones_remain() {
    let t = table_with_tombstones().await;
    let cancel = CancellationToken::new();
    let short = options(Duration::ZERO, true, VacuumMode::Lite, false);
    let first = vacuum(&t.uri, &short, &cancel).await.expect("first vacuum");
    assert!(first.files_removed > 0, "{first:?}");
    for round in 0..2 {
        let base = 200 + round * 10;
        t.append(&rows(base..base + 5, "2024-06-03")).await;
        t.delete(&format!("id = {base}")).await;
        let before = t.rows().await;
        let again = vacuum(&t.uri, &short, &cancel)
            .await
            .unwrap_or_else(|e| panic!("vacuum round {round}: {e}"));
        assert!(again.files_removed >= 1, "round {round}: {again:?}");
        assert_eq!(t.rows().await, before);
        let on_disk = t.parquet_on_disk();
        let active = t.active_paths().await;
        assert_eq!(on_disk, active, "round {round}: only live files remain");
    }
}
