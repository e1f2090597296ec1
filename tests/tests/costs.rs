//! What every job costs, measured where it ran (README "What maintenance costs"), with the
//! real binary on a real Postgres:
//!
//! - **CPU**: a compaction, then a Z-order, one at a time, then a compaction and a Z-order
//!   side by side (again on two more tables when a loaded machine ran them one after the
//!   other), then two VACUUMs side by side, in one daemon that probes only at its
//!   start: the jobs' reported `cpu_seconds` against the CPU the daemon's process used
//!   meanwhile (`/proc/PID/stat`, what `getrusage` reports), less its idle rate.
//! - **Consistency**: two replicas share the jobs (a split compaction's tasks run on both);
//!   the sums of `GET /api/v1/operations`, of `tablekeeper report costs --by operation` and of
//!   both replicas' cost counters agree for the same runs.
//! - **Requests on S3**: what tablekeeper counted for a compaction, a VACUUM and the probes
//!   around them against what the S3 server logged answering them; and a replica meeting a
//!   65-commit table reads each commit file once, a checkpoint job included.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sqlx::Row;
use tablekeeper_delta::fixtures::{write_small_files, SmallFiles};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::wait_until;
use tablekeeper_tests::reports::{report_costs, report_costs_json};
use tablekeeper_tests::setup::{daemon_env, serial, trigger, InventoryFile, TableEntry};
use tablekeeper_tests::{bin_path, stop_all, Daemon};

