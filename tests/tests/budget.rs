//! The maintenance budget (README "Budget") with the real binary: three replicas on one
//! Postgres, 200 real small-file tables and a table Databricks wrote with deletion vectors,
//! a one-minute window.
//!
//! 1. **Shadow** (30 tables, a budget one compaction spends): every due compaction
//!    runs as without a budget, and the rounds record what `enforce` would have deferred
//!    (`report budget`).
//! 2. **Enforce** (the inventory reloaded with all tables): in every enforced window, the
//!    measured CPU of the jobs admitted within the budget stays within the budget plus the
//!    largest of those jobs; every job that started carries a verdict; deferred ones carry
//!    their reason (budget, rank, when the window refills) in the job table, in every
//!    replica's API and in `plan`; the erasure table's purge (deadline at risk) runs while
//!    compactions wait in its window; every replica's `/metrics` shows the deferrals and
//!    the window's budget; `plan --base` shows the switch against the measured windows.
//!
//! And what another engine does while a job waits: python deltalake compacts a table whose
//! compaction the budget deferred; the job, admitted when the window refills, finds nothing to
//! merge, commits nothing, and both readers read every row as before.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::Row;
use tablekeeper_delta::fixtures::aged::copy_reference;
use tablekeeper_delta::fixtures::peers::run_python;
use tablekeeper_delta::fixtures::{both_readers, write_small_files, SmallFiles};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{assert_no_overlap, count, job_state, wait_until};
use tablekeeper_tests::setup::{daemon_env, serial};
use tablekeeper_tests::{logs, metric_value, run, stop_all, Daemon};

const TABLES: usize = 200;
const SHADOW_TABLES: usize = 30;
/// CPU-seconds a window in the enforce phase.
const LIMIT: f64 = 1.0;
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

/// One partition of 12 small files, `rows` rows each: a compaction is due.
async fn small_file_table(uri: &Path, rows: u32) {
    write_small_files(
        uri.to_str().unwrap(),
        &SmallFiles {
            partitions: 1,
            files_per_partition: 12,
            rows_per_file: rows,
            payload_bytes: 8,
        },
    )
    .await
    .unwrap();
}

