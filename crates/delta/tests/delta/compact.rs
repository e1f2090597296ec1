use tablekeeper_delta::{optimize, CompactOptions, DeltaError, Operation, Optimize};
use tokio_util::sync::CancellationToken;

use crate::common::{count_in_partition, create_table, rows};

/// Any real file is far under this, so every file counts as small.
const TARGET: u64 = 64 * 1024 * 1024;

fn options(min_small_files: u64) -> CompactOptions {
    CompactOptions {
        target_file_size: TARGET,
        min_small_files,
        small_file_factor: 0.75,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 3,
    }
}

#[tokio::test]
async fn compaction_rewrites_only_qualifying_partitions_and_keeps_every_row() {
    let t = create_table(true, &[]).await;
    // tombstones in every partition: deletes and updates rewrite the files they touch
    for i in 0..3 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-01")).await;
    }
    t.append(&rows(100..110, "2024-01-02")).await;
    t.append(&rows(200..210, "2024-01-03")).await;
    t.delete("id % 7 = 0").await;
    t.update_value("id % 5 = 1", "value + 1").await;
    // then 2024-01-01 gets five more small files, 2024-01-02 one more, 2024-01-03 none
    for i in 3..8 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-01")).await;
    }
    t.append(&rows(110..120, "2024-01-02")).await;
    let before_paths = t.active_paths().await;
    let history = t.rows_by_version().await;
    let rows_before = t.rows().await;
    let version_before = t.version().await;
    let small_in_first = count_in_partition(&before_paths, "2024-01-01");
    assert!(small_in_first >= 6, "setup: {small_in_first} files");

    let report = optimize(
        &t.uri,
        Optimize::Compact(&options(3)),
        &CancellationToken::new(),
    )
    .await
    .expect("compaction");

    assert_eq!(report.operation, Operation::Compact);
    assert_eq!(report.version_before, version_before as i64);
    assert_eq!(report.commits.len(), 1, "{report:?}");
    assert_eq!(report.version_after, Some(version_before as i64 + 1));
    assert_eq!(
        report.partitions_touched,
        vec!["event_date=2024-01-01".to_owned()]
    );
    assert_eq!(report.files_removed as usize, small_in_first);
    assert_eq!(report.files_added, 1);
    assert!(report.bytes_removed > 0 && report.bytes_added > 0);
    assert_eq!(report.conflicts, 0);
    assert!(report.skipped.is_none());

    let after_paths = t.active_paths().await;
    assert_eq!(count_in_partition(&after_paths, "2024-01-01"), 1);
    for date in ["2024-01-02", "2024-01-03"] {
        let prefix = format!("event_date={date}/");
        let untouched = |paths: &std::collections::BTreeSet<String>| -> Vec<String> {
            paths
                .iter()
                .filter(|p| p.starts_with(&prefix))
                .cloned()
                .collect()
        };
        assert_eq!(
            untouched(&before_paths),
            untouched(&after_paths),
            "{date} was rewritten"
        );
    }
    assert_eq!(t.rows().await, rows_before);
    for (version, expected) in history {
        assert_eq!(
            t.rows_at(version).await,
            expected,
            "time travel to {version}"
        );
    }
}

#[tokio::test]
async fn compaction_of_an_unpartitioned_table_with_checkpoints() {
    let t = create_table(false, &[("delta.checkpointInterval", "3")]).await;
    for i in 0..8 {
        t.append(&rows(i * 5..i * 5 + 5, "2024-02-01")).await;
    }
    t.delete("id < 3").await;
    t.update_value("id = 20", "0").await;
    assert!(
        std::fs::read_dir(t.path().join("_delta_log"))
            .unwrap()
            .any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".checkpoint.")),
        "setup: the table should have checkpoints"
    );
    let files_before = t.active_paths().await.len();
    let history = t.rows_by_version().await;
    let rows_before = t.rows().await;

    let report = optimize(
        &t.uri,
        Optimize::Compact(&options(2)),
        &CancellationToken::new(),
    )
    .await
    .expect("compaction");
    assert_eq!(report.partitions_touched, vec![String::new()]);
    assert_eq!(report.files_removed as usize, files_before);
    assert_eq!(t.active_paths().await.len(), 1);
    assert_eq!(t.rows().await, rows_before);
    for (version, expected) in history {
        assert_eq!(
            t.rows_at(version).await,
            expected,
            "time travel to {version}"
        );
    }
}

#[tokio::test]
async fn nothing_qualifies_means_skipped_and_no_commit() {
    let t = create_table(true, &[]).await;
    t.append(&rows(0..10, "2024-01-01")).await;
    t.append(&rows(10..20, "2024-01-02")).await;
    let version = t.version().await;
    let report = optimize(
        &t.uri,
        Optimize::Compact(&options(2)),
        &CancellationToken::new(),
    )
    .await
    .expect("compaction");
    assert!(report.skipped.is_some(), "{report:?}");
    assert!(report.commits.is_empty());
    assert_eq!(report.version_after, None);
    assert_eq!(t.version().await, version);
}

#[tokio::test]
async fn dry_run_reports_and_changes_nothing() {
    let t = create_table(true, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-01")).await;
    }
    let version = t.version().await;
    let paths = t.active_paths().await;
    let mut opts = options(2);
    opts.dry_run = true;
    let report = optimize(&t.uri, Optimize::Compact(&opts), &CancellationToken::new())
        .await
        .expect("dry run");
    assert!(report.dry_run);
    assert_eq!(report.files_removed, 4);
    assert_eq!(
        report.partitions_touched,
        vec!["event_date=2024-01-01".to_owned()]
    );
    assert_eq!(t.version().await, version);
    assert_eq!(t.active_paths().await, paths);
}

#[tokio::test]
async fn a_cancelled_compaction_does_not_commit() {
    let t = create_table(false, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-01")).await;
    }
    let version = t.version().await;
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = optimize(&t.uri, Optimize::Compact(&options(2)), &cancel)
        .await
        .expect_err("cancelled");
    assert!(matches!(err, DeltaError::Cancelled { .. }), "{err}");
    assert_eq!(t.version().await, version);
}

#[tokio::test]
async fn a_path_without_a_log_is_a_permanent_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().to_str().unwrap();
    let err = optimize(
        uri,
        Optimize::Compact(&options(2)),
        &CancellationToken::new(),
    )
    .await
    .expect_err("not a table");
    assert!(matches!(err, DeltaError::NotADeltaTable { .. }), "{err}");
    assert_eq!(err.class(), tablekeeper_delta::ErrorClass::Permanent);
    assert!(err.to_string().contains(uri), "{err}");
    assert!(err.to_string().contains("no _delta_log found"), "{err}");
}
