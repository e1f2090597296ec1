//! `tk-bench tasks`: one compaction of a many-partition table run as tasks by several replicas
//! of the real `tablekeeper run` on one Postgres job store, next to a copy of the table for
//! the script to time python deltalake's `optimize.compact()` on.
//!
//! Figures: the job's wall time; each task's time (its `job_tasks` start to finish) and which
//! replica ran it; the time from the job's start to its first task (planning); the job-store
//! cost of one task (claim, one heartbeat and its end, timed on the same store apart from any
//! rewrite) against the tasks' rewrite time; and, since this machine has two cores, the wall
//! time N pods would take, estimated by scheduling the measured task times longest-first onto N
//! workers plus the planning time and N-independent per-task overhead (an estimate, said so).
//!
//! It never touches a database it did not create (a fresh `tk_test_*` database, dropped at the
//! end) nor a directory outside `--dir`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use tablekeeper_delta::fixtures::{write_small_files, SmallFiles};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_store::{connect, NewJob, Operation, StoreOptions, TaskEnd, Trigger};

use crate::util::{
    copy_tree, fresh_dir, median, parquet_size, path_str, secs, wait_ready, Replica,
};
use crate::Args;

const TOKEN: &str = "tk-bench-tasks";
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const JOB_TIMEOUT: Duration = Duration::from_secs(1800);
/// Store round trips timed for the per-task overhead.
const OVERHEAD_TASKS: usize = 200;

pub async fn bench_tasks(args: &Args) -> Result<serde_json::Value> {
    let dir = fresh_dir(args.dir.as_deref().context("tasks needs --dir")?)?;
    let binary = args
        .tablekeeper
        .as_deref()
        .context("tasks needs --tablekeeper BIN")?;
    let replicas = args.replicas.unwrap_or(3).max(1);
    let spec = if args.smoke {
        SmallFiles {
            partitions: 4,
            files_per_partition: 4,
            rows_per_file: 2_000,
            payload_bytes: 24,
        }
    } else {
        SmallFiles {
            partitions: 12,
            files_per_partition: 10,
            rows_per_file: args.rows_per_file.unwrap_or(20_000),
            payload_bytes: 24,
        }
    };
    let table = dir.join("table");
    eprintln!(
        "tasks: writing {} partitions x {} files of {} rows",
        spec.partitions, spec.files_per_partition, spec.rows_per_file
    );
    write_small_files(&path_str(&table)?, &spec).await?;
    let python_copy = dir.join("table-python");
    copy_tree(&table, &python_copy)?;
    let (files_before, bytes_before) = parquet_size(&table)?;
    let inventory = dir.join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "defaults:\n  compaction: {{ schedule: \"0 0 1 1 *\", target_file_size: 256MiB, min_small_files: 2 }}\n  \
             zorder: {{ enabled: false }}\n  vacuum: {{ enabled: false }}\n  checkpoint: {{ enabled: false }}\n\
             tables:\n  - {{ name: bench, path: {}, owner: bench }}\n",
            table.display()
        ),
    )?;

    let db = TestDatabase::create().await?;
    let measured = run(binary, &dir, &inventory, &db.url, replicas).await;
    let overhead = if measured.is_ok() {
        task_overhead(&db.url).await
    } else {
        Ok(json!(null))
    };
    db.drop_db().await?;
    let measured = measured?;
    let overhead = overhead?;
    let per_task_ms = overhead["per_task_ms"].as_f64().unwrap_or(0.0);

    let durations: Vec<f64> = measured["task_seconds"]
        .as_array()
        .map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default();
    let planning = measured["planning_seconds"].as_f64().unwrap_or(0.0);
    let estimates: Vec<serde_json::Value> = [1usize, 2, 3, 4, 6, 8, 12, 16]
        .iter()
        .map(|&pods| {
            let makespan = longest_first(&durations, pods);
            let rounds = durations.len().div_ceil(pods) as f64;
            json!({
                "pods": pods,
                "estimated_seconds": planning + makespan + rounds * per_task_ms / 1000.0,
            })
        })
        .collect();
    let rewrite_total: f64 = durations.iter().sum();
    Ok(json!({
        "build": crate::build_profile(),
        "replicas": replicas,
        "partitions": spec.partitions,
        "files_before": files_before,
        "mb_before": bytes_before as f64 / 1e6,
        "python_copy": path_str(&python_copy)?,
        "job": measured,
        "overhead": overhead,
        "task_median_seconds": median(&durations),
        "rewrite_seconds_total": rewrite_total,
        "overhead_share": if rewrite_total > 0.0 {
            durations.len() as f64 * per_task_ms / 1000.0 / rewrite_total
        } else { 0.0 },
        "estimates": estimates,
    }))
}

