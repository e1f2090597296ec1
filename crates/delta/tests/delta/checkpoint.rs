use std::time::Duration;

use tablekeeper_delta::{checkpoint, CheckpointOptions};
use tokio_util::sync::CancellationToken;

use crate::common::{create_table, rows, TestTable};

const MONTH: Duration = Duration::from_secs(30 * 86_400);

fn options(max: u64, log_retention: Duration, force: bool) -> CheckpointOptions {
    CheckpointOptions {
        max_commits_since_checkpoint: max,
        log_retention,
        force,
        log_cleanup: tablekeeper_delta::LogCleanup::Unrecorded,
        pins: Vec::new(),
    }
}

fn log_file(t: &TestTable, name: &str) -> bool {
    t.path().join("_delta_log").join(name).exists()
}

fn json(version: u64) -> String {
    format!("{version:020}.json")
}

fn checkpoint_file(version: u64) -> String {
    format!("{version:020}.checkpoint.parquet")
}

#[tokio::test]
async fn a_checkpoint_is_written_once_enough_commits_piled_up() {
    let t = create_table(false, &[]).await;
    for i in 0..3 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-07-01")).await;
    }
    let version = t.version().await;
    let history = t.rows_by_version().await;

    let below = checkpoint(
        &t.uri,
        &options(10, MONTH, false),
        &CancellationToken::new(),
    )
    .await
    .expect("below threshold");
    assert!(below.skipped.is_some(), "{below:?}");
    assert_eq!(below.checkpoint_version, None);
    assert!(!log_file(&t, &checkpoint_file(version)));

    let report = checkpoint(&t.uri, &options(4, MONTH, false), &CancellationToken::new())
        .await
        .expect("checkpoint");
    assert_eq!(report.checkpoint_version, Some(version as i64));
    assert!(report.skipped.is_none());
    assert!(log_file(&t, &checkpoint_file(version)));
    assert!(log_file(&t, "_last_checkpoint"));
    assert_eq!(
        report.log_files_deleted,
        Some(0),
        "a month of log retention keeps everything"
    );
    for (v, expected) in history {
        assert_eq!(t.rows_at(v).await, expected, "time travel to {v}");
    }

    let again = checkpoint(&t.uri, &options(1, MONTH, true), &CancellationToken::new())
        .await
        .expect("nothing new");
    assert!(
        again.skipped.is_some(),
        "no commit since the checkpoint: {again:?}"
    );
}

#[tokio::test]
async fn force_writes_below_the_threshold() {
    let t = create_table(true, &[]).await;
    t.append(&rows(0..10, "2024-07-01")).await;
    let version = t.version().await;
    let report = checkpoint(
        &t.uri,
        &options(100, MONTH, true),
        &CancellationToken::new(),
    )
    .await
    .expect("forced");
    assert_eq!(report.checkpoint_version, Some(version as i64));
    assert!(log_file(&t, &checkpoint_file(version)));
}

#[tokio::test]
async fn expired_logs_are_cleaned_up_to_the_checkpoint_and_the_table_still_reads() {
    let t = create_table(false, &[]).await;
    for i in 0..4 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-07-01")).await;
    }
    let version = t.version().await;
    let rows_before = t.rows().await;
    let report = checkpoint(
        &t.uri,
        &options(1, Duration::ZERO, false),
        &CancellationToken::new(),
    )
    .await
    .expect("checkpoint and cleanup");
    assert_eq!(report.retention_used_secs, Some(0));
    assert_eq!(report.log_files_deleted, Some(version));
    for v in 0..version {
        assert!(!log_file(&t, &json(v)), "commit {v} should be gone");
    }
    assert!(log_file(&t, &json(version)));
    assert_eq!(
        t.rows().await,
        rows_before,
        "the canary's fresh load, repeated here"
    );
}

#[tokio::test]
async fn the_longer_table_log_retention_wins_and_disabled_cleanup_is_respected() {
    for (properties, expect_drift) in [
        (
            vec![("delta.logRetentionDuration", "interval 30 days")],
            true,
        ),
        (vec![("delta.enableExpiredLogCleanup", "false")], false),
    ] {
        let t = create_table(false, &properties).await;
        for i in 0..3 {
            t.append(&rows(i * 10..i * 10 + 10, "2024-07-01")).await;
        }
        let report = checkpoint(
            &t.uri,
            &options(1, Duration::ZERO, false),
            &CancellationToken::new(),
        )
        .await
        .expect("checkpoint");
        assert!(log_file(&t, &json(0)), "history kept for {properties:?}");
        assert_eq!(report.retention_drift.is_some(), expect_drift, "{report:?}");
        assert_eq!(report.log_files_deleted.unwrap_or(0), 0);
    }
}

/// Log cleanup on Databricks' v2-checkpoint table (identity columns, checkpoints every two
/// commits, the newest one's actions in a sidecar), after a tablekeeper compaction, with
/// version 8 pinned: every version from the pin on still loads through both readers with the
/// same rows, and no sidecar is deleted, so the checkpoint that keeps version 8 loadable keeps
/// the sidecar it names.
#[tokio::test]
async fn log_cleanup_on_a_v2_checkpoint_table_keeps_the_sidecars_its_checkpoints_name() {
    let dir = crate::aged::reference_table("checkpoint-v2-table");
    let uri = dir.path().to_str().unwrap().to_owned();
    let sidecars = |dir: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir.join("_delta_log/_sidecars"))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort();
        names
    };
    let sidecars_before = sidecars(dir.path());
    assert!(!sidecars_before.is_empty());
    let compacted = tablekeeper_delta::optimize(
        &uri,
        tablekeeper_delta::Optimize::Compact(&crate::common::compact_small_files()),
        &CancellationToken::new(),
    )
    .await
    .expect("compaction of an identity-column table");
    let latest = u64::try_from(compacted.version_after.expect("a compaction commit")).unwrap();
    let mut history = Vec::new();
    for version in 8..=latest {
        history.push((
            version,
            tablekeeper_delta::fixtures::read_rows_sorted(&uri, Some(version))
                .await
                .expect("deltalake reads"),
            tablekeeper_delta::fixtures::peers::python_rows(&uri, Some(version))
                .expect("python reads"),
        ));
    }
    let pinned = tablekeeper_delta::Pin {
        target: tablekeeper_delta::PinTarget::Version(8),
        until_ms: chrono::Utc::now().timestamp_millis() + 86_400_000,
        reason: "model run 7".into(),
        source: "inventory".into(),
    };
    let report = checkpoint(
        &uri,
        &CheckpointOptions {
            pins: vec![pinned],
            ..options(1, MONTH, true)
        },
        &CancellationToken::new(),
    )
    .await
    .expect("checkpoint and log cleanup");
    assert!(
        report.log_files_deleted.unwrap_or(0) > 0,
        "the expired commits before the pin go: {report:?}"
    );
    let log = dir.path().join("_delta_log");
    assert!(!log.join(json(0)).exists(), "{report:?}");
    assert_eq!(sidecars(dir.path()), sidecars_before, "no sidecar deleted");
    for (version, rust, python) in history {
        assert_eq!(
            tablekeeper_delta::fixtures::read_rows_sorted(&uri, Some(version))
                .await
                .unwrap_or_else(|e| panic!("version {version} loads: {e}")),
            rust,
            "version {version} (deltalake)"
        );
        assert_eq!(
            tablekeeper_delta::fixtures::peers::python_rows(&uri, Some(version))
                .unwrap_or_else(|e| panic!("version {version} loads in python: {e}")),
            python,
            "version {version} (python deltalake)"
        );
    }
}