/// The tables whose compaction `daemon`'s API shows deferred, each with its reason and
/// estimate checked.
async fn deferred_compactions(daemon: &Daemon) -> std::collections::BTreeSet<String> {
    let view: serde_json::Value = reqwest::get(format!("{}/api/v1/tables", daemon.base_url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut deferred = std::collections::BTreeSet::new();
    for t in view["tables"].as_array().unwrap() {
        let Some(compact) = t["operations"]
            .as_array()
            .and_then(|ops| ops.iter().find(|o| o["operation"] == "compact"))
        else {
            continue;
        };
        if compact["decision"]["decision"] == "deferred" {
            let reason = compact["decision"]["reason"].as_str().unwrap();
            assert!(reason.starts_with("deferred: budget"), "{compact}");
            assert!(compact["estimate"]["cost"]["cpu_seconds"].as_f64().unwrap() > 0.0);
            deferred.insert(t["name"].as_str().unwrap().to_owned());
        }
    }
    deferred
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
        // the shadow phase's tables take a while to compact, so the rounds see jobs queued
        // behind the running ones (small ones are claimed within a poll, before any round)
        let rows = if i < SHADOW_TABLES { 20_000 } else { 200 };
        small_file_table(&dir.path().join(name(i)), rows).await;
    }
    let customers = dir.path().join("customers");
    copy_reference("table-with-dv-small", &customers);
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();

    // 1. shadow: 30 tables, a budget a fraction of one window's compactions
    let inv = inventory(
        dir.path(),
        "{ window: 1m, cpu_seconds: 0.001, mode: shadow }",
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

    // 2. enforce: every table, reloaded on every replica
    let enforce = format!("{{ window: 1m, cpu_seconds: {LIMIT}, mode: enforce }}");
    inventory(dir.path(), &enforce, TABLES, None);
    for d in &daemons {
        d.signal("HUP").unwrap();
    }
    let switched = chrono::Utc::now() + chrono::Duration::seconds(5);
    // then the erasure table, once compactions wait: its purge must run while they do (added
    // with the switch, its first purge could run before the first deferral)
    wait_until(
        Duration::from_secs(90),
        "a compaction deferred under enforce",
        || async {
            count(
                &pool,
                "SELECT count(*) FROM budget_deferrals WHERE mode = 'enforce' AND reason = 'budget'",
            )
            .await
                > 0
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&daemons)));
    inventory(dir.path(), &enforce, TABLES, Some(&customers));
    for d in &daemons {
        d.signal("HUP").unwrap();
    }
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

    // a deferred compaction: its reason in the job table, and the same in every replica's API.
    // A round every 2 s re-ranks, and a new window admits some: any compaction the job table
    // and all three replicas show deferred at once will do.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let (table, note) = loop {
        let in_store: Vec<(String, String)> = sqlx::query_as(
            "SELECT table_name, budget_note FROM jobs WHERE state = 'queued' \
             AND operation = 'compact' AND budget_reason = 'budget' ORDER BY table_name",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        let mut everywhere: Option<std::collections::BTreeSet<String>> = None;
        for d in &daemons {
            let shown = deferred_compactions(d).await;
            everywhere = Some(match everywhere {
                None => shown,
                Some(before) => before.intersection(&shown).cloned().collect(),
            });
        }
        let everywhere = everywhere.unwrap_or_default();
        if let Some(found) = in_store.into_iter().find(|(t, _)| everywhere.contains(t)) {
            break found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no compaction shown deferred by the job table and every replica at once in 60 s\n{}",
            logs(&daemons)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        note.starts_with(&format!(
            "deferred: budget ({LIMIT} CPU-s a window spent); rank "
        )) && note.contains(" of ")
            && note.contains("window refills "),
        "{table}: {note}"
    );
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

    // the pull-request view of the switch: the budget's changed keys, and the measured
    // windows that spent more than it, from this job store
    let base = dir.path().join("base.yaml");
    std::fs::write(
        &base,
        std::fs::read_to_string(&inv)
            .unwrap()
            .replace(&enforce, "{ window: 1m, cpu_seconds: 0.001, mode: shadow }"),
    )
    .unwrap();
    let review = std::process::Command::new(tablekeeper_tests::bin_path())
        .args(["plan", "--inventory"])
        .arg(&inv)
        .arg("--base")
        .arg(&base)
        .args(["--format", "json"])
        .env("TABLEKEEPER_DATABASE_URL", &db.url)
        .output()
        .unwrap();
    let review: serde_json::Value = serde_json::from_slice(&review.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&review.stderr)));
    assert_eq!(review["tables"].as_array().unwrap().len(), 0, "{review:#}");
    let keys: Vec<&str> = review["budget"]["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["budget.cpu_seconds", "budget.mode"], "{review:#}");
    let consequences = review["budget"]["consequences"].as_array().unwrap();
    assert!(
        consequences.iter().all(|c| c["kind"] == "budget"),
        "{review:#}"
    );
    assert!(
        consequences[0]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!(
                "{LIMIT} CPU-s a 1m: the fleet's measured jobs spent "
            )),
        "{review:#}"
    );
    assert!(
        consequences.iter().any(|c| c["severity"] == "warning"
            && c["message"]
                .as_str()
                .unwrap()
                .starts_with("shadow → enforce")),
        "{review:#}"
    );

    assert_no_overlap(&pool).await.unwrap();
    stop_all(&mut daemons, Duration::from_secs(60)).unwrap();
    pool.close().await;
    db.drop_db().await.unwrap();
}

const PYTHON_COMPACTS: &str = r#"
import sys
from deltalake import DeltaTable
DeltaTable(sys.argv[1]).optimize.compact()
print(DeltaTable(sys.argv[1]).version())
"#;

const PYTHON_VERSION: &str = r#"
import sys
from deltalake import DeltaTable
print(DeltaTable(sys.argv[1]).version())
"#;

/// Another engine acts while tablekeeper's compaction waits for the budget: python deltalake
/// compacts the table, and when the window refills the deferred job runs against the table
/// as it is then. It finds nothing to merge, commits nothing, and every row reads the same
/// through both readers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_compaction_runs_against_what_another_engine_did_meanwhile() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut before = Vec::new();
    for i in 0..2 {
        let uri = dir.path().join(name(i));
        small_file_table(&uri, 200).await;
        before.push(both_readers(uri.to_str().unwrap()).await.unwrap());
    }
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    // one job's estimate spends a one-minute window: the other compaction waits for the next
    let inv = inventory(
        dir.path(),
        "{ window: 1m, cpu_seconds: 0.001, mode: enforce }",
        2,
        None,
    );
    // start at a window's beginning, so python acts well before the window refills
    let into_minute = chrono::Utc::now().timestamp() % 60;
    if into_minute > 5 {
        tokio::time::sleep(Duration::from_secs((60 - into_minute) as u64)).await;
    }
    let env = daemon_env(&db.url, &inv, Duration::from_secs(30), 2);
    let mut daemons = vec![Daemon::start("a", dir.path(), &env).unwrap()];
    daemons[0]
        .wait_ready(Duration::from_secs(60))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    let waiting: Option<(i64, String)> = loop {
        let found = sqlx::query_as(
            "SELECT id, table_name FROM jobs WHERE state = 'queued' AND operation = 'compact' \
             AND budget_reason = 'budget' LIMIT 1",
        )
        .fetch_optional(&pool)
        .await
        .unwrap();
        if found.is_some() || std::time::Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let Some((job, table)) = waiting else {
        panic!("no compaction was deferred in 40 s\n{}", logs(&daemons));
    };
    let uri = dir.path().join(&table);
    let uri = uri.to_str().unwrap();
    let compacted: u64 = run_python(PYTHON_COMPACTS, &[uri])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        job_state(&pool, job).await,
        "queued",
        "python's compaction was to land while the job waited"
    );
    wait_until(
        Duration::from_secs(120),
        "the deferred compaction to run in the next window",
        || async { !matches!(job_state(&pool, job).await.as_str(), "queued" | "running") },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", logs(&daemons)));
    let row = sqlx::query("SELECT state, budget_class, result FROM jobs WHERE id = $1")
        .bind(job)
        .fetch_one(&pool)
        .await
        .unwrap();
    let result: Option<serde_json::Value> = row.get("result");
    assert_eq!(
        row.get::<String, _>("state"),
        "succeeded",
        "{result:?}\n{}",
        logs(&daemons)
    );
    assert_eq!(
        row.get::<Option<String>, _>("budget_class").as_deref(),
        Some("budget")
    );
    // python's compaction left one file: nothing to merge, nothing committed
    let now: u64 = run_python(PYTHON_VERSION, &[uri])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        now, compacted,
        "tablekeeper committed over python's compaction"
    );
    let k = usize::from(table == name(1));
    assert_eq!(
        both_readers(uri).await.unwrap(),
        before[k],
        "{table}'s rows changed"
    );
    // the other table's compaction, admitted first, kept every row too
    let other = dir.path().join(name(1 - k));
    assert_eq!(
        both_readers(other.to_str().unwrap()).await.unwrap(),
        before[1 - k]
    );
    stop_all(&mut daemons, Duration::from_secs(30)).unwrap();
}
