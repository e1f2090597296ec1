//! `role: worker`, as deployed: a worker replica and a planning replica on one Postgres. The
//! worker alone queues nothing, probes nothing, beats in no share of the tables and serves no
//! dashboard or API; once a replica that plans is up (its own workers polling rarely), the
//! jobs its schedule queues run on the worker, and the table reads the same through python
//! deltalake afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{count, wait_until};
use tablekeeper_tests::setup::{daemon_env, InventoryFile, TableEntry, TWENTY_APPENDS};
use tablekeeper_tests::{logs, stop_all, Daemon};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_replica_runs_the_queued_jobs_and_plans_nothing() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let uri = table.to_str().unwrap().to_owned();
    run_python(TWENTY_APPENDS, &[&uri]).unwrap();
    let rows = python_rows(&uri, None).unwrap();
    let inventory = InventoryFile::write(
        dir.path(),
        "",
        &[TableEntry {
            name: "t",
            path: &table,
            extra: "    maintenance:\n      compaction: { schedule: \"*/2 * * * * *\", min_small_files: 2 }\n",
        }],
    )
    .unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();

    let mut env = daemon_env(&db.url, &inventory.path, Duration::from_secs(10), 2);
    env.push(("TABLEKEEPER_ROLE", "worker".into()));
    let worker = Daemon::start("w1", dir.path(), &env).unwrap();
    worker.wait_ready(Duration::from_secs(60)).await.unwrap();
    // three schedule ticks' worth of time: a replica that plans would have queued a job
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        count(&pool, "SELECT count(*) FROM jobs").await,
        0,
        "{}",
        worker.log()
    );
    assert_eq!(count(&pool, "SELECT count(*) FROM table_probes").await, 0);
    assert_eq!(count(&pool, "SELECT count(*) FROM replicas").await, 0);
    for path in ["/", "/tables/t", "/api/v1/tables"] {
        let status = reqwest::get(format!("{}{path}", worker.base_url))
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 404, "{path} on a worker");
    }
    let metrics = worker.metrics().await.unwrap();
    // the inventory's facts (owner, thresholds) only: nothing a probe measures
    let measured: Vec<&str> = metrics
        .lines()
        .filter(|l| l.contains("table=\"t\""))
        .filter(|l| {
            [
                "tablekeeper_table_files",
                "tablekeeper_table_version",
                "tablekeeper_table_small_files",
            ]
            .iter()
            .any(|name| l.starts_with(&format!("{name}{{")))
        })
        .collect();
    assert!(
        measured.is_empty(),
        "a worker measures no table: {measured:#?}"
    );

    // a replica that plans, whose one worker claims once a minute: the worker runs the jobs
    let mut env = daemon_env(&db.url, &inventory.path, Duration::from_secs(10), 1);
    env.retain(|(k, _)| *k != "TABLEKEEPER_POLL_INTERVAL");
    env.push(("TABLEKEEPER_POLL_INTERVAL", "60s".into()));
    let planner = Daemon::start("p1", dir.path(), &env).unwrap();
    planner.wait_ready(Duration::from_secs(60)).await.unwrap();
    let mut daemons = [worker, planner];
    let ran = wait_until(
        Duration::from_secs(90),
        "the worker to run a compaction",
        || async {
            count(
                &pool,
                "SELECT count(*) FROM job_attempts a JOIN jobs j ON j.id = a.job_id \
             WHERE a.worker_id LIKE 'w1/%' AND a.outcome = 'succeeded' AND j.operation = 'compact'",
            )
            .await
                > 0
        },
    )
    .await;
    if let Err(e) = ran {
        panic!("{e}\n{}", logs(&daemons));
    }
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM replicas WHERE replica_id = 'w1'"
        )
        .await,
        0,
        "the worker takes no share of the probes"
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM table_probes WHERE replica_id = 'w1'"
        )
        .await,
        0
    );
    stop_all(&mut daemons, Duration::from_secs(30)).unwrap();
    assert_eq!(python_rows(&uri, None).unwrap(), rows);
}
