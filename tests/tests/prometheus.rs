//! The shipped alert rules, evaluated by a real Prometheus scraping two real replicas on one
//! Postgres, as a platform team deploys them (`for:` durations shortened to a second).
//!
//! A table whose Z-order fails has its attempts run on both replicas; the failure streak
//! comes from the job table, so both replicas export the same count and
//! `TablekeeperMaintenanceFailing` fires with the table's owner. It keeps firing while a
//! replica restarts, clears after a success on either replica, and no alert about a healthy
//! table fires at any point.
//!
//! The average-file-size warning pages the owner of a table of many small files, and never
//! the owners of tables compaction could not improve: a table of small partitions already
//! compacted, a small dimension table.
//!
//! Needs Prometheus ([`tablekeeper_tests::prometheus`]).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tablekeeper_delta::fixtures::{self, SmallFiles};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{count, wait_until};
use tablekeeper_tests::prometheus::Prometheus;
use tablekeeper_tests::setup::trigger_with_token;
use tablekeeper_tests::Daemon;

const TOKEN: &str = "prometheus-test-token";

fn is_failing_alert(alerts: &[(String, Value)]) -> bool {
    alerts.iter().any(|(name, labels)| {
        name == "TablekeeperMaintenanceFailing"
            && labels["table"] == "p.failing"
            && labels["operation"] == "zorder"
            && labels["owner"] == "team-failing"
    })
}

fn assert_healthy_table_quiet(alerts: &[(String, Value)]) {
    let about_healthy: Vec<&(String, Value)> = alerts
        .iter()
        .filter(|(_, labels)| labels["table"] == "p.healthy")
        .collect();
    assert!(
        about_healthy.is_empty(),
        "alerts about a healthy table: {about_healthy:?}"
    );
}

fn inventory(dir: &Path, zorder_column: &str) {
    let tables = dir.join("tables");
    std::fs::write(
        dir.join("inventory.yaml"),
        format!(
            "defaults:\n  compaction: {{ schedule: \"0 0 1 1 *\" }}\n  zorder: {{ schedule: \"0 0 1 1 *\" }}\n  vacuum: {{ schedule: \"0 0 1 1 *\" }}\n  checkpoint: {{ schedule: \"0 0 1 1 *\" }}\n  max_attempts: 1\ntables:\n  - name: p.failing\n    path: \"{}\"\n    owner: team-failing\n    layout: {{ zorder: [{zorder_column}] }}\n  - name: p.healthy\n    path: \"{}\"\n    owner: team-healthy\n    layout: {{ min_average_file_size: 1 }}\n",
            tables.join("failing").display(),
            tables.join("healthy").display()
        ),
    )
    .unwrap();
}

/// Starts a replica; `listen` keeps the address of a replica it replaces (Prometheus
/// scrapes fixed targets).
fn start_replica(name: &str, dir: &Path, db: &str, listen: Option<&str>) -> Daemon {
    let mut env = vec![("TABLEKEEPER_DATABASE_URL", db.to_owned())];
    if let Some(address) = listen {
        env.push(("TABLEKEEPER_LISTEN", address.to_owned()));
    }
    let mut daemon = Daemon::start(
        name,
        dir,
        &[
            env,
            vec![
                (
                    "TABLEKEEPER_INVENTORY",
                    dir.join("inventory.yaml").display().to_string(),
                ),
                ("TABLEKEEPER_PROBE_INTERVAL", "1s".into()),
                ("TABLEKEEPER_MAX_PROBE_INTERVAL", "4s".into()),
                ("TABLEKEEPER_POLL_INTERVAL", "100ms".into()),
                ("TABLEKEEPER_ADMIN_TOKEN", TOKEN.into()),
            ],
        ]
        .concat(),
    )
    .unwrap();
    if let Some(address) = listen {
        daemon.base_url = format!("http://{address}");
    }
    daemon
}

