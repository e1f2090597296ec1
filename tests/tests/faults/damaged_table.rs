//! A table whose log references a data file that was deleted by hand: the daemon reports
//! it (`tablekeeper_table_probe_failures_total`, the API's health, the dashboard), runs no
//! maintenance on it and refuses manual triggers, while the healthy table next to it is
//! maintained. Once the file is back the table is maintained again, rows intact.

use std::time::Duration;

use tablekeeper_delta::fixtures::SmallFiles;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{count, wait_until};
use tablekeeper_tests::setup::{
    active_paths, daemon_env, rows, serial, small_file_table, InventoryFile, TableEntry, TOKEN,
};
use tablekeeper_tests::{metric_value, Daemon};

const DEFAULTS: &str =
    "  compaction: { schedule: \"* * * * * *\", target_file_size: 64MiB, min_small_files: 2 }
  zorder: { enabled: false }
  vacuum: { enabled: false }
  checkpoint: { schedule: \"* * * * * *\", max_commits_since_checkpoint: 1 }
  max_attempts: 3
  timeout: 2m
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_a_missing_data_file_is_reported_and_left_alone() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = SmallFiles {
        partitions: 2,
        files_per_partition: 5,
        rows_per_file: 100,
        payload_bytes: 16,
    };
    let healthy = dir.path().join("healthy");
    let damaged = dir.path().join("damaged");
    small_file_table(&healthy, &spec).await.unwrap();
    let before = small_file_table(&damaged, &spec).await.unwrap();
    let victim = active_paths(&damaged)
        .await
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let victim_path = damaged.join(&victim);
    let saved = std::fs::read(&victim_path).unwrap();
    std::fs::remove_file(&victim_path).unwrap();
    let log_files = std::fs::read_dir(damaged.join("_delta_log"))
        .unwrap()
        .count();

    let inv = InventoryFile::write(
        dir.path(),
        DEFAULTS,
        &[
            TableEntry {
                name: "faults.healthy",
                path: &healthy,
                extra: "",
            },
            TableEntry {
                name: "faults.damaged",
                path: &damaged,
                extra: "",
            },
        ],
    )
    .unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let daemon = Daemon::start(
        "r1",
        dir.path(),
        &daemon_env(&db.url, &inv.path, Duration::from_secs(10), 2),
    )
    .unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();

    // The healthy table is maintained; the damaged one is counted as unreadable.
    wait_until(Duration::from_secs(60), "the healthy table's compaction and the damage report", || async {
        let m = daemon.metrics().await.unwrap();
        let failures = metric_value(&m, "tablekeeper_table_probe_failures_total", "kind=\"unreadable\",table=\"faults.damaged\"")
            .unwrap_or(0.0);
        failures >= 3.0
            && count(&pool, "SELECT count(*) FROM jobs WHERE table_name = 'faults.healthy' AND operation = 'compact' AND state = 'succeeded'").await >= 1
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));
    let m = daemon.metrics().await.unwrap();
    assert_eq!(
        metric_value(
            &m,
            "tablekeeper_table_probe_failures_total",
            "kind=\"unreadable\",table=\"faults.healthy\""
        )
        .unwrap_or(0.0),
        0.0
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM jobs WHERE table_name = 'faults.damaged'"
        )
        .await,
        0,
        "maintenance was scheduled on a damaged table"
    );
    let view: serde_json::Value = daemon.table_view("faults.damaged").await.unwrap();
    assert_eq!(view["health"], "unreadable", "{view}");
    let error = view["probe_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("missing") && error.contains(&victim),
        "{view}"
    );
    let page = reqwest::get(format!("{}/", daemon.base_url))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("faults.damaged") && page.contains("unreadable"),
        "dashboard does not show the damage"
    );
    assert!(
        page.contains(&victim),
        "dashboard does not name the missing file"
    );
    let refused = reqwest::Client::new()
        .post(format!(
            "{}/api/v1/tables/faults.damaged/jobs",
            daemon.base_url
        ))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"operation": "compact"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status().as_u16(),
        409,
        "a manual trigger on a damaged table"
    );
    assert_eq!(
        std::fs::read_dir(damaged.join("_delta_log"))
            .unwrap()
            .count(),
        log_files,
        "the damaged table's log changed"
    );

    // Repaired: maintained again, rows intact.
    std::fs::write(&victim_path, saved).unwrap();
    wait_until(Duration::from_secs(60), "the repaired table to be compacted", || async {
        count(&pool, "SELECT count(*) FROM jobs WHERE table_name = 'faults.damaged' AND operation = 'compact' AND state = 'succeeded'").await >= 1
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));
    assert_eq!(rows(&damaged).await.unwrap(), before);
    pool.close().await;
    drop(daemon);
    db.drop_db().await.unwrap();
}
