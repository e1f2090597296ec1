//! End to end: two replicas of the real binary on one real Postgres, maintaining real
//! Delta tables on second-level schedules (two tables share a concurrency key).
//!
//! Asserts what operators rely on: jobs run on both replicas, no two attempts on one
//! concurrency key overlap, rows are unchanged, staleness falls after compaction, the
//! contract metrics carry correct values, auth on mutating routes, hot reload (a new
//! table gets scheduled; a broken inventory keeps the old one), and SIGTERM exits 0.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use tablekeeper_delta::fixtures::{self, SmallFiles};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{assert_no_overlap, wait_until};
use tablekeeper_tests::{metric_value, Daemon};

const TOKEN: &str = "e2e-secret-token";

struct Table {
    name: &'static str,
    key: Option<&'static str>,
    partitioned: bool,
}

const TABLES: &[Table] = &[
    Table {
        name: "e2e.alpha",
        key: Some("shared"),
        partitioned: true,
    },
    Table {
        name: "e2e.beta",
        key: Some("shared"),
        partitioned: false,
    },
    Table {
        name: "e2e.gamma",
        key: None,
        partitioned: true,
    },
    Table {
        name: "e2e.delta",
        key: None,
        partitioned: false,
    },
];

fn table_yaml(root: &Path, t: &Table) -> String {
    let mut s = format!(
        "  - name: {}\n    path: {}\n    owner: team-{}\n",
        t.name,
        root.join(t.name).display(),
        t.name.trim_start_matches("e2e.")
    );
    if let Some(k) = t.key {
        s.push_str(&format!("    concurrency_key: {k}\n"));
    }
    if t.partitioned {
        s.push_str("    layout:\n      partition_by: [day]\n");
    }
    s
}

fn inventory(root: &Path, tables: &[&Table]) -> String {
    let mut s = String::from(
        "defaults:\n  \
         compaction: { schedule: \"*/2 * * * * *\", target_file_size: 64MiB, min_small_files: 4 }\n  \
         checkpoint: { schedule: \"*/3 * * * * *\", max_commits_since_checkpoint: 3 }\n  \
         vacuum: { enabled: false }\n  \
         max_attempts: 3\n  \
         timeout: 2m\n\
         tables:\n",
    );
    for t in tables {
        s.push_str(&table_yaml(root, t));
    }
    s
}

async fn write_table(root: &Path, t: &Table) -> Vec<String> {
    let uri = root.join(t.name);
    let spec = SmallFiles {
        partitions: if t.partitioned { 2 } else { 0 },
        files_per_partition: 6,
        rows_per_file: 50,
        ..SmallFiles::default()
    };
    fixtures::write_small_files(&uri.to_string_lossy(), &spec)
        .await
        .unwrap();
    fixtures::read_rows_sorted(&uri.to_string_lossy(), None)
        .await
        .unwrap()
}

