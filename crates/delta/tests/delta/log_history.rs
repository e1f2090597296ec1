//! History is never lost: no operation deletes a log file the retention keeps, log cleanup
//! proves every version inside the window still loads, a damaged log is refused untouched,
//! and a commit that landed is reported as landed even when others clean the log up.
//! Tables carry old timestamps, as real tables do (see `aged.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use tablekeeper_delta::{
    checkpoint, optimize, vacuum, CheckpointOptions, CompactOptions, DeltaError, LogCleanup,
    Optimize, VacuumMode, VacuumOptions, ZorderOptions, DEFAULT_STALE_WATCH,
};
use tokio_util::sync::CancellationToken;

use crate::aged::{backdate, log_contents, reference_table};
use crate::common::{create_table, rows, TestTable};

const TEN_YEARS: Duration = Duration::from_secs(3650 * 86_400);
const WEEK: Duration = Duration::from_secs(7 * 86_400);

fn checkpoint_options(log_retention: Duration, cleanup: LogCleanup) -> CheckpointOptions {
    CheckpointOptions {
        max_commits_since_checkpoint: 1,
        log_retention,
        force: true,
        log_cleanup: cleanup,
        pins: Vec::new(),
    }
}

async fn open_at(uri: &str, version: u64) -> Result<deltalake::DeltaTable, String> {
    let url = tablekeeper_delta::table_url(uri).map_err(|e| e.to_string())?;
    deltalake::DeltaTableBuilder::from_url(url)
        .map_err(|e| e.to_string())?
        .with_version(version)
        .load()
        .await
        .map_err(|e| e.to_string())
}

async fn latest_version(uri: &str) -> u64 {
    let url = tablekeeper_delta::table_url(uri).expect("url");
    deltalake::open_table(url)
        .await
        .expect("open")
        .version()
        .expect("version")
}

/// Every maintenance operation, with a ten-year log retention.
async fn maintain_everything(uri: &str, zorder_column: Option<&str>) {
    let cancel = CancellationToken::new();
    optimize(
        uri,
        Optimize::Compact(&CompactOptions {
            target_file_size: 1 << 30,
            min_small_files: 2,
            small_file_factor: 1.0,
            compression: Default::default(),
            dry_run: false,
            max_conflict_retries: 0,
        }),
        &cancel,
    )
    .await
    .expect("compaction");
    if let Some(column) = zorder_column {
        optimize(
            uri,
            Optimize::ZOrder(&ZorderOptions {
                columns: vec![column.to_owned()],
                target_file_size: 1 << 30,
                since_version: None,
                compression: Default::default(),
                dry_run: false,
                max_conflict_retries: 0,
            }),
            &cancel,
        )
        .await
        .expect("z-order");
    }
    vacuum(
        uri,
        &VacuumOptions {
            inventory_retention: WEEK,
            allow_short_retention: false,
            mode: VacuumMode::Full,
            dry_run: false,
            stale_watch: DEFAULT_STALE_WATCH,
            keep: Default::default(),
        },
        &cancel,
    )
    .await
    .expect("vacuum");
    checkpoint(
        uri,
        &checkpoint_options(TEN_YEARS, LogCleanup::Unrecorded),
        &cancel,
    )
    .await
    .expect("checkpoint");
}

fn names(log: &std::collections::BTreeMap<String, Vec<u8>>) -> BTreeSet<String> {
    log.keys().cloned().collect()
}

/// A table whose commits are 5 days apart, the newest 5 days ago: all but the last few are
/// older than Delta's default 30-day log retention, which deltalake's post-commit cleanup
/// applies on its own; the writers checkpoint every 4 commits, as clusters do.
async fn month_old_table() -> TestTable {
    let t = create_table(true, &[("delta.checkpointInterval", "4")]).await;
    for i in 0..12 {
        let date = if i % 2 == 0 {
            "2024-01-01"
        } else {
            "2024-01-02"
        };
        t.append(&rows(i * 10..i * 10 + 10, date)).await;
    }
    t.delete("id < 5").await;
    let latest = t.version().await;
    backdate(t.path(), |v| (latest - v) * 5 + 5);
    t
}

