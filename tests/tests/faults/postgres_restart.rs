//! Postgres stopped and started again under load (a cluster of the test's own, so the
//! shared server is never touched): replicas stay up, `/readyz` answers 503 while the
//! database is gone and 200 after, jobs in flight finish or are retried, no job is lost,
//! no attempts overlap on a key, rows are unchanged.

use std::time::Duration;

use tablekeeper_tests::cluster::TempCluster;
use tablekeeper_tests::jobs::{assert_no_overlap, assert_settled, count, wait_until};
use tablekeeper_tests::setup::{daemon_env, serial, InventoryFile, TableEntry};
use tablekeeper_tests::writer::ModelWriter;
use tablekeeper_tests::{logs, stop_all, Daemon};

const DEFAULTS: &str =
    "  compaction: { schedule: \"*/2 * * * * *\", target_file_size: 64MiB, min_small_files: 2 }
  zorder: { enabled: false }
  vacuum: { enabled: false }
  checkpoint: { schedule: \"*/3 * * * * *\", max_commits_since_checkpoint: 1 }
  max_attempts: 5
  timeout: 2m
";

async fn ready_status(d: &Daemon) -> Option<u16> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .ok()?;
    let r = client
        .get(format!("{}/readyz", d.base_url))
        .send()
        .await
        .ok()?;
    Some(r.status().as_u16())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_ride_out_a_postgres_restart() {
    let _serial = serial().await;
    let cluster = TempCluster::start().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let names = ["faults.r0", "faults.r1", "faults.r2", "faults.r3"];
    let mut writers = Vec::new();
    for (i, name) in names.iter().enumerate() {
        writers.push(
            ModelWriter::create(&dir.path().join(name), i % 2 == 0, 2, 200)
                .await
                .unwrap(),
        );
    }
    // Small files keep arriving, so compactions keep running through the outage.
    let stop_feeding = tokio_util::sync::CancellationToken::new();
    let feeder = {
        let stop = stop_feeding.clone();
        tokio::spawn(async move {
            let mut round = 0usize;
            while !stop.is_cancelled() {
                let n = writers.len();
                writers[round % n].append(50).await.unwrap();
                round += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            writers
        })
    };
    let paths: Vec<_> = names.iter().map(|n| dir.path().join(n)).collect();
    let entries = TableEntry::plain(&names, &paths);
    let inv = InventoryFile::write(dir.path(), DEFAULTS, &entries).unwrap();
    let lease = Duration::from_secs(4);
    let env = daemon_env(&cluster.url, &inv.path, lease, 2);
    let mut replicas = vec![
        Daemon::start("a", dir.path(), &env).unwrap(),
        Daemon::start("b", dir.path(), &env).unwrap(),
    ];
    for r in &replicas {
        r.wait_ready(Duration::from_secs(60)).await.unwrap();
    }
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&cluster.url)
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(60),
        "jobs to succeed before the restart",
        || async { count(&pool, "SELECT count(*) FROM jobs WHERE state = 'succeeded'").await >= 6 },
    )
    .await
    .unwrap();
    pool.close().await;

    // Stop the server: both replicas must say they are not ready, and stay up.
    cluster.stop().unwrap();
    for r in &replicas {
        wait_until(Duration::from_secs(15), "/readyz to answer 503", || async {
            ready_status(r).await == Some(503)
        })
        .await
        .unwrap_or_else(|e| panic!("{}: {e}; log:\n{}", r.name, r.log()));
    }
    tokio::time::sleep(lease).await;
    for r in &mut replicas {
        assert!(
            r.wait_exit(Duration::from_millis(10)).is_err(),
            "{} exited while the database was down; log:\n{}",
            r.name,
            r.log()
        );
    }
    cluster.restart_after_stop().unwrap();
    for r in &replicas {
        wait_until(
            Duration::from_secs(60),
            "/readyz to answer 200 again",
            || async { ready_status(r).await == Some(200) },
        )
        .await
        .unwrap_or_else(|e| panic!("{}: {e}; log:\n{}", r.name, r.log()));
    }

    // Work goes on: every job that was in flight ends (succeeded, or retried and
    // succeeded), and new jobs succeed after the restart.
    let pool = sqlx::PgPool::connect(&cluster.url).await.unwrap();
    let restarted_at: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&pool)
        .await
        .unwrap();
    wait_until(Duration::from_secs(90), "new successes and no stranded job", || async {
        let after: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM jobs WHERE state = 'succeeded' AND finished_at > $1",
        )
        .bind(restarted_at)
        .fetch_one(&pool)
        .await
        .unwrap();
        // running jobs whose lease ran out are what a lost job looks like
        let stranded = count(
            &pool,
            "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_expires_at < now() - interval '1 second'",
        )
        .await;
        after >= 6 && stranded == 0
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; logs:\n{}", logs(&replicas)));

    stop_all(&mut replicas, Duration::from_secs(40)).unwrap();
    // A replica whose drain ran out of time (a slow rewrite on a loaded machine) releases its
    // job, and if even the release does not finish it exits with the job still `running`
    // under a lease nobody renews: another replica takes it over once the lease expires.
    // With every replica stopped that one is missing, so start it and let it.
    let left: Vec<(i64, String, String)> = sqlx::query_as(
        "SELECT id, table_name, coalesce(worker_id, '') FROM jobs WHERE state = 'running'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    if !left.is_empty() {
        let shutdown_lines: Vec<String> = logs(&replicas)
            .lines()
            .filter(|l| l.contains("shut") || l.contains("releas") || l.contains("grace"))
            .map(str::to_owned)
            .collect();
        eprintln!(
            "jobs left running at shutdown, taken over by a new replica: {left:?}; shutdown log:\n{}",
            shutdown_lines.join("\n")
        );
        let mut late = vec![Daemon::start("c", dir.path(), &env).unwrap()];
        wait_until(
            Duration::from_secs(60),
            "the left jobs to be taken over and end",
            || async {
                count(&pool, "SELECT count(*) FROM jobs WHERE state = 'running'").await == 0
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}; logs:\n{}\n{}", logs(&replicas), logs(&late)));
        stop_all(&mut late, Duration::from_secs(40)).unwrap();
    }
    assert_settled(&pool)
        .await
        .unwrap_or_else(|e| panic!("{e}; logs:\n{}", logs(&replicas)));
    assert_no_overlap(&pool).await.unwrap();
    stop_feeding.cancel();
    for w in feeder.await.unwrap() {
        w.check().await.unwrap();
    }
    pool.close().await;
}
