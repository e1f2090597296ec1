//! The maintenance budget (README "Budget") with the real binary: three replicas on one
//! Postgres, 200 real small-file tables and a table Databricks wrote with deletion vectors,
//! a one-minute window.
//!
//! 1. **Shadow** (30 tables, a budget far below their compactions): every due compaction
//!    runs as without a budget, and the rounds record what `enforce` would have deferred
//!    (`report budget`).
//! 2. **Enforce** (the inventory reloaded with all tables): in every enforced window, the
//!    measured CPU of the jobs admitted within the budget stays within the budget plus the
//!    largest of those jobs; every job that started carries a verdict; deferred ones carry
//!    their reason (budget, rank, when the window refills) in the job table, in every
//!    replica's API and in `plan`; the erasure table's purge (deadline at risk) runs while
//!    compactions wait in its window; every replica's `/metrics` shows the deferrals and
//!    the window's budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::Row;
use tablekeeper_delta::fixtures::aged::copy_reference;
use tablekeeper_delta::fixtures::{write_small_files, SmallFiles};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{assert_no_overlap, wait_until};
use tablekeeper_tests::setup::{daemon_env, serial};
use tablekeeper_tests::{logs, metric_value, run, stop_all, Daemon};

const TABLES: usize = 200;
const SHADOW_TABLES: usize = 30;
/// CPU-seconds a window in the enforce phase.
const LIMIT: f64 = 3.0;
const ERASURE: &str = "privacy.customers";

fn name(i: usize) -> String {
    format!("t{i:03}")
}

