//! Stale commits end to end: python deltalake (another engine, in its own process) appends,
//! takes a snapshot, and after the real daemon compacted the table either overwrites from it or
//! compacts from it (a team's own `optimize.compact()`, which deltalake lets commit over
//! tablekeeper's compaction: every row twice). The daemon finds the stale commit, counts it on
//! every replica, repairs it with a `repair` job, and afterwards the table holds exactly the
//! rows meant for both readers. The `repair` command does the same by hand, on a local table
//! and on S3.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use tablekeeper_delta::fixtures::peers::{python, python_rows, S3Server};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{count, wait_until};
use tablekeeper_tests::{metric_value, run, Daemon};

const TOKEN: &str = "stale-write-token";

/// The reproduction, driven step by step over stdin/stdout; `sys.argv[2]` says what the writer
/// does from its old snapshot: `overwrite` (five new rows) or `compact`.
const WRITER: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
path, mode = sys.argv[1], sys.argv[2]
for i in range(10):
    write_deltalake(path, pa.table({"id": pa.array(list(range(i * 10, i * 10 + 10)), pa.int64())}), mode="append")
stale = DeltaTable(path)          # a writer's snapshot, taken before maintenance
print("snapshot", stale.version(), flush=True)
sys.stdin.readline()              # the test says when maintenance has compacted
if mode == "overwrite":
    write_deltalake(stale, pa.table({"id": pa.array(list(range(1000, 1005)), pa.int64())}), mode="overwrite")
else:
    stale.optimize.compact()
print("committed", DeltaTable(path).version(), flush=True)
sys.stdout.flush()
os._exit(0)
"#;

struct Writer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// What the python writer does from its old snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stale {
    Overwrite,
    Compact,
}

impl Stale {
    /// The ids the table must hold once the stale commit is repaired.
    fn expected(self) -> Vec<i64> {
        match self {
            Stale::Overwrite => (1000..1005).collect(),
            Stale::Compact => (0..100).collect(),
        }
    }
}

impl Writer {
    fn start(path: &str, stale: Stale) -> Writer {
        let mode = match stale {
            Stale::Overwrite => "overwrite",
            Stale::Compact => "compact",
        };
        let mut child = Command::new(python().expect("python deltalake"))
            .arg("-c")
            .arg(WRITER)
            .arg(path)
            .arg(mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the python writer");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Writer {
            child,
            stdin,
            stdout,
        }
    }

    fn expect_line(&mut self, word: &str) -> u64 {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("writer output");
        let version = line
            .strip_prefix(word)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("writer said `{line}`, expected `{word} N`"));
        version
    }

    /// Commits from the old snapshot; the version it committed.
    fn commit(&mut self) -> u64 {
        self.stdin.write_all(b"go\n").expect("signal the writer");
        self.stdin.flush().expect("flush");
        let version = self.expect_line("committed");
        let _ = self.child.wait();
        version
    }
}

fn ids_of(lines: &[String]) -> Vec<i64> {
    let mut ids: Vec<i64> = lines
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("json")["id"]
                .as_i64()
                .expect("id")
        })
        .collect();
    ids.sort_unstable();
    ids
}