/// The consecutive failures of Z-order on `p.failing` as a replica's API reports them.
async fn streak_on(daemon: &Daemon) -> i64 {
    let view: Value = daemon.table_view("p.failing").await.unwrap();
    view["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation"] == "zorder")
        .unwrap()["consecutive_failures"]
        .as_i64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_rules_page_the_owner_across_two_replicas_and_clear_on_success() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    for name in ["failing", "healthy"] {
        let uri = dir.path().join("tables").join(name);
        // twelve tiny files: more than `min_small_files` (10), so compaction could merge them
        fixtures::write_small_files(
            uri.to_str().unwrap(),
            &SmallFiles {
                partitions: 0,
                files_per_partition: 12,
                rows_per_file: 10,
                payload_bytes: 8,
            },
        )
        .await
        .unwrap();
    }
    // Z-order on a column the table does not have: every attempt fails, for good
    inventory(dir.path(), "no_such_column");
    let mut r1 = start_replica("r1", dir.path(), &db.url, None);
    let r2 = start_replica("r2", dir.path(), &db.url, None);
    r1.wait_ready(Duration::from_secs(60)).await.unwrap();
    r2.wait_ready(Duration::from_secs(60)).await.unwrap();
    let targets = [
        r1.base_url.trim_start_matches("http://").to_owned(),
        r2.base_url.trim_start_matches("http://").to_owned(),
    ];
    let prometheus = Prometheus::start(dir.path(), &[&targets[0], &targets[1]]).unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();

    // failed attempts until there are at least three and both replicas ran some
    for round in 0..30 {
        let replica = if round % 2 == 0 { &r1 } else { &r2 };
        let job = trigger_with_token(&replica.base_url, TOKEN, "p.failing", "zorder")
            .await
            .unwrap();
        wait_until(Duration::from_secs(30), "the attempt to fail", || async {
            count(
                &pool,
                &format!("SELECT count(*) FROM jobs WHERE id = {job} AND state = 'failed'"),
            )
            .await
                == 1
        })
        .await
        .unwrap();
        let on = count(
            &pool,
            "SELECT count(DISTINCT split_part(worker_id, '/', 1)) FROM job_attempts WHERE outcome = 'failed'",
        )
        .await;
        let failed = count(
            &pool,
            "SELECT count(*) FROM job_attempts WHERE outcome = 'failed'",
        )
        .await;
        if on == 2 && failed >= 3 {
            break;
        }
    }
    let failed = count(
        &pool,
        "SELECT count(*) FROM job_attempts WHERE outcome = 'failed'",
    )
    .await;
    assert_eq!(
        count(
            &pool,
            "SELECT count(DISTINCT split_part(worker_id, '/', 1)) FROM job_attempts WHERE outcome = 'failed'"
        )
        .await,
        2,
        "the failed attempts all ran on one replica"
    );
    // both replicas report the same streak: the job table's
    wait_until(
        Duration::from_secs(30),
        "both replicas to agree",
        || async { streak_on(&r1).await == failed && streak_on(&r2).await == failed },
    )
    .await
    .unwrap();
    wait_until(Duration::from_secs(60), "the failure alert", || async {
        is_failing_alert(&prometheus.firing().await)
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}; prometheus log:\n{}",
            std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
        )
    });
    assert_healthy_table_quiet(&prometheus.firing().await);
    // p.failing's files are a few KiB, far under the default threshold (a quarter of the
    // 512 MiB target); p.healthy declares a threshold its files meet
    wait_until(
        Duration::from_secs(60),
        "the average file size warning",
        || {
            prometheus.fires(
                "TablekeeperAverageFileSizeLow",
                &[("table", "p.failing"), ("owner", "team-failing")],
            )
        },
    )
    .await
    .unwrap();

    // a restart of one replica neither clears the alert nor resets its count
    r1.signal("TERM").unwrap();
    assert_eq!(r1.wait_exit(Duration::from_secs(60)).unwrap(), Some(0));
    let r1 = start_replica("r1-restarted", dir.path(), &db.url, Some(&targets[0]));
    r1.wait_ready(Duration::from_secs(60)).await.unwrap();
    assert_eq!(
        streak_on(&r1).await,
        failed,
        "the restarted replica forgot the streak"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        is_failing_alert(&prometheus.firing().await),
        "the alert cleared while a replica restarted"
    );

    // fix the inventory on both replicas; one success on either ends the streak
    inventory(dir.path(), "user_id");
    r2.signal("HUP").unwrap();
    r1.signal("HUP").unwrap();
    wait_until(Duration::from_secs(30), "the reload", || async {
        r1.log().contains("inventory reloaded") && r2.log().contains("inventory reloaded")
    })
    .await
    .unwrap();
    let job = trigger_with_token(&r2.base_url, TOKEN, "p.failing", "zorder")
        .await
        .unwrap();
    wait_until(
        Duration::from_secs(60),
        "the Z-order to succeed",
        || async {
            count(
                &pool,
                &format!("SELECT count(*) FROM jobs WHERE id = {job} AND state = 'succeeded'"),
            )
            .await
                == 1
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; r2 log:\n{}", r2.log()));
    wait_until(Duration::from_secs(60), "the alert to clear", || async {
        let alerts = prometheus.firing().await;
        assert_healthy_table_quiet(&alerts);
        !is_failing_alert(&alerts)
    })
    .await
    .unwrap();
    assert_eq!(streak_on(&r1).await, 0);
    assert_eq!(streak_on(&r2).await, 0);
    pool.close().await;
    drop((r1, r2, prometheus));
    db.drop_db().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_average_file_size_warning_pages_only_where_compaction_could_help() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tables = dir.path().join("tables");
    let write = |name: &str, partitions: u32, files: u32| {
        let uri = tables.join(name).display().to_string();
        async move {
            fixtures::write_small_files(
                &uri,
                &SmallFiles {
                    partitions,
                    files_per_partition: files,
                    rows_per_file: 10,
                    payload_bytes: 8,
                },
            )
            .await
            .unwrap();
        }
    };
    // daily partitions compaction already merged: one small file each
    write("daily", 6, 1).await;
    // a dimension table of three small files
    write("dimension", 0, 3).await;
    // thirty small files in one partition: compaction would merge them
    write("many", 0, 30).await;
    let entries: String = ["daily", "dimension", "many"]
        .iter()
        .map(|name| {
            format!(
                "  - name: p.{name}\n    path: \"{}\"\n    owner: team-{name}\n",
                tables.join(name).display()
            )
        })
        .collect();
    std::fs::write(
        dir.path().join("inventory.yaml"),
        format!(
            "defaults:\n  compaction: {{ schedule: \"0 0 1 1 *\" }}\n  vacuum: {{ schedule: \"0 0 1 1 *\" }}\n  checkpoint: {{ schedule: \"0 0 1 1 *\" }}\ntables:\n{entries}"
        ),
    )
    .unwrap();
    let replica = start_replica("r1", dir.path(), &db.url, None);
    replica.wait_ready(Duration::from_secs(60)).await.unwrap();
    let target = replica.base_url.trim_start_matches("http://").to_owned();
    let prometheus = Prometheus::start(dir.path(), &[&target]).unwrap();

    wait_until(
        Duration::from_secs(90),
        "the warning for the table of many small files",
        || {
            prometheus.fires(
                "TablekeeperAverageFileSizeLow",
                &[("table", "p.many"), ("owner", "team-many")],
            )
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", replica.log()));
    // every table's average has been under its threshold as long as p.many's: a rule that
    // fired on averages alone would fire for all three by now; look a few scrapes more
    for _ in 0..5 {
        let firing = prometheus.firing().await;
        let others: Vec<&(String, Value)> = firing
            .iter()
            .filter(|(name, labels)| {
                name == "TablekeeperAverageFileSizeLow" && labels["table"] != "p.many"
            })
            .collect();
        assert!(others.is_empty(), "paged for nothing: {others:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let metrics = replica.metrics().await.unwrap();
    for quiet in ["p.daily", "p.dimension"] {
        assert!(
            !metrics.contains(&format!(
                "tablekeeper_table_average_file_size_low{{table=\"{quiet}\"}}"
            )),
            "{quiet} exports the series:\n{metrics}"
        );
    }
}