#[tokio::test]
async fn no_operation_deletes_a_log_file_a_long_retention_keeps() {
    let t = month_old_table().await;
    let before = log_contents(t.path());
    let latest_before = t.version().await;
    let rows_before = t.rows().await;
    let python_before =
        tablekeeper_delta::fixtures::peers::python_rows(&t.uri, None).expect("python");

    maintain_everything(&t.uri, Some("event_type")).await;

    let after = log_contents(t.path());
    let lost: Vec<String> = names(&before).difference(&names(&after)).cloned().collect();
    assert!(lost.is_empty(), "log files deleted: {lost:?}");
    let latest = t.version().await;
    assert!(latest > latest_before, "the operations committed");
    for v in 0..=latest {
        open_at(&t.uri, v)
            .await
            .unwrap_or_else(|e| panic!("version {v} no longer loads: {e}"));
    }
    // the rows of the version before maintenance and of the latest are the same, for both
    // readers (older versions' files are past the VACUUM window and gone by design)
    assert_eq!(t.rows_at(latest_before).await, rows_before);
    assert_eq!(t.rows().await, rows_before);
    assert_eq!(
        tablekeeper_delta::fixtures::peers::python_rows(&t.uri, None).expect("python"),
        python_before
    );
    assert_eq!(
        tablekeeper_delta::fixtures::peers::python_rows(&t.uri, Some(0))
            .expect("python reads version 0"),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn reference_tables_keep_their_whole_log_through_every_operation() {
    for name in [
        "simple_table",
        "simple_table_with_checkpoint",
        "delta-0.8.0-partitioned",
        "delta-2.2.0-partitioned-types",
    ] {
        let dir = reference_table(name);
        let uri = dir.path().to_str().expect("utf-8").to_owned();
        let before = log_contents(dir.path());
        let python_before = tablekeeper_delta::fixtures::peers::python_rows(&uri, None)
            .unwrap_or_else(|e| panic!("{name}: python reads it: {e}"));
        let rust_before = tablekeeper_delta::fixtures::read_rows_sorted(&uri, None)
            .await
            .unwrap_or_else(|e| panic!("{name}: deltalake reads it: {e}"));
        let first = latest_version(&uri).await;

        maintain_everything(&uri, None).await;

        let after = log_contents(dir.path());
        let lost: Vec<&String> = before.keys().filter(|k| !after.contains_key(*k)).collect();
        assert!(lost.is_empty(), "{name}: log files deleted: {lost:?}");
        let latest = latest_version(&uri).await;
        // every version that loaded before still loads
        for v in 0..=first {
            if open_at(&uri, v).await.is_ok() {
                continue;
            }
            let copy = reference_table(name);
            let copy_uri = copy.path().to_str().expect("utf-8").to_owned();
            assert!(
                open_at(&copy_uri, v).await.is_err(),
                "{name}: version {v} loaded before maintenance and does not after"
            );
        }
        for v in first..=latest {
            open_at(&uri, v)
                .await
                .unwrap_or_else(|e| panic!("{name}: version {v} does not load: {e}"));
        }
        assert_eq!(
            tablekeeper_delta::fixtures::read_rows_sorted(&uri, None)
                .await
                .expect("deltalake reads it"),
            rust_before,
            "{name}: rows (deltalake)"
        );
        assert_eq!(
            tablekeeper_delta::fixtures::peers::python_rows(&uri, None).expect("python"),
            python_before,
            "{name}: rows (python deltalake)"
        );
    }
}

#[tokio::test]
async fn a_short_log_retention_cleans_up_and_proves_the_window_loads() {
    let t = create_table(
        false,
        &[
            ("delta.checkpointInterval", "4"),
            ("delta.logRetentionDuration", "interval 1 day"),
        ],
    )
    .await;
    for i in 0..12 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-01")).await;
    }
    let latest = t.version().await;
    // the last three commits happened today, the others 3 days apart before that
    backdate(
        t.path(),
        |v| if v + 3 > latest { 0 } else { (latest - v) * 3 },
    );
    let in_window: Vec<(u64, Vec<crate::common::Row>)> = {
        let mut out = Vec::new();
        for v in latest - 3..=latest {
            out.push((v, t.rows_at(v).await));
        }
        out
    };

    // writers checkpointed at 3, 7 and 11 (every 4th commit); history is recorded for
    // versions 0..=4 only, so nothing newer may go
    let limited = checkpoint(
        &t.uri,
        &checkpoint_options(
            Duration::from_secs(86_400),
            LogCleanup::Recorded(Some((0, 4))),
        ),
        &CancellationToken::new(),
    )
    .await
    .expect("checkpoint with recorded history");
    assert_eq!(
        limited.log_files_deleted,
        Some(6),
        "commits 0..=4 and the checkpoint at 3: {limited:?}"
    );
    assert!(!t
        .path()
        .join("_delta_log/00000000000000000004.json")
        .exists());
    assert!(t
        .path()
        .join("_delta_log/00000000000000000005.json")
        .exists());

    let report = checkpoint(
        &t.uri,
        &checkpoint_options(Duration::from_secs(86_400), LogCleanup::Unrecorded),
        &CancellationToken::new(),
    )
    .await
    .expect("checkpoint");
    let deleted = report.log_files_deleted.expect("cleanup ran");
    assert!(deleted > 0, "{report:?}");
    // the checkpoint before the window (version 7) and everything after it remain
    assert!(t
        .path()
        .join("_delta_log/00000000000000000007.checkpoint.parquet")
        .exists());
    assert!(t
        .path()
        .join("_delta_log/00000000000000000007.json")
        .exists());
    assert!(!t
        .path()
        .join("_delta_log/00000000000000000006.json")
        .exists());
    for (v, expected) in in_window {
        assert_eq!(
            t.rows_at(v).await,
            expected,
            "version {v} inside the window"
        );
    }
    for v in 7..=latest {
        open_at(&t.uri, v)
            .await
            .unwrap_or_else(|e| panic!("version {v} does not load: {e}"));
    }
    assert!(
        open_at(&t.uri, 3).await.is_err(),
        "version 3 was past the retention"
    );
}

/// A table with commits 0..=12 and a checkpoint at 9 (deltalake checkpoints the commit after
/// which the version count is a multiple of the interval), all old enough to clean up.
async fn checkpointed_table() -> TestTable {
    let t = create_table(false, &[("delta.checkpointInterval", "10")]).await;
    for i in 0..12 {
        t.append(&rows(i * 10..i * 10 + 10, "2024-01-01")).await;
    }
    let latest = t.version().await;
    backdate(t.path(), |v| (latest - v) + 40);
    assert!(t
        .path()
        .join("_delta_log/00000000000000000009.checkpoint.parquet")
        .exists());
    t
}

async fn assert_refused_untouched(t: &TestTable, gap: &str) {
    let before = log_contents(t.path());
    let err = checkpoint(
        &t.uri,
        &checkpoint_options(WEEK, LogCleanup::Unrecorded),
        &CancellationToken::new(),
    )
    .await
    .expect_err("a damaged log is refused");
    assert!(matches!(err, DeltaError::DamagedLog { .. }), "{err}");
    assert!(err.to_string().contains(gap), "`{gap}` not named in: {err}");
    assert_eq!(log_contents(t.path()), before, "the log directory changed");
}

#[tokio::test]
async fn a_commit_missing_in_the_middle_is_refused() {
    let t = checkpointed_table().await;
    std::fs::remove_file(t.path().join("_delta_log/00000000000000000005.json")).expect("rm");
    assert_refused_untouched(&t, "versions 5..=8 do not load").await;
}

#[tokio::test]
async fn a_last_checkpoint_pointing_at_nothing_is_refused() {
    let t = checkpointed_table().await;
    std::fs::write(
        t.path().join("_delta_log/_last_checkpoint"),
        r#"{"version":7,"size":12}"#,
    )
    .expect("write");
    assert_refused_untouched(&t, "_last_checkpoint points at version 7").await;
}

#[tokio::test]
async fn a_missing_checkpoint_part_is_refused() {
    let t = checkpointed_table().await;
    let log = t.path().join("_delta_log");
    std::fs::rename(
        log.join("00000000000000000009.checkpoint.parquet"),
        log.join("00000000000000000009.checkpoint.0000000001.0000000002.parquet"),
    )
    .expect("rename");
    assert_refused_untouched(&t, "checkpoint 9 is missing part(s) [2] of 2").await;
}

#[tokio::test]
async fn a_compaction_whose_log_another_process_cleans_up_reports_success() {
    // Two partitions: the compaction commits one bin after the other. Meanwhile another
    // process cleans up the log as soon as the first bin landed, deleting every commit up to
    // the version the compaction started from (a checkpoint there keeps the table loadable).
    let t = create_table(true, &[]).await;
    for i in 0..6 {
        let date = if i % 2 == 0 {
            "2024-01-01"
        } else {
            "2024-01-02"
        };
        t.append(&rows(i * 10..i * 10 + 10, date)).await;
    }
    checkpoint(
        &t.uri,
        &checkpoint_options(TEN_YEARS, LogCleanup::Off),
        &CancellationToken::new(),
    )
    .await
    .expect("checkpoint");
    let base = t.version().await;
    let log = t.path().join("_delta_log");
    let cleaner = {
        let log = log.clone();
        std::thread::spawn(move || {
            let first_bin = log.join(format!("{:020}.json", base + 1));
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !first_bin.exists() {
                if std::time::Instant::now() > deadline {
                    return 0;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            (0..=base)
                .filter(|v| std::fs::remove_file(log.join(format!("{v:020}.json"))).is_ok())
                .count()
        })
    };
    let rows_before = t.rows().await;
    let report = optimize(
        &t.uri,
        Optimize::Compact(&CompactOptions {
            target_file_size: 1 << 30,
            min_small_files: 2,
            small_file_factor: 1.0,
            compression: Default::default(),
            dry_run: false,
            max_conflict_retries: 0,
        }),
        &CancellationToken::new(),
    )
    .await
    .expect("the compaction that landed is reported as a success");
    let cleaned = cleaner.join().expect("cleaner");
    assert_eq!(
        cleaned as u64,
        base + 1,
        "the other process cleaned the log up"
    );
    assert!(!log.join(format!("{base:020}.json")).exists());
    assert_eq!(report.commits.len(), 2, "one commit per bin: {report:?}");
    assert!(
        report.warnings.is_empty(),
        "the guard gave its verdict: {report:?}"
    );
    assert_eq!(t.rows().await, rows_before);
}
