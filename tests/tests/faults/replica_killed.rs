//! `kill -9` of the replica running a compaction: the lease expires, another replica
//! re-runs the job, rows are identical, the abandoned attempt is `lost_lease`, and the
//! Parquet files the dead compaction had written are reclaimed by a later full VACUUM.
//! Compaction commits one bin at a time, so the bins the dead replica had committed stay
//! (each a consistent version) and the takeover compacts the rest.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use sqlx::Row;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{assert_no_overlap, wait_until};
use tablekeeper_tests::setup::{
    daemon_env, parquet_on_disk, rows, serial, sizeable_table, trigger, InventoryFile, TableEntry,
};
use tablekeeper_tests::{metric_value, Daemon};

/// Only manual triggers run: every schedule is yearly.
const DEFAULTS: &str =
    "  compaction: { schedule: \"0 0 1 1 *\", target_file_size: 256MiB, min_small_files: 2 }
  zorder: { enabled: false }
  vacuum: { schedule: \"0 0 1 1 *\", full_every: 1 }
  checkpoint: { enabled: false }
  max_attempts: 3
  timeout: 5m
";

const RETENTION: &str =
    "    retention:\n      deleted_file_retention: 0s\n      allow_short_retention: true\n";

async fn job_state(pool: &sqlx::PgPool, id: i64) -> (String, Option<String>) {
    let row = sqlx::query("SELECT state, worker_id FROM jobs WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap();
    (row.get("state"), row.get("worker_id"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_compaction_is_taken_over_and_its_orphans_vacuumed() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("big");
    let before = sizeable_table(&table, 5_000).await.unwrap();
    let initial_files = parquet_on_disk(&table);
    let log_before = std::fs::read_dir(table.join("_delta_log")).unwrap().count();
    let inv = InventoryFile::write(
        dir.path(),
        DEFAULTS,
        &[TableEntry {
            name: "faults.big",
            path: &table,
            extra: RETENTION,
        }],
    )
    .unwrap();
    let lease = Duration::from_secs(3);
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();

    let r1 = Daemon::start("r1", dir.path(), &daemon_env(&db.url, &inv.path, lease, 1)).unwrap();
    r1.wait_ready(Duration::from_secs(60)).await.unwrap();
    let job = trigger(&r1.base_url, "faults.big", "compact")
        .await
        .unwrap();

    // Kill r1 the moment its compaction has written a first file, before it can finish.
    let deadline = Instant::now() + Duration::from_secs(120);
    let written = loop {
        let new: BTreeSet<String> = parquet_on_disk(&table)
            .difference(&initial_files)
            .cloned()
            .collect();
        if !new.is_empty() {
            r1.signal("KILL").unwrap();
            break new;
        }
        assert!(
            Instant::now() < deadline,
            "r1 never started writing; log:\n{}",
            r1.log()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // one commit per bin, six partitions: r1 must not have got through them all
    let bins_committed = std::fs::read_dir(table.join("_delta_log")).unwrap().count() - log_before;
    assert!(
        bins_committed < 6,
        "the compaction finished before the kill landed: the table is too small for this machine"
    );
    let active_at_kill = tablekeeper_tests::setup::active_paths(&table)
        .await
        .unwrap();
    let written_by_r1: BTreeSet<String> = parquet_on_disk(&table)
        .difference(&initial_files)
        .cloned()
        .collect();
    assert!(written_by_r1.is_superset(&written));
    // what r1 wrote and never committed: referenced by no version
    let orphans: BTreeSet<String> = written_by_r1.difference(&active_at_kill).cloned().collect();
    let (state, worker) = job_state(&pool, job).await;
    assert_eq!(state, "running");
    assert!(worker.unwrap_or_default().starts_with("r1/"));

    // r2 takes the job over once the lease (plus grace) has passed, and finishes it.
    let r2 = Daemon::start("r2", dir.path(), &daemon_env(&db.url, &inv.path, lease, 1)).unwrap();
    r2.wait_ready(Duration::from_secs(60)).await.unwrap();
    wait_until(
        Duration::from_secs(120),
        "r2 to finish the compaction",
        || async { job_state(&pool, job).await.0 == "succeeded" },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; r2 log:\n{}", r2.log()));
    let attempts: Vec<(i32, String, Option<String>)> = sqlx::query_as(
        "SELECT attempt, worker_id, outcome FROM job_attempts WHERE job_id = $1 ORDER BY attempt",
    )
    .bind(job)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert!(
        attempts[0].1.starts_with("r1/") && attempts[0].2.as_deref() == Some("lost_lease"),
        "{attempts:?}"
    );
    assert!(
        attempts[1].1.starts_with("r2/") && attempts[1].2.as_deref() == Some("succeeded"),
        "{attempts:?}"
    );
    let m = r2.metrics().await.unwrap();
    assert_eq!(
        metric_value(
            &m,
            "tablekeeper_jobs_total",
            "operation=\"compact\",outcome=\"lost_lease\",table=\"faults.big\""
        ),
        Some(1.0),
        "the takeover is counted on the reaping replica"
    );
    assert_eq!(rows(&table).await.unwrap(), before, "rows changed");

    // The dead attempt's files are referenced by no version, still on disk until a full VACUUM.
    let active = tablekeeper_tests::setup::active_paths(&table)
        .await
        .unwrap();
    assert!(orphans.is_disjoint(&active), "an orphan is referenced");
    assert!(parquet_on_disk(&table).is_superset(&orphans));
    let vacuum = trigger(&r2.base_url, "faults.big", "vacuum").await.unwrap();
    wait_until(Duration::from_secs(60), "the vacuum", || async {
        job_state(&pool, vacuum).await.0 == "succeeded"
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; r2 log:\n{}", r2.log()));
    let left = parquet_on_disk(&table);
    assert!(
        left.is_disjoint(&orphans),
        "orphans left after a full vacuum: {:?}",
        left.intersection(&orphans).collect::<Vec<_>>()
    );
    assert_eq!(left, active, "only the live files remain");
    assert_eq!(
        rows(&table).await.unwrap(),
        before,
        "rows changed by the vacuum"
    );
    assert_no_overlap(&pool).await.unwrap();
    pool.close().await;
    drop((r1, r2));
    db.drop_db().await.unwrap();
}