fn env(db: &str, inventory: &Path, token: Option<&str>) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("TABLEKEEPER_DATABASE_URL", db.to_string()),
        ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
        ("TABLEKEEPER_WORKERS", "2".to_string()),
        ("TABLEKEEPER_LEASE", "10s".to_string()),
        ("TABLEKEEPER_SHUTDOWN_GRACE", "20s".to_string()),
        ("TABLEKEEPER_POLL_INTERVAL", "200ms".to_string()),
        ("TABLEKEEPER_PROBE_INTERVAL", "1s".to_string()),
        ("TABLEKEEPER_MAX_PROBE_INTERVAL", "4s".to_string()),
    ];
    if let Some(t) = token {
        env.push(("TABLEKEEPER_ADMIN_TOKEN", t.to_string()));
    }
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_maintain_a_fleet_safely() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tables");
    // Unix time before any table exists: staleness counts from creation until a success,
    // so a success timestamp after this shows staleness restarted from the compaction.
    let t0 = chrono::Utc::now().timestamp() as f64;
    let mut before = BTreeMap::new();
    for t in TABLES {
        before.insert(t.name, write_table(&root, t).await);
    }
    let inv_dir = dir.path().join("inventory");
    std::fs::create_dir_all(&inv_dir).unwrap();
    let inv_file = inv_dir.join("tables.yaml");
    let initial: Vec<&Table> = TABLES.iter().take(3).collect();
    std::fs::write(&inv_file, inventory(&root, &initial)).unwrap();

    // r1 has the admin token; r2 has none (its mutating routes must answer 403).
    let mut r1 = Daemon::start("r1", dir.path(), &env(&db.url, &inv_dir, Some(TOKEN))).unwrap();
    let mut r2 = Daemon::start("r2", dir.path(), &env(&db.url, &inv_dir, None)).unwrap();
    r1.wait_ready(Duration::from_secs(60)).await.unwrap();
    r2.wait_ready(Duration::from_secs(60)).await.unwrap();

    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let client = reqwest::Client::new();

    // Auth on mutating routes.
    let url = format!("{}/api/v1/tables/e2e.alpha/jobs", r1.base_url);
    let unauth = client
        .post(&url)
        .json(&serde_json::json!({"operation": "checkpoint"}))
        .send()
        .await
        .unwrap();
    assert_eq!(unauth.status().as_u16(), 401);
    let wrong = client
        .post(&url)
        .bearer_auth("nope")
        .json(&serde_json::json!({"operation": "checkpoint"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status().as_u16(), 401);
    let no_token = client
        .post(format!("{}/api/v1/tables/e2e.alpha/jobs", r2.base_url))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"operation": "checkpoint"}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_token.status().as_u16(), 403);
    let bad_body = client
        .post(&url)
        .bearer_auth(TOKEN)
        .body("{not json")
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad_body.status().as_u16(), 400);
    let accepted = client
        .post(&url)
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"operation": "checkpoint"}))
        .send()
        .await
        .unwrap();
    assert_eq!(accepted.status().as_u16(), 202);
    let body: serde_json::Value = accepted.json().await.unwrap();
    assert_eq!(body["job"]["trigger"], "manual");
    assert_eq!(body["job"]["table_name"], "e2e.alpha");

    // Every table in the initial inventory gets compacted.
    wait_until(Duration::from_secs(90), "a successful compaction of every table", || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(DISTINCT table_name) FROM jobs WHERE operation = 'compact' AND state = 'succeeded'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        n == initial.len() as i64
    })
    .await
    .unwrap();

    // Both replicas work: keep asking for cheap manual checkpoints until both took some.
    wait_until(
        Duration::from_secs(90),
        "jobs run on both replicas",
        || async {
            let workers: Vec<String> = sqlx::query_scalar(
                "SELECT DISTINCT split_part(worker_id, '/', 1) FROM job_attempts",
            )
            .fetch_all(&pool)
            .await
            .unwrap();
            if workers.len() >= 2 {
                return true;
            }
            for t in &initial {
                let _ = client
                    .post(format!("{}/api/v1/tables/{}/jobs", r1.base_url, t.name))
                    .bearer_auth(TOKEN)
                    .json(&serde_json::json!({"operation": "checkpoint"}))
                    .send()
                    .await;
            }
            false
        },
    )
    .await
    .unwrap();

    // Rows unchanged, file count down, staleness fallen, metrics correct.
    for t in &initial {
        let uri = root.join(t.name);
        let after = fixtures::read_rows_sorted(&uri.to_string_lossy(), None)
            .await
            .unwrap();
        assert_eq!(after, before[t.name], "rows of {} changed", t.name);
    }
    let alpha = root.join("e2e.alpha");
    let files_now = fixtures::active_files(&alpha.to_string_lossy())
        .await
        .unwrap();
    assert!(files_now < 12, "alpha still has {files_now} files");
    let expected_files = files_now as f64;
    wait_until(
        Duration::from_secs(30),
        "metrics to reflect the compaction",
        || async {
            let m = r1.metrics().await.unwrap();
            metric_value(&m, "tablekeeper_table_files", "table=\"e2e.alpha\"")
                == Some(expected_files)
        },
    )
    .await
    .unwrap();
    let m = r1.metrics().await.unwrap();
    let stale_after = metric_value(
        &m,
        "tablekeeper_staleness_seconds",
        "operation=\"compact\",table=\"e2e.alpha\"",
    )
    .unwrap();
    let last_success = metric_value(
        &m,
        "tablekeeper_last_success_timestamp_seconds",
        "operation=\"compact\",table=\"e2e.alpha\"",
    )
    .unwrap();
    assert!(
        last_success >= t0,
        "last success {last_success} precedes the table ({t0})"
    );
    let now = chrono::Utc::now().timestamp() as f64;
    // Staleness now counts from that success (1 s rounding, 5 s gauge refresh).
    assert!(
        stale_after <= now - last_success + 7.0,
        "staleness {stale_after} is not measured from the last success {last_success} (now {now})"
    );
    assert!(
        stale_after < 60.0,
        "staleness after compaction is {stale_after}"
    );
    assert_eq!(
        metric_value(
            &m,
            "tablekeeper_table_info",
            "owner=\"team-alpha\",table=\"e2e.alpha\""
        ),
        Some(1.0)
    );
    assert_eq!(
        metric_value(&m, "tablekeeper_inventory_tables", ""),
        Some(3.0)
    );
    assert!(
        metric_value(
            &m,
            "tablekeeper_last_success_timestamp_seconds",
            "operation=\"compact\",table=\"e2e.alpha\""
        )
        .unwrap()
            > 1.7e9
    );
    // a failure streak is a series only while there is one
    assert_eq!(
        metric_value(
            &m,
            "tablekeeper_consecutive_failures",
            "operation=\"compact\",table=\"e2e.alpha\""
        ),
        None
    );
    for name in [
        "tablekeeper_build_info",
        "tablekeeper_jobs",
        "tablekeeper_job_duration_seconds_bucket",
        "tablekeeper_table_size_bytes",
        "tablekeeper_table_small_files",
        "tablekeeper_table_version",
        "tablekeeper_table_commits_since_checkpoint",
        "tablekeeper_table_commits_per_hour",
        "tablekeeper_inventory_reload_failures_total",
    ] {
        assert!(m.contains(name), "{name} missing from /metrics");
    }
    let succeeded_total: f64 = m
        .lines()
        .filter(|l| l.starts_with("tablekeeper_jobs_total{") && l.contains("outcome=\"succeeded\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(succeeded_total >= 1.0, "no succeeded jobs counted on r1");

    // Hot reload: a new table is scheduled and maintained.
    let all: Vec<&Table> = TABLES.iter().collect();
    std::fs::write(&inv_file, inventory(&root, &all)).unwrap();
    r1.signal("HUP").unwrap();
    wait_until(Duration::from_secs(60), "the new table to be compacted after reload", || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM jobs WHERE table_name = 'e2e.delta' AND operation = 'compact' AND state = 'succeeded'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        n >= 1
    })
    .await
    .unwrap();
    let tables: serde_json::Value = reqwest::get(format!("{}/api/v1/tables", r1.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tables["tables"].as_array().unwrap().len(), 4);

    // A broken inventory keeps the last good one and is counted.
    std::fs::write(&inv_file, "tables:\n  - name: [broken\n").unwrap();
    r1.signal("HUP").unwrap();
    wait_until(
        Duration::from_secs(20),
        "the reload failure to be counted",
        || async {
            let m = r1.metrics().await.unwrap();
            metric_value(&m, "tablekeeper_inventory_reload_failures_total", "").unwrap_or(0.0)
                >= 1.0
        },
    )
    .await
    .unwrap();
    let m = r1.metrics().await.unwrap();
    assert_eq!(
        metric_value(&m, "tablekeeper_inventory_tables", ""),
        Some(4.0)
    );
    let ready = reqwest::get(format!("{}/readyz", r1.base_url))
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);

    // No overlapping attempts on any concurrency key, across both replicas.
    let shared: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM job_attempts a JOIN jobs j ON j.id = a.job_id WHERE j.concurrency_key = 'shared'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(shared > 0, "no attempts on the shared key");
    assert_no_overlap(&pool).await.unwrap();

    // SIGTERM: drain and exit 0 within the grace period.
    for d in [&mut r1, &mut r2] {
        d.signal("TERM").unwrap();
    }
    for d in [&mut r1, &mut r2] {
        let code = d.wait_exit(Duration::from_secs(30)).unwrap();
        assert_eq!(code, Some(0), "{} exit code; log:\n{}", d.name, d.log());
    }
    // Rows still identical for every table after all the maintenance.
    for t in TABLES {
        let after = fixtures::read_rows_sorted(&root.join(t.name).to_string_lossy(), None)
            .await
            .unwrap();
        assert_eq!(after, before[t.name], "rows of {} changed", t.name);
    }
    pool.close().await;
    db.drop_db().await.unwrap();
}