/// Only manual triggers run: every schedule is yearly.
const DEFAULTS: &str =
    "  compaction: { schedule: \"0 0 1 1 *\", target_file_size: 256MiB, min_small_files: 2 }
  zorder: { schedule: \"0 0 1 1 *\" }
  purge: { schedule: \"0 0 1 1 *\" }
  vacuum: { schedule: \"0 0 1 1 *\" }
  checkpoint: { enabled: false }
  max_attempts: 1
  timeout: 5m
";

/// Z-ordered by `user_id`; VACUUM may delete what compaction removed at once.
const TABLE_EXTRA: &str = "    layout: { zorder: [user_id] }
    retention: { deleted_file_retention: 0s, log_retention: 30d, allow_short_retention: true }
";

fn inventory(dir: &Path, tables: &[(&str, &Path)]) -> InventoryFile {
    let entries: Vec<TableEntry<'_>> = tables
        .iter()
        .map(|(name, path)| TableEntry {
            name,
            path,
            extra: TABLE_EXTRA,
        })
        .collect();
    InventoryFile::write(dir, DEFAULTS, &entries).unwrap()
}

async fn table(path: &Path, partitions: u32) {
    write_small_files(
        path.to_str().unwrap(),
        &SmallFiles {
            partitions,
            files_per_partition: 30,
            rows_per_file: 20_000,
            payload_bytes: 24,
        },
    )
    .await
    .unwrap();
}

/// CPU seconds (user + system) process `pid` has used so far, from `/proc/PID/stat`: what
/// `getrusage` reports for a process, in clock ticks of 10 ms.
fn process_cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // the fields after the command name, which is in parentheses
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

async fn wait_succeeded(pool: &sqlx::PgPool, jobs: &[i64], daemons: &[&Daemon]) {
    wait_until(Duration::from_secs(300), "the jobs to succeed", || async {
        let mut done = 0;
        for job in jobs {
            let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1")
                .bind(job)
                .fetch_one(pool)
                .await
                .unwrap();
            assert!(
                state != "failed",
                "job {job} failed\n{}",
                daemons.iter().map(|d| d.log()).collect::<String>()
            );
            done += usize::from(state == "succeeded");
        }
        done == jobs.len()
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "{e}\n{}",
            daemons.iter().map(|d| d.log()).collect::<String>()
        )
    });
}

async fn result_of(pool: &sqlx::PgPool, job: i64) -> serde_json::Value {
    sqlx::query_scalar("SELECT result FROM jobs WHERE id = $1")
        .bind(job)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_reports_the_cpu_its_process_used_for_it() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let names = ["a", "b", "c", "d", "e", "f"];
    let paths: Vec<PathBuf> = names.iter().map(|n| dir.path().join(n)).collect();
    for (path, partitions) in paths.iter().zip([2, 1, 2, 1, 2, 1]) {
        table(path, partitions).await;
    }
    let tables: Vec<(&str, &Path)> = names
        .iter()
        .copied()
        .zip(paths.iter().map(PathBuf::as_path))
        .collect();
    let inv = inventory(dir.path(), &tables);
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let mut env = daemon_env(&db.url, &inv.path, Duration::from_secs(10), 2);
    // probes only at the start, so the process does nothing but the jobs afterwards
    env.retain(|(k, _)| !k.contains("PROBE_INTERVAL"));
    env.push(("TABLEKEEPER_PROBE_INTERVAL", "1h".into()));
    env.push(("TABLEKEEPER_MAX_PROBE_INTERVAL", "1h".into()));
    let daemon = Daemon::start("r1", dir.path(), &env).unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    // the start-up probes, history reads and damage checks end; then what idling costs
    let mut idle = 0.0;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = process_cpu(daemon.pid());
        tokio::time::sleep(Duration::from_secs(2)).await;
        idle = (process_cpu(daemon.pid()) - before) / 2.0;
        if idle < 0.05 {
            break;
        }
    }

    // one job at a time: the job's CPU against its process's over the job; then a compaction
    // and a Z-order side by side, and two VACUUMs side by side, against their sum
    let mut lines = Vec::new();
    for alone in [("a", "compact"), ("b", "zorder")] {
        measure_phase(&daemon, &pool, idle, &[alone], &mut lines).await;
    }
    // side by side: on a loaded machine the first may end before the second is claimed; then
    // the pair is tried again on two more tables
    let mut side_by_side = false;
    for pair in [
        [("c", "compact"), ("d", "zorder")],
        [("e", "compact"), ("f", "zorder")],
    ] {
        let jobs = measure_phase(&daemon, &pool, idle, &pair, &mut lines).await;
        side_by_side = overlapped(&pool, jobs[0], jobs[1]).await;
        if side_by_side {
            break;
        }
    }
    assert!(
        side_by_side,
        "the compaction and the Z-order ran one after the other, twice\n{}",
        daemon.log()
    );
    let vacuums = [("a", "vacuum"), ("c", "vacuum")];
    measure_phase(&daemon, &pool, idle, &vacuums, &mut lines).await;
    eprintln!("{}", lines.join("\n"));
    stop_all(&mut [daemon], Duration::from_secs(60)).unwrap();
}

/// Triggers `phase`'s jobs at once and checks that the CPU they reported matches what their
/// process used meanwhile (less its `idle` rate); adds a line to `lines`, returns the jobs.
async fn measure_phase(
    daemon: &Daemon,
    pool: &sqlx::PgPool,
    idle: f64,
    phase: &[(&str, &str)],
    lines: &mut Vec<String>,
) -> Vec<i64> {
    let started = std::time::Instant::now();
    let before = process_cpu(daemon.pid());
    let mut jobs = Vec::new();
    for (table, operation) in phase {
        jobs.push(trigger(&daemon.base_url, table, operation).await.unwrap());
    }
    wait_succeeded(pool, &jobs, &[daemon]).await;
    // the probe after each job (its `outcome`, counted as the table's probes) ends
    tokio::time::sleep(Duration::from_millis(500)).await;
    let process = process_cpu(daemon.pid()) - before - idle * started.elapsed().as_secs_f64();
    let mut reported = 0.0;
    for job in &jobs {
        let result = result_of(pool, *job).await;
        assert!(
            result["cost"]["wall_seconds"].as_f64().unwrap() > 0.0,
            "{result:#}"
        );
        assert!(
            result["cost"]["requests"]["get"].as_u64().unwrap() > 0,
            "{result:#}"
        );
        assert_eq!(result["owner"], "fault-suite", "{result:#}");
        reported += result["cost"]["cpu_seconds"].as_f64().unwrap();
    }
    let name = phase
        .iter()
        .map(|(t, o)| format!("{o} {t}"))
        .collect::<Vec<_>>()
        .join(" + ");
    lines.push(format!(
        "{name}: jobs {reported:.3} s, their process {process:.3} s (idle {idle:.3} s/s)"
    ));
    // 10%, and 50 ms: the process's clock ticks are 10 ms, and it also ran the probes
    // after the jobs and its bookkeeping around them
    assert!(
        (reported - process).abs() <= 0.10 * process + 0.05,
        "{name}: the jobs reported {reported:.3} CPU-seconds, their process used \
         {process:.3}\n{}\n{}",
        lines.join("\n"),
        daemon.log()
    );
    jobs
}

/// Whether jobs `a` and `b` ran at the same time for a while.
async fn overlapped(pool: &sqlx::PgPool, a: i64, b: i64) -> bool {
    sqlx::query_scalar(
        "SELECT a.started_at < b.finished_at AND b.started_at < a.finished_at \
         FROM jobs a, jobs b WHERE a.id = $1 AND b.id = $2",
    )
    .bind(a)
    .bind(b)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The value of the series of `name` whose labels include every one of `labels` (written
/// `key="value"`, in any order), 0 when there is none.
fn sample(text: &str, name: &str, labels: &[String]) -> f64 {
    text.lines()
        .filter_map(|line| line.strip_prefix(name)?.strip_prefix('{'))
        .filter_map(|rest| rest.split_once("} "))
        .filter(|(set, _)| {
            let set: Vec<&str> = set.split(',').collect();
            labels.iter().all(|l| set.contains(&l.as_str()))
        })
        .map(|(_, value)| value.trim().parse::<f64>().unwrap())
        .sum()
}

/// Sums of cost fields over operations, keyed by operation.
type Sums = BTreeMap<String, [f64; 9]>;

const FIELDS: [&str; 9] = [
    "cpu_seconds",
    "get",
    "put",
    "list",
    "head",
    "delete",
    "bytes_read",
    "bytes_written",
    "estimated_usd",
];

fn fields_of(cost: &serde_json::Value) -> [f64; 9] {
    FIELDS.map(|f| {
        cost.get(f)
            .or_else(|| cost["requests"].get(f))
            .and_then(serde_json::Value::as_f64)
            .unwrap_or(0.0)
    })
}

fn add(sums: &mut Sums, operation: &str, values: [f64; 9]) {
    let sum = sums.entry(operation.to_owned()).or_insert([0.0; 9]);
    for (s, v) in sum.iter_mut().zip(values) {
        *s += v;
    }
}

fn assert_same(what: &str, a: &Sums, b: &Sums) {
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{what}: other operations\n{a:?}\n{b:?}"
    );
    for (op, x) in a {
        for ((field, x), y) in FIELDS.iter().zip(x).zip(&b[op]) {
            let tolerance = 1e-6 * x.abs().max(1.0);
            assert!(
                (x - y).abs() <= tolerance,
                "{what}: {op} {field}: {x} against {y}\n{a:?}\n{b:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_the_report_and_both_replicas_counters_add_up_alike() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<PathBuf> = ["a", "b", "c"].iter().map(|n| dir.path().join(n)).collect();
    for path in &paths {
        table(path, 4).await;
    }
    let inv = inventory(
        dir.path(),
        &[("a", &paths[0]), ("b", &paths[1]), ("c", &paths[2])],
    );
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let env = daemon_env(&db.url, &inv.path, Duration::from_secs(10), 1);
    let first = Daemon::start("r1", dir.path(), &env).unwrap();
    let second = Daemon::start("r2", dir.path(), &env).unwrap();
    first.wait_ready(Duration::from_secs(60)).await.unwrap();
    second.wait_ready(Duration::from_secs(60)).await.unwrap();

    let mut jobs = Vec::new();
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let replica = if i % 2 == 0 { &first } else { &second };
        jobs.push(trigger(&replica.base_url, name, "compact").await.unwrap());
    }
    wait_succeeded(&pool, &jobs, &[&first, &second]).await;
    let vacuum = trigger(&first.base_url, "a", "vacuum").await.unwrap();
    wait_succeeded(&pool, &[vacuum], &[&first, &second]).await;
    jobs.push(vacuum);
    let spread: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT split_part(worker_id, '/', 1)) FROM job_tasks")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(spread, 2, "both replicas ran tasks");
    let failed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM job_tasks WHERE state <> 'succeeded'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(failed, 0, "every task succeeded at its first try");

    // the operations API, from either replica
    let rows: serde_json::Value = reqwest::get(format!(
        "{}/api/v1/operations?since=1d&limit=1000",
        second.base_url
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let rows = rows["operations"].as_array().unwrap();
    assert_eq!(rows.len(), jobs.len(), "{rows:#?}");
    let mut api = Sums::new();
    for row in rows {
        assert_eq!(row["owner"], "fault-suite", "{row:#}");
        assert!(
            row["outcome"]["before"]["files"].as_u64().is_some(),
            "{row:#}"
        );
        add(
            &mut api,
            row["operation"].as_str().unwrap(),
            fields_of(&row["cost"]),
        );
    }
    let compacted = rows.iter().find(|r| r["operation"] == "compact").unwrap();
    let (before, after) = (
        compacted["outcome"]["before"]["small_files"]
            .as_u64()
            .unwrap(),
        compacted["outcome"]["after"]["small_files"]
            .as_u64()
            .unwrap(),
    );
    assert!(
        after < before,
        "the compaction's outcome shows fewer small files: {compacted:#}"
    );

    // the chargeback report, from the job store
    let report = report_costs_json(&db.url, &["--since", "1d", "--by", "operation"]);
    let mut reported = Sums::new();
    for row in report["rows"].as_array().unwrap() {
        let key = row["key"].as_str().unwrap();
        if key != "probe" {
            add(&mut reported, key, fields_of(&row["cost"]));
        }
    }
    assert_same("report against API", &reported, &api);
    for format in ["csv", "markdown", "text"] {
        let text = report_costs(&db.url, &["--by", "owner", "--format", format]);
        assert!(text.contains("fault-suite"), "{format}: {text}");
    }

    // both replicas' counters, each counting the work it ran itself
    let mut counted = Sums::new();
    for replica in [&first, &second] {
        let text = replica.metrics().await.unwrap();
        for op in ["compact", "vacuum"] {
            let value = |name: &str, extra: &[&str]| {
                let mut wanted = vec![
                    "owner=\"fault-suite\"".to_owned(),
                    format!("operation=\"{op}\""),
                ];
                wanted.extend(extra.iter().map(|e| (*e).to_owned()));
                sample(&text, &format!("tablekeeper_{name}"), &wanted)
            };
            let values = [
                value("maintenance_cpu_seconds_total", &[]),
                value("object_store_requests_total", &["kind=\"get\""]),
                value("object_store_requests_total", &["kind=\"put\""]),
                value("object_store_requests_total", &["kind=\"list\""]),
                value("object_store_requests_total", &["kind=\"head\""]),
                value("object_store_requests_total", &["kind=\"delete\""]),
                value("object_store_bytes_total", &["direction=\"read\""]),
                value("object_store_bytes_total", &["direction=\"written\""]),
                value("maintenance_estimated_cost_usd_total", &[]),
            ];
            add(&mut counted, op, values);
        }
    }
    assert_same("counters against API", &counted, &api);
    // the pull-request view prices a schedule change with what the jobs measured
    let head_dir = dir.path().join("head");
    let head = InventoryFile::write(
        &head_dir,
        &DEFAULTS.replace(
            "compaction: { schedule: \"0 0 1 1 *\"",
            "compaction: { schedule: \"0 * * * *\"",
        ),
        &[
            TableEntry {
                name: "a",
                path: &paths[0],
                extra: TABLE_EXTRA,
            },
            TableEntry {
                name: "b",
                path: &paths[1],
                extra: TABLE_EXTRA,
            },
            TableEntry {
                name: "c",
                path: &paths[2],
                extra: TABLE_EXTRA,
            },
        ],
    )
    .unwrap();
    let out = Command::new(bin_path())
        .args(["plan", "--inventory"])
        .arg(&head.path)
        .arg("--base")
        .arg(&inv.path)
        .args(["--format", "json"])
        .env("TABLEKEEPER_DATABASE_URL", &db.url)
        .output()
        .unwrap();
    let review: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let cost = &review["cost_per_day"]["fault-suite"];
    let (before, after) = (cost["before"].as_f64(), cost["after"].as_f64());
    assert!(
        before.is_some_and(|b| b > 0.0) && after > before,
        "hourly compactions cost more a day than the measured manual ones: {review:#}"
    );
    let rows_in_db: i64 = sqlx::query("SELECT count(*) AS n FROM jobs WHERE result ? 'cost'")
        .fetch_one(&pool)
        .await
        .unwrap()
        .get("n");
    assert_eq!(rows_in_db, jobs.len() as i64);
    stop_all(&mut [first, second], Duration::from_secs(60)).unwrap();
}

/// The kind a request the S3 server logged ("METHOD path?query") counts as. Bulk deletes
/// (`POST /bucket?delete`) name no key and are counted apart.
fn kind_of(line: &str) -> &'static str {
    let (method, rest) = line.split_once(' ').unwrap_or((line, ""));
    let query = rest.split_once('?').map_or("", |(_, q)| q);
    match method {
        "GET" if query.contains("list-type") || query.contains("prefix=") => "list",
        "GET" => "get",
        "HEAD" => "head",
        "PUT" | "POST" => "put",
        "DELETE" => "delete",
        _ => "other",
    }
}

/// Table `t` (owner `s3-team`) on the shared S3 server, under a prefix of its own, with an
/// inventory of it in `dir` (`tables.yaml`) and a job store of its own.
struct S3Table {
    server: &'static tablekeeper_delta::fixtures::peers::S3Server,
    db: TestDatabase,
    dir: tempfile::TempDir,
    /// The table's prefix in the bucket: the server's log lines for it contain it.
    root: String,
    pool: sqlx::PgPool,
}

impl S3Table {
    async fn write(prefix: &str, shape: &SmallFiles, defaults: &str) -> S3Table {
        let server =
            tablekeeper_delta::fixtures::peers::S3Server::shared().expect("moto S3 server");
        let db = TestDatabase::create().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = format!("{prefix}-{}", uuid::Uuid::new_v4());
        let uri = format!("s3://tablekeeper/{root}/t");
        write_small_files(&uri, shape).await.unwrap();
        let yaml = format!(
            "defaults:\n{defaults}tables:\n  - name: t\n    path: \"{uri}\"\n    owner: s3-team\n{TABLE_EXTRA}"
        );
        std::fs::write(dir.path().join("tables.yaml"), yaml).unwrap();
        let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
        S3Table {
            server,
            db,
            dir,
            root,
            pool,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_requests_counted_on_s3_are_the_requests_the_server_answered() {
    let _serial = serial().await;
    let S3Table {
        server,
        db,
        dir,
        root,
        pool,
    } = S3Table::write(
        "costs",
        &SmallFiles {
            partitions: 2,
            files_per_partition: 10,
            rows_per_file: 2_000,
            payload_bytes: 24,
        },
        DEFAULTS,
    )
    .await;
    let mut env = daemon_env(
        &db.url,
        &dir.path().join("tables.yaml"),
        Duration::from_secs(10),
        1,
    );
    // one round of probes at the start, then the jobs alone (and the probes around them)
    env.retain(|(k, _)| !k.contains("PROBE_INTERVAL"));
    env.push(("TABLEKEEPER_PROBE_INTERVAL", "1h".into()));
    env.push(("TABLEKEEPER_MAX_PROBE_INTERVAL", "1h".into()));
    // a bulk delete names its bucket, not its keys: counted apart (tests run one at a time)
    let logged_before = server.requests(&root).unwrap().len();
    let bulk_before = server.requests("?delete").unwrap().len();
    let mut daemon = Daemon::start("r1", dir.path(), &env).unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    let compact = trigger(&daemon.base_url, "t", "compact").await.unwrap();
    wait_succeeded(&pool, &[compact], &[&daemon]).await;
    let vacuum = trigger(&daemon.base_url, "t", "vacuum").await.unwrap();
    wait_succeeded(&pool, &[vacuum], &[&daemon]).await;
    // let the probes after the jobs end, then stop: the last flush stores their costs
    tokio::time::sleep(Duration::from_secs(3)).await;
    daemon.signal("TERM").unwrap();
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(60)).unwrap(),
        Some(0),
        "{}",
        daemon.log()
    );

    let logged = server.requests(&root).unwrap();
    let mut answered: BTreeMap<&str, u64> = BTreeMap::new();
    for line in &logged[logged_before..] {
        *answered.entry(kind_of(line)).or_default() += 1;
    }
    let bulk_deletes = (server.requests("?delete").unwrap().len() - bulk_before) as u64;
    *answered.entry("delete").or_default() += bulk_deletes;
    let report = report_costs_json(&db.url, &["--by", "operation"]);
    let mut counted: BTreeMap<&str, u64> = BTreeMap::new();
    let mut by_operation = Vec::new();
    for row in report["rows"].as_array().unwrap() {
        by_operation.push(format!("{}: {}", row["key"], row["cost"]["requests"]));
        for kind in ["get", "put", "list", "head", "delete"] {
            *counted.entry(kind).or_default() += row["cost"]["requests"][kind].as_u64().unwrap();
        }
    }
    let explain = format!(
        "server answered {answered:?} ({bulk_deletes} of the deletes bulk POSTs); tablekeeper counted \
         {counted:?}: {}",
        by_operation.join("; ")
    );
    // how often the daemon read each commit file (a replica reads its log more than once:
    // the probe, the history read, the damage check, the drill and the jobs each read it)
    let mut reads: BTreeMap<&str, u64> = BTreeMap::new();
    for line in &logged[logged_before..] {
        if let Some(file) = line
            .strip_prefix("GET ")
            .filter(|l| l.contains("_delta_log/") && l.ends_with(".json"))
        {
            *reads.entry(file).or_default() += 1;
        }
    }
    let most = reads.values().max().copied().unwrap_or(0);
    let least = reads.values().min().copied().unwrap_or(0);
    eprintln!("{explain}\ncommit files read {least} to {most} times each over the run");
    assert!(counted["put"] > 0 && counted["delete"] > 0, "{explain}");
    for kind in ["get", "put", "list", "head"] {
        assert_eq!(
            counted[kind],
            answered.get(kind).copied().unwrap_or(0),
            "{kind} requests: {explain}"
        );
    }
    // S3 deletes up to 1,000 objects in one POST; tablekeeper counts each object
    let deleted_objects = counted["delete"];
    let delete_requests = answered.get("delete").copied().unwrap_or(0);
    assert!(
        delete_requests >= deleted_objects.div_ceil(1000) && delete_requests <= deleted_objects,
        "{explain}"
    );
    assert_eq!(answered.get("other"), None, "{explain}");
}

/// A replica meeting a table reads each of its commit files once: the first probe, the
/// history read beside it, the damage check, the restore drill and a checkpoint job all open
/// the table, and all but the first read are answered from the process's shared reads
/// (`crates/delta/src/log/shared_reads.rs`). Counted by the S3 server, which logs every
/// request it answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_meeting_a_table_reads_each_commit_file_once() {
    let _serial = serial().await;
    let defaults = DEFAULTS.replace(
        "checkpoint: { enabled: false }",
        "checkpoint: { schedule: \"0 0 1 1 *\", max_commits_since_checkpoint: 10 }",
    );
    // 65 commits (versions 0 to 64) and no checkpoint: every snapshot load reads them all
    let S3Table {
        server,
        db,
        dir,
        root,
        pool,
    } = S3Table::write(
        "reads",
        &SmallFiles {
            partitions: 0,
            files_per_partition: 65,
            rows_per_file: 100,
            payload_bytes: 16,
        },
        &defaults,
    )
    .await;
    let env = daemon_env(
        &db.url,
        &dir.path().join("tables.yaml"),
        Duration::from_secs(10),
        1,
    );
    let logged_before = server.requests(&root).unwrap().len();
    let mut daemon = Daemon::start("r1", dir.path(), &env).unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    let checkpoint = trigger(&daemon.base_url, "t", "checkpoint").await.unwrap();
    wait_succeeded(&pool, &[checkpoint], &[&daemon]).await;
    // what the checkpoint bought: no commit left to replay after it
    let outcome = result_of(&pool, checkpoint).await["outcome"].clone();
    assert_eq!(
        outcome["before"]["commits_since_checkpoint"], 65,
        "{outcome:#}"
    );
    assert_eq!(
        outcome["after"]["commits_since_checkpoint"], 0,
        "{outcome:#}"
    );
    // a few more probe rounds after the job
    tokio::time::sleep(Duration::from_secs(5)).await;
    daemon.signal("TERM").unwrap();
    assert_eq!(
        daemon.wait_exit(Duration::from_secs(60)).unwrap(),
        Some(0),
        "{}",
        daemon.log()
    );

    let logged = server.requests(&root).unwrap();
    let mut reads: BTreeMap<String, u64> = BTreeMap::new();
    let mut other_log_reads: BTreeMap<String, u64> = BTreeMap::new();
    for line in &logged[logged_before..] {
        let Some(file) = line
            .strip_prefix("GET ")
            .and_then(|path| path.split_once("/_delta_log/"))
            // a listing names the log in its query
            .filter(|(dir, file)| !dir.contains('?') && !file.contains('?'))
            .map(|(_, file)| file)
        else {
            continue;
        };
        let counts = if file.len() == 25 && file.ends_with(".json") {
            &mut reads
        } else {
            &mut other_log_reads
        };
        *counts.entry(file.to_owned()).or_default() += 1;
    }
    eprintln!("commit files read: {reads:?}\nother log files read: {other_log_reads:?}");
    let expected: Vec<String> = (0..65).map(|v| format!("{v:020}.json")).collect();
    assert_eq!(
        reads.keys().cloned().collect::<Vec<_>>(),
        expected,
        "every commit file is read"
    );
    let reread: Vec<_> = reads.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        reread.is_empty(),
        "commit files read more than once: {reread:?}"
    );
}

/// A job that fails keeps what its attempt cost and whom it is charged to: the operations
/// view shows it under its owner, and the owner's chargeback report counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_job_keeps_what_it_cost_and_whom_it_is_charged_to() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a");
    table(&path, 1).await;
    let inv = inventory(dir.path(), &[("a", path.as_path())]);
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let env = daemon_env(&db.url, &inv.path, Duration::from_secs(10), 1);
    let daemon = Daemon::start("r1", dir.path(), &env).unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    // a data file the log still names disappears: the compaction reads the log, then fails
    let partition = std::fs::read_dir(&path)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("day="))
        .unwrap();
    let lost = std::fs::read_dir(partition)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    std::fs::remove_file(&lost).unwrap();
    let job = trigger(&daemon.base_url, "a", "compact").await.unwrap();
    wait_until(
        Duration::from_secs(120),
        "the compaction to fail",
        || async {
            let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1")
                .bind(job)
                .fetch_one(&pool)
                .await
                .unwrap();
            assert_ne!(state, "succeeded", "{}", daemon.log());
            state == "failed"
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let result = result_of(&pool, job).await;
    assert_eq!(result["owner"], "fault-suite", "{result:#}");
    assert!(
        result["cost"]["cpu_seconds"].as_f64().unwrap() > 0.0,
        "{result:#}"
    );
    assert!(
        result["cost"]["wall_seconds"].as_f64().unwrap() > 0.0,
        "{result:#}"
    );
    assert!(
        result["cost"]["requests"]["list"].as_u64().unwrap() > 0,
        "the attempt listed the log: {result:#}"
    );

    let url = format!(
        "{}/api/v1/operations?owner=fault-suite&operation=compact",
        daemon.base_url
    );
    let rows: serde_json::Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
    let row = rows["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["job_id"] == job)
        .unwrap_or_else(|| panic!("the failed job is not under its owner: {rows:#}"));
    assert_eq!(row["state"], "failed");
    assert_eq!(row["cost"], result["cost"]);

    let report = |owner: &str| report_costs_json(&db.url, &["--by", "operation", "--owner", owner]);
    let theirs = report("fault-suite");
    let compact = theirs["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["key"] == "compact")
        .unwrap_or_else(|| panic!("{theirs:#}"));
    assert_eq!(compact["jobs"], 1, "{theirs:#}");
    assert_eq!(
        compact["cost"]["requests"], result["cost"]["requests"],
        "{theirs:#}"
    );
    let nobody = report("nobody");
    assert_eq!(nobody["rows"].as_array().unwrap().len(), 0, "{nobody:#}");
    stop_all(&mut [daemon], Duration::from_secs(60)).unwrap();
}
