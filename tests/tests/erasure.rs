//! The erasure sequence end to end, on a table Databricks wrote with deletion vectors: the real
//! binary plans it (`tablekeeper plan` names the deletion and the earliest erasure date), the
//! daemon on a real Postgres purges the soft-deleted rows and then vacuums the superseded files
//! once the (test-shortened) retention has passed, and `/metrics` shows the soft-deleted rows
//! and the pending erasure fall to 0 (passing `promtool check metrics`). Rows are the same
//! through python deltalake before and after; no file holding a deleted row is left.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use tablekeeper_delta::fixtures::aged::copy_reference;
use tablekeeper_delta::fixtures::peers::python_rows;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::setup::daemon_env;
use tablekeeper_tests::{metric_value, run, Daemon};

const TABLE: &str = "e.customers";

fn files_named(root: &Path, suffix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(suffix) {
            found.push(name);
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn purge_then_vacuum_erase_soft_deleted_rows_and_the_metrics_follow() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("customers");
    copy_reference("table-with-dv-small", &table);
    let uri = table.to_str().unwrap().to_owned();
    let before = python_rows(&uri, None).unwrap();
    assert_eq!(before.len(), 8, "two of ten rows are soft-deleted");
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "defaults:\n  compaction: {{ enabled: false }}\n  checkpoint: {{ enabled: false }}\n  \
             purge: {{ schedule: \"*/2 * * * * *\" }}\n  vacuum: {{ schedule: \"*/3 * * * * *\", full_every: 1 }}\n\
             tables:\n  - name: {TABLE}\n    path: \"{uri}\"\n    owner: privacy\n    \
             retention: {{ deleted_file_retention: 2s, log_retention: 30d, allow_short_retention: true, erasure_deadline: 30d }}\n"
        ),
    )
    .unwrap();

    // the plan says what is still on storage and since when
    let plan = run(&["plan", "--inventory", inventory.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert!(plan.status.success(), "{text}");
    assert!(
        text.contains("erasure: rows deleted at version 1 (2023-03-03) are physically present until purge and VACUUM; earliest erasure")
            && text.contains("(overdue)")
            && text.contains("2 soft-deleted row(s) in live files"),
        "{text}"
    );
    assert!(text.contains("purge      run"), "{text}");

    let db = TestDatabase::create().await.unwrap();
    let env = daemon_env(&db.url, &inventory, Duration::from_secs(10), 2);
    let daemon = Daemon::start("r1", dir.path(), &env).unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    let labels = format!("table=\"{TABLE}\"");
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let last = loop {
        let m = daemon.metrics().await.unwrap_or_default();
        if metric_value(&m, "tablekeeper_table_deleted_rows", &labels) == Some(0.0)
            && metric_value(&m, "tablekeeper_erasure_pending_seconds", &labels) == Some(0.0)
        {
            break m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the erasure did not finish; metrics:\n{m}\nlog:\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(
        metric_value(&last, "tablekeeper_erasure_deadline_seconds", &labels),
        Some(30.0 * 86_400.0)
    );

    let jobs: Vec<(String, String)> = sqlx::query_as(
        "SELECT operation, state FROM jobs WHERE table_name = $1 AND state = 'succeeded' ORDER BY finished_at",
    )
    .bind(TABLE)
    .fetch_all(&sqlx::PgPool::connect(&db.url).await.unwrap())
    .await
    .unwrap();
    let purge_at = jobs.iter().position(|(op, _)| op == "purge");
    let vacuum_after = jobs.iter().rposition(|(op, _)| op == "vacuum");
    assert!(
        purge_at.is_some() && vacuum_after > purge_at,
        "a purge, then a VACUUM: {jobs:?}"
    );
    assert_eq!(python_rows(&uri, None).unwrap(), before, "rows changed");
    assert!(
        files_named(&table, ".bin").is_empty(),
        "deletion-vector files left"
    );
    assert_eq!(
        files_named(&table, ".parquet").len(),
        1,
        "only the purged file is left: {:?}",
        files_named(&table, ".parquet")
    );

    // the exposition format of the new series is valid
    if let Ok(mut promtool) = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        use std::io::Write as _;
        promtool
            .stdin
            .take()
            .unwrap()
            .write_all(last.as_bytes())
            .unwrap();
        let out = promtool.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool check metrics: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        panic!("promtool is not installed (scripts/check-deploy.sh installs it)");
    }
}