/// The inventory: `budget`, the first `tables` small-file tables, and the erasure table when
/// `erasure` is given.
fn inventory(dir: &Path, budget: &str, tables: usize, erasure: Option<&Path>) -> PathBuf {
    let mut yaml = format!(
        "budget: {budget}\ndefaults:\n  compaction: {{ schedule: \"*/5 * * * * *\", min_small_files: 10 }}\n  \
         zorder: {{ enabled: false }}\n  vacuum: {{ enabled: false }}\n  checkpoint: {{ enabled: false }}\n  \
         purge: {{ enabled: false }}\n  max_attempts: 2\ntables:\n"
    );
    for i in 0..tables {
        yaml.push_str(&format!(
            "  - name: {}\n    path: \"{}\"\n    owner: team{}\n",
            name(i),
            dir.join(name(i)).display(),
            i % 4
        ));
    }
    if let Some(path) = erasure {
        yaml.push_str(&format!(
            "  - name: {ERASURE}\n    path: \"{}\"\n    owner: privacy\n    \
             retention: {{ deleted_file_retention: 0s, log_retention: 30d, allow_short_retention: true, erasure_deadline: 30d }}\n    \
             maintenance:\n      compaction: {{ enabled: false }}\n      purge: {{ enabled: true, schedule: \"40 * * * * *\" }}\n",
            path.display()
        ));
    }
    let path = dir.join("inventory.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

async fn succeeded_compactions(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT count(DISTINCT table_name) FROM jobs WHERE operation = 'compact' AND state = 'succeeded'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_one_budget_defer_with_reasons_and_keep_the_must_runs() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    for i in 0..TABLES {
        write_small_files(
            dir.path().join(name(i)).to_str().unwrap(),
            &SmallFiles {
                partitions: 1,
                files_per_partition: 12,
                rows_per_file: 200,
                payload_bytes: 8,
            },
        )
        .await
        .unwrap();
    }
    let customers = dir.path().join("customers");
    copy_reference("table-with-dv-small", &customers);
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();

    // 1. shadow: 30 tables, a budget a fraction of one window's compactions
    let inv = inventory(
        dir.path(),
        "{ window: 1m, cpu_seconds: 0.5, mode: shadow }",
        SHADOW_TABLES,
        None,
    );
    let env = daemon_env(&db.url, &inv, Duration::from_secs(30), 2);
    let mut daemons: Vec<Daemon> = ["a", "b", "c"]
        .iter()
        .map(|n| Daemon::start(n, dir.path(), &env).unwrap())
        .collect();
    for d in &daemons {
        d.wait_ready(Duration::from_secs(60)).await.unwrap();
    }
    wait_until(
        Duration::from_secs(180),
        "every shadow table's compaction to succeed",
        || async { succeeded_compactions(&pool).await == SHADOW_TABLES as i64 },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&daemons)));
    let would_defer: i64 =
        sqlx::query_scalar("SELECT count(*) FROM budget_deferrals WHERE mode = 'shadow'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        would_defer > 0,
        "the shadow rounds recorded nothing enforce would defer\n{}",
        logs(&daemons)
    );
    let report = run(&[
        "report",
        "budget",
        "--database-url",
        &db.url,
        "--since",
        "1h",
    ]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        report.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(
        text.contains("(would be)") && text.contains("shadow"),
        "{text}"
    );

    // 2. enforce: every table, the erasure table too, reloaded on every replica
    let inv = inventory(
        dir.path(),
        &format!("{{ window: 1m, cpu_seconds: {LIMIT}, mode: enforce }}"),
        TABLES,
        Some(&customers),
    );
    for d in &daemons {
        d.signal("HUP").unwrap();
    }
    let switched = chrono::Utc::now() + chrono::Duration::seconds(5);
    // two whole windows after the switch, and the erasure table's purge
    let settle = (switched + chrono::Duration::minutes(1)).timestamp() / 60 * 60 + 120;
    wait_until(
        Duration::from_secs(300),
        "two whole enforced windows and the erasure table's purge",
        || async {
            let purged: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM jobs WHERE table_name = $1 AND operation = 'purge' AND state = 'succeeded'",
            )
            .bind(ERASURE)
            .fetch_one(&pool)
            .await
            .unwrap();
            purged > 0 && chrono::Utc::now().timestamp() > settle
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&daemons)));

    // every job that started under enforce carries a verdict
    let unruled: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM jobs WHERE started_at > $1 AND budget_class IS NULL",
    )
    .bind(switched)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(unruled, 0, "jobs started under enforce without a verdict");

    // each whole enforced window: within the budget plus its largest budgeted job
    let windows = sqlx::query(
        "SELECT window_start, window_end, limit_micros FROM budget_windows \
         WHERE mode = 'enforce' AND window_start >= $1 AND window_end <= now() ORDER BY window_start",
    )
    .bind(switched)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(
        windows.len() >= 2,
        "{} whole enforced windows",
        windows.len()
    );
    for w in &windows {
        let start: chrono::DateTime<chrono::Utc> = w.get("window_start");
        let end: chrono::DateTime<chrono::Utc> = w.get("window_end");
        let limit = w.get::<i64, _>("limit_micros") as f64 / 1e6;
        assert!((limit - LIMIT).abs() < 1e-6);
        let row = sqlx::query(
            "SELECT count(*) AS jobs, \
               COALESCE(sum((result->'cost'->>'cpu_seconds')::float8), 0) AS spent, \
               COALESCE(max((result->'cost'->>'cpu_seconds')::float8), 0) AS largest, \
               count(*) FILTER (WHERE result IS NULL) AS unfinished \
             FROM jobs WHERE budget_class = 'budget' AND started_at >= $1 AND started_at < $2",
        )
        .bind(start)
        .bind(end)
        .fetch_one(&pool)
        .await
        .unwrap();
        let (jobs, spent, largest, unfinished): (i64, f64, f64, i64) = (
            row.get("jobs"),
            row.get("spent"),
            row.get("largest"),
            row.get("unfinished"),
        );
        assert_eq!(
            unfinished, 0,
            "window {start}: a budgeted job without its measured cost"
        );
        assert!(
            jobs > 0 && spent > 0.0,
            "window {start}: nothing ran within the budget"
        );
        assert!(
            spent <= limit + largest,
            "window {start}: {jobs} budgeted jobs measured {spent:.2} CPU-s, over the budget \
             {limit} plus the largest job {largest:.2}\n{}",
            logs(&daemons)
        );
        let deferred: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM budget_deferrals WHERE window_start = $1 AND mode = 'enforce'",
        )
        .bind(start)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(deferred > 0, "window {start}: nothing was deferred");
    }

    // the erasure purge ran outside the budget, while compactions waited in its window
    let purge = sqlx::query(
        "SELECT budget_class, started_at FROM jobs WHERE table_name = $1 AND operation = 'purge' \
         AND state = 'succeeded' ORDER BY id LIMIT 1",
    )
    .bind(ERASURE)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        purge.get::<Option<String>, _>("budget_class").as_deref(),
        Some("erasure_at_risk")
    );
    let purge_started: chrono::DateTime<chrono::Utc> = purge.get("started_at");
    let waiting_meanwhile: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM budget_deferrals d JOIN budget_windows w USING (window_start) \
         WHERE d.reason = 'budget' AND d.mode = 'enforce' AND w.window_start <= $1 \
           AND w.window_end > $1 AND d.deferred_at < $1",
    )
    .bind(purge_started)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        waiting_meanwhile > 0,
        "the purge at {purge_started} did not run while the budget was spent"
    );

    // a deferred compaction: its reason in the job table, and the same in every replica's API
    let deferred = sqlx::query(
        "SELECT table_name, budget_note FROM jobs WHERE state = 'queued' AND operation = 'compact' \
         AND budget_reason = 'budget' ORDER BY table_name LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap_or_else(|e| panic!("no compaction is deferred now: {e}"));
    let table: String = deferred.get("table_name");
    let note: String = deferred.get("budget_note");
    assert!(
        note.starts_with("deferred: budget (3 CPU-s a window spent); rank ")
            && note.contains(" of ")
            && note.contains("window refills "),
        "{note}"
    );
    // a round every 2 s may rewrite the rank meanwhile: wait for the replicas to agree
    wait_until(
        Duration::from_secs(30),
        "every replica to show the deferral",
        || async {
            let mut shown = 0;
            for d in &daemons {
                let view = d.table_view(&table).await.unwrap();
                let compact = view["operations"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|o| o["operation"] == "compact")
                    .unwrap()
                    .clone();
                if compact["decision"]["decision"] == "deferred" {
                    let reason = compact["decision"]["reason"].as_str().unwrap();
                    assert!(reason.starts_with("deferred: budget"), "{compact}");
                    assert!(compact["estimate"]["cost"]["cpu_seconds"].as_f64().unwrap() > 0.0);
                    shown += 1;
                }
            }
            shown == daemons.len()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&daemons)));
    for d in &daemons {
        let metrics = d.metrics().await.unwrap();
        let limit = metric_value(
            &metrics,
            "tablekeeper_budget_cpu_seconds",
            "state=\"limit\"",
        );
        assert_eq!(limit, Some(LIMIT), "{}", d.log());
        let waiting = metric_value(
            &metrics,
            "tablekeeper_deferred",
            "operation=\"compact\",reason=\"budget\"",
        );
        assert!(waiting.is_some_and(|n| n > 0.0), "{waiting:?}");
    }

    // plan: the same ranking over what is due now, in a fresh window
    let plan = run(&[
        "plan",
        "--inventory",
        inv.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(
        plan.status.success(),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let ops: Vec<&serde_json::Value> = plan["tables"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["operations"].as_array().unwrap())
        .collect();
    let planned_deferred: Vec<&&serde_json::Value> = ops
        .iter()
        .filter(|o| o["decision"]["decision"] == "deferred")
        .collect();
    assert!(!planned_deferred.is_empty(), "plan defers nothing");
    for o in &planned_deferred {
        assert!(
            o["decision"]["reason"].as_str().unwrap().contains("rank "),
            "{o}"
        );
        assert!(o["estimate"]["benefit"].as_f64().is_some(), "{o}");
    }

    let report = run(&[
        "report",
        "budget",
        "--database-url",
        &db.url,
        "--since",
        "1h",
        "--format",
        "json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert!(
        report["total"]["deferrals"].as_i64().unwrap() > 0,
        "{report}"
    );
    assert!(
        report["total"]["would_defer"].as_i64().unwrap() > 0,
        "{report}"
    );

    assert_no_overlap(&pool).await.unwrap();
    stop_all(&mut daemons, Duration::from_secs(60)).unwrap();
    pool.close().await;
    db.drop_db().await.unwrap();
}