/// The makespan of `durations` scheduled longest first onto `workers` (LPT).
fn longest_first(durations: &[f64], workers: usize) -> f64 {
    let mut sorted = durations.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let mut loads = vec![0.0f64; workers.max(1)];
    for d in sorted {
        if let Some(least) = loads.iter_mut().min_by(|a, b| a.total_cmp(b)) {
            *least += d;
        }
    }
    loads.into_iter().fold(0.0, f64::max)
}

/// Starts the replicas (the first two plan, the rest are workers; one worker slot each),
/// triggers one compaction, waits for it and reads its tasks back.
async fn run(
    binary: &Path,
    dir: &Path,
    inventory: &Path,
    database_url: &str,
    replicas: usize,
) -> Result<serde_json::Value> {
    let client = reqwest::Client::new();
    let mut started = Vec::new();
    for index in 0..replicas {
        let role = if index < 2 { "all" } else { "worker" };
        started.push(start(binary, dir, inventory, database_url, index, role)?);
    }
    for replica in &mut started {
        wait_ready(&client, replica, Instant::now(), READY_TIMEOUT).await?;
    }
    let clock = Instant::now();
    let job: serde_json::Value = client
        .post(format!("{}/api/v1/tables/bench/jobs", started[0].base))
        .bearer_auth(TOKEN)
        .json(&json!({"operation": "compact"}))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let id = job["job"]["id"]
        .as_i64()
        .with_context(|| format!("the trigger returned no job id: {job}"))?;
    let detail = loop {
        let detail: serde_json::Value = client
            .get(format!("{}/api/v1/jobs/{id}", started[0].base))
            .send()
            .await?
            .json()
            .await?;
        match detail["job"]["state"].as_str() {
            Some("succeeded") => break detail,
            Some("failed" | "cancelled") => bail!("the job ended {detail:#}"),
            _ => {}
        }
        if clock.elapsed() > JOB_TIMEOUT {
            bail!("the job did not finish within {JOB_TIMEOUT:?}: {detail:#}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let wall = secs(clock);
    for replica in &started {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(replica.child.id().to_string())
            .status();
    }
    let time = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    let job_started = time(&detail["job"]["started_at"]).context("the job has no start")?;
    let tasks = detail["tasks"].as_array().cloned().unwrap_or_default();
    let mut task_seconds = Vec::new();
    let mut per_replica: std::collections::BTreeMap<String, usize> = Default::default();
    let mut first_start = None;
    for task in &tasks {
        if task["state"] != "succeeded" {
            continue;
        }
        let (Some(from), Some(to)) = (time(&task["started_at"]), time(&task["finished_at"])) else {
            continue;
        };
        first_start = Some(first_start.map_or(from, |f: chrono::DateTime<_>| f.min(from)));
        task_seconds.push((to - from).num_milliseconds() as f64 / 1000.0);
        let replica = task["worker_id"]
            .as_str()
            .and_then(|w| w.split('/').next())
            .unwrap_or("?")
            .to_owned();
        *per_replica.entry(replica).or_default() += 1;
    }
    let planning = first_start.map_or(0.0, |f| {
        (f - job_started).num_milliseconds() as f64 / 1000.0
    });
    eprintln!(
        "tasks: {} tasks on {:?} in {wall:.2}s (planning {planning:.2}s, median task {:.2}s)",
        task_seconds.len(),
        per_replica,
        median(&task_seconds)
    );
    Ok(json!({
        "id": id,
        "wall_seconds": wall,
        "planning_seconds": planning,
        "tasks": task_seconds.len(),
        "task_seconds": task_seconds,
        "tasks_per_replica": per_replica,
        "files_removed": detail["job"]["result"]["files_removed"],
        "files_added": detail["job"]["result"]["files_added"],
        "progress": detail["progress"],
    }))
}

fn start(
    binary: &Path,
    dir: &Path,
    inventory: &Path,
    database_url: &str,
    index: usize,
    role: &str,
) -> Result<Replica> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let log = dir.join(format!("replica-{index}.log"));
    let child = Command::new(binary)
        .arg("run")
        .env("TABLEKEEPER_DATABASE_URL", database_url)
        .env("TABLEKEEPER_INVENTORY", inventory)
        .env("TABLEKEEPER_LISTEN", format!("127.0.0.1:{port}"))
        .env("TABLEKEEPER_REPLICA_ID", format!("bench-{index}"))
        .env("TABLEKEEPER_ROLE", role)
        .env("TABLEKEEPER_WORKERS", "1")
        .env("TABLEKEEPER_POLL_INTERVAL", "200ms")
        .env("TABLEKEEPER_ADMIN_TOKEN", TOKEN)
        .env("TABLEKEEPER_SHUTDOWN_GRACE", "10s")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting tablekeeper run")?;
    Ok(Replica {
        child,
        base: format!("http://127.0.0.1:{port}"),
        log,
    })
}

/// The job store's cost of one task on the same Postgres, without any rewrite: claim, one
/// heartbeat, end (a task of a few minutes heartbeats every lease/4, 15 s by default, so a
/// long task adds one heartbeat per 15 s on top).
async fn task_overhead(database_url: &str) -> Result<serde_json::Value> {
    let store = connect(database_url, StoreOptions::default()).await?;
    store
        .enqueue(NewJob::new("overhead", Operation::Compact, Trigger::Manual))
        .await?;
    let job = store
        .claim("bench/overhead", Duration::from_secs(300))
        .await?
        .job
        .context("no job to claim")?;
    let inputs: Vec<serde_json::Value> = (0..OVERHEAD_TASKS)
        .map(|n| json!({"partition": format!("p={n}"), "values": [], "files": [format!("{n}.parquet")], "bytes": 1, "version": 0}))
        .collect();
    let add = Instant::now();
    store
        .add_tasks(&job.lease, 3, &inputs)
        .await?
        .context("the job's lease was lost")?;
    let add_seconds = secs(add);
    let mut claims = Vec::new();
    let mut heartbeats = Vec::new();
    let mut ends = Vec::new();
    for _ in 0..OVERHEAD_TASKS {
        let t = Instant::now();
        let task = store
            .claim_task("bench/overhead", Duration::from_secs(300), None)
            .await?
            .context("a task to claim")?;
        claims.push(secs(t) * 1000.0);
        let t = Instant::now();
        store
            .heartbeat_task(&task.lease, Duration::from_secs(300))
            .await?
            .context("the task's lease was lost")?;
        heartbeats.push(secs(t) * 1000.0);
        let t = Instant::now();
        store
            .end_task(
                &task.lease,
                TaskEnd::Succeeded(json!({"worker_id": "tk-bench", "report": {}})),
            )
            .await?;
        ends.push(secs(t) * 1000.0);
    }
    store.close().await;
    let (claim, heartbeat, end) = (median(&claims), median(&heartbeats), median(&ends));
    Ok(json!({
        "tasks": OVERHEAD_TASKS,
        "add_tasks_ms_per_task": add_seconds * 1000.0 / OVERHEAD_TASKS as f64,
        "claim_ms": claim,
        "heartbeat_ms": heartbeat,
        "end_ms": end,
        "per_task_ms": claim + heartbeat + end,
    }))
}