/// A tablekeeper commit of `operation` in the table's log.
fn has_commit(table: &Path, operation: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(table.join("_delta_log")) else {
        return false;
    };
    entries.flatten().any(|e| {
        e.path().extension().is_some_and(|x| x == "json")
            && std::fs::read_to_string(e.path()).is_ok_and(|text| {
                text.contains(&format!("\"operation\":\"{operation}\""))
                    && text.contains("\"tablekeeper\"")
            })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_finds_and_repairs_a_python_overwrite_from_a_stale_snapshot() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("snapshots");
    let uri = table.to_str().unwrap().to_owned();
    let mut writer = Writer::start(&uri, Stale::Overwrite);
    let snapshot = writer.expect_line("snapshot");
    assert_eq!(snapshot, 9);

    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "tables:\n  - name: py.snapshots\n    path: \"{uri}\"\n    owner: data-platform\n    maintenance:\n      compaction: {{ schedule: \"*/2 * * * * *\", min_small_files: 2 }}\n"
        ),
    )
    .unwrap();
    let daemon = Daemon::start(
        "r1",
        dir.path(),
        &[
            ("TABLEKEEPER_DATABASE_URL", db.url.clone()),
            ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
            ("TABLEKEEPER_PROBE_INTERVAL", "1s".into()),
            ("TABLEKEEPER_MAX_PROBE_INTERVAL", "4s".into()),
            ("TABLEKEEPER_POLL_INTERVAL", "200ms".into()),
            ("TABLEKEEPER_ADMIN_TOKEN", TOKEN.into()),
        ],
    )
    .unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    wait_until(Duration::from_secs(60), "the daemon to compact", || async {
        has_commit(&table, "compact")
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));

    let stale_version = writer.commit();
    // the hazard as it happens: all 100 old rows survived the overwrite, until the repair
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    wait_until(Duration::from_secs(60), "the repair job to succeed", || async {
        count(
            &pool,
            "SELECT count(*) FROM jobs WHERE table_name = 'py.snapshots' AND operation = 'repair' AND state = 'succeeded'",
        )
        .await
            == 1
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));

    let expected: Vec<i64> = (1000..1005).collect();
    assert_eq!(
        ids_of(&python_rows(&uri, None).unwrap()),
        expected,
        "python deltalake"
    );
    let rust_rows = tablekeeper_delta::fixtures::read_rows_sorted(&uri, None)
        .await
        .unwrap();
    assert_eq!(
        rust_rows,
        ["1000", "1001", "1002", "1003", "1004"],
        "deltalake"
    );

    let recorded: (i64, Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT version, \"rows\", repaired_by FROM stale_writes WHERE table_name = 'py.snapshots'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(recorded.0, stale_version as i64);
    assert_eq!(recorded.1, Some(100));
    assert!(recorded.2.is_some(), "{recorded:?}");
    wait_until(
        Duration::from_secs(30),
        "the stale write to be counted",
        || async {
            let m = daemon.metrics().await.unwrap_or_default();
            metric_value(
                &m,
                "tablekeeper_stale_writes_total",
                "table=\"py.snapshots\"",
            ) == Some(1.0)
        },
    )
    .await
    .unwrap();
    // the alert reads when it was detected: the store's detection time, just now
    let m = daemon.metrics().await.unwrap();
    let detected = metric_value(
        &m,
        "tablekeeper_last_stale_write_timestamp_seconds",
        "table=\"py.snapshots\"",
    )
    .expect("the detection time is exported with the stale write");
    let age = chrono::Utc::now().timestamp() as f64 - detected;
    assert!((0.0..300.0).contains(&age), "detected {age} s ago");
    // the API shows it repaired, and further compaction is refused while the overwrite is
    // recent and no overwrite window is declared
    let view: serde_json::Value = daemon.table_view("py.snapshots").await.unwrap();
    assert_eq!(
        view["stale_writes"][0]["repaired_by"],
        recorded.2.unwrap(),
        "{view}"
    );
    let compact = view["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation"] == "compact")
        .unwrap();
    assert_eq!(compact["decision"]["decision"], "refuse", "{compact}");
    assert!(
        compact["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains(&format!("version {stale_version}")),
        "{compact}"
    );
    daemon.signal("TERM").unwrap();
    pool.close().await;
    db.drop_db().await.unwrap();
}

/// The reproduction of a team's own compaction from a snapshot older than tablekeeper's,
/// against two replicas of the daemon on one Postgres with auto repair on (the default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_find_and_undo_another_engines_compaction_from_a_stale_snapshot() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("teamjob");
    let uri = table.to_str().unwrap().to_owned();
    let mut writer = Writer::start(&uri, Stale::Compact);
    assert_eq!(writer.expect_line("snapshot"), 9);

    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "tables:\n  - name: py.teamjob\n    path: \"{uri}\"\n    owner: data-platform\n    maintenance:\n      compaction: {{ schedule: \"*/2 * * * * *\", min_small_files: 2 }}\n"
        ),
    )
    .unwrap();
    let env = || {
        vec![
            ("TABLEKEEPER_DATABASE_URL", db.url.clone()),
            ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
            ("TABLEKEEPER_PROBE_INTERVAL", "1s".to_owned()),
            ("TABLEKEEPER_MAX_PROBE_INTERVAL", "4s".to_owned()),
            ("TABLEKEEPER_POLL_INTERVAL", "200ms".to_owned()),
            ("TABLEKEEPER_ADMIN_TOKEN", TOKEN.to_owned()),
        ]
    };
    let replicas: Vec<Daemon> = ["r1", "r2"]
        .iter()
        .map(|r| Daemon::start(r, dir.path(), &env()).unwrap())
        .collect();
    for daemon in &replicas {
        daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    }
    let logs = || {
        replicas
            .iter()
            .map(|d| d.log())
            .collect::<Vec<_>>()
            .join("\n----\n")
    };
    wait_until(Duration::from_secs(60), "a replica to compact", || async {
        has_commit(&table, "compact")
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; logs:\n{}", logs()));

    let stale_version = writer.commit();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    wait_until(Duration::from_secs(90), "the repair job to succeed", || async {
        count(
            &pool,
            "SELECT count(*) FROM jobs WHERE table_name = 'py.teamjob' AND operation = 'repair' AND state = 'succeeded'",
        )
        .await
            >= 1
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; logs:\n{}", logs()));

    let python = ids_of(&python_rows(&uri, None).unwrap());
    assert_eq!(
        python,
        Stale::Compact.expected(),
        "python deltalake: 100 rows, 100 distinct"
    );
    let rust_rows = tablekeeper_delta::fixtures::read_rows_sorted(&uri, None)
        .await
        .unwrap();
    let distinct: std::collections::BTreeSet<&String> = rust_rows.iter().collect();
    assert_eq!((rust_rows.len(), distinct.len()), (100, 100), "deltalake");

    let recorded: (i64, Option<String>, Option<String>, Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT version, kind, engine_info, \"rows\", repaired_by FROM stale_writes WHERE table_name = 'py.teamjob'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(recorded.0, stale_version as i64, "{recorded:?}");
    assert_eq!(recorded.1.as_deref(), Some("rewrite"), "{recorded:?}");
    assert!(
        recorded
            .2
            .as_deref()
            .is_some_and(|e| e.contains("delta-rs")),
        "the engine is named: {recorded:?}"
    );
    assert_eq!(recorded.3, Some(100), "{recorded:?}");
    assert!(recorded.4.is_some(), "{recorded:?}");
    // every replica counts it, whichever probed the table
    for daemon in &replicas {
        wait_until(
            Duration::from_secs(30),
            "the stale commit to be counted on every replica",
            || async {
                let m = daemon.metrics().await.unwrap_or_default();
                metric_value(&m, "tablekeeper_stale_writes_total", "table=\"py.teamjob\"")
                    == Some(1.0)
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}; logs:\n{}", logs()));
    }
    // python's compaction is also another engine's rewrite: counted from the job store on
    // every replica, with the commit time the owner's warning reads
    for daemon in &replicas {
        wait_until(
            Duration::from_secs(30),
            "the foreign rewrite to be counted on every replica",
            || async {
                let m = daemon.metrics().await.unwrap_or_default();
                let table = "table=\"py.teamjob\"";
                metric_value(&m, "tablekeeper_foreign_rewrites_total", table) == Some(1.0)
                    && metric_value(
                        &m,
                        "tablekeeper_last_foreign_rewrite_timestamp_seconds",
                        table,
                    )
                    .is_some()
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}; logs:\n{}", logs()));
    }
    let view: serde_json::Value = replicas[1].table_view("py.teamjob").await.unwrap();
    assert_eq!(view["stale_writes"][0]["kind"], "rewrite", "{view}");
    assert_eq!(view["foreign_rewrites"]["rewrites"], 1, "{view}");
    assert_eq!(
        view["foreign_rewrites"]["last_version"], stale_version,
        "{view}"
    );
    for daemon in &replicas {
        daemon.signal("TERM").unwrap();
    }
    pool.close().await;
    db.drop_db().await.unwrap();
}

/// A table with a stale commit: ten appends, a snapshot, `tablekeeper maintain` compacts, the
/// python writer overwrites or compacts from the old snapshot.
fn table_with_a_stale_write(uri: &str, inventory: &Path, stale: Stale) {
    let mut writer = Writer::start(uri, stale);
    writer.expect_line("snapshot");
    let out = run(&[
        "maintain",
        "--inventory",
        inventory.to_str().unwrap(),
        "--table",
        "t",
        "--operation",
        "compact",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    writer.commit();
}

fn repair_cli(inventory: &Path, dry_run: bool) -> serde_json::Value {
    let mut args = vec![
        "repair",
        "--inventory",
        inventory.to_str().unwrap(),
        "--table",
        "t",
    ];
    if dry_run {
        args.push("--dry-run");
    }
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

async fn check_repair_cli(uri: &str, dir: &Path, stale: Stale) {
    let inventory = dir.join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!("tables:\n  - name: t\n    path: \"{uri}\"\n    owner: o\n    maintenance:\n      compaction: {{ min_small_files: 2 }}\n"),
    )
    .unwrap();
    table_with_a_stale_write(uri, &inventory, stale);
    let before = python_rows(uri, None).unwrap();
    let visible = match stale {
        Stale::Overwrite => 105,
        Stale::Compact => 200,
    };
    assert_eq!(before.len(), visible, "the stale rows are visible");

    let plan = repair_cli(&inventory, true);
    let planned = &plan["report"]["repairs"][0];
    assert_eq!(planned["stale_rows"], 100, "{plan}");
    assert_eq!(planned["remove"].as_array().unwrap().len(), 1, "{plan}");
    assert_eq!(planned["re_add"].as_array().unwrap().len(), 0, "{plan}");
    assert!(planned["committed_version"].is_null(), "{plan}");
    assert_eq!(
        python_rows(uri, None).unwrap(),
        before,
        "a dry run changes nothing"
    );

    let done = repair_cli(&inventory, false);
    assert!(
        done["report"]["repairs"][0]["committed_version"].is_i64(),
        "{done}"
    );
    assert_eq!(ids_of(&python_rows(uri, None).unwrap()), stale.expected());
    let rust_rows = tablekeeper_delta::fixtures::read_rows_sorted(uri, None)
        .await
        .unwrap();
    assert_eq!(rust_rows.len(), stale.expected().len(), "deltalake");
    let again = repair_cli(&inventory, false);
    assert_eq!(
        again["report"]["skipped"], "no stale write is waiting for a repair",
        "{again}"
    );
}

#[tokio::test]
async fn the_repair_command_plans_and_applies_on_a_local_table() {
    for stale in [Stale::Overwrite, Stale::Compact] {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("t").to_str().unwrap().to_owned();
        check_repair_cli(&uri, dir.path(), stale).await;
    }
}

#[tokio::test]
async fn the_repair_command_plans_and_applies_on_s3() {
    let server = S3Server::shared().expect("moto S3 server");
    assert!(!server.endpoint.is_empty());
    for stale in [Stale::Overwrite, Stale::Compact] {
        let dir = tempfile::tempdir().unwrap();
        let uri = format!("s3://tablekeeper/stale-{}", uuid::Uuid::new_v4());
        check_repair_cli(&uri, dir.path(), stale).await;
    }
}
