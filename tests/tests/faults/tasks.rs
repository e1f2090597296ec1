//! One rewrite job spread over three replicas through `job_tasks`, as deployed: two replicas
//! that plan (`role: all`) and one worker (`role: worker`) on one Postgres, a table of twelve
//! partitions. A compaction's twelve tasks run on several replicas at once, each committing its
//! own; `kill -9` of a replica in the middle of a task hands that task to another replica after
//! its lease, and every row is there exactly once through deltalake and python deltalake, no
//! input file removed twice (no task committed twice); the same for Z-order and purge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use sqlx::Row;
use tablekeeper_delta::fixtures::{
    both_readers, delete_with_deletion_vectors, ids_in_parquet_files,
    write_small_files_with_properties, SmallFiles,
};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{assert_no_overlap, wait_until};
use tablekeeper_tests::setup::{
    daemon_env, latest_version, serial, trigger, InventoryFile, TableEntry,
};
use tablekeeper_tests::{logs, metric_value, stop_all, Daemon};

/// Only manual triggers run: every schedule is yearly.
const DEFAULTS: &str =
    "  compaction: { schedule: \"0 0 1 1 *\", target_file_size: 256MiB, min_small_files: 2 }
  zorder: { schedule: \"0 0 1 1 *\" }
  purge: { schedule: \"0 0 1 1 *\" }
  vacuum: { enabled: false }
  checkpoint: { enabled: false }
  max_attempts: 3
  timeout: 5m
";

const PARTITIONS: usize = 12;

/// Twelve partitions of six files each; 20,000 rows a file make a task last about a second in
/// a debug build, long enough to kill a replica inside one.
fn table_spec() -> SmallFiles {
    SmallFiles {
        partitions: PARTITIONS as u32,
        files_per_partition: 6,
        rows_per_file: 20_000,
        payload_bytes: 24,
    }
}

/// The inventory of the one table `t` at `table`, Z-ordered by `user_id`.
fn inventory_of(dir: &Path, table: &Path) -> InventoryFile {
    InventoryFile::write(
        dir,
        DEFAULTS,
        &[TableEntry {
            name: "t",
            path: table,
            extra: "    layout: { zorder: [user_id] }\n",
        }],
    )
    .unwrap()
}

/// What the log says the commits after `after` removed and added, per version.
fn commits_after(root: &Path, after: u64) -> BTreeMap<u64, (Vec<String>, Vec<String>)> {
    let mut out = BTreeMap::new();
    for version in after + 1..=latest_version(root).unwrap() {
        let text =
            std::fs::read_to_string(root.join("_delta_log").join(format!("{version:020}.json")))
                .unwrap();
        let (mut removes, mut adds) = (Vec::new(), Vec::new());
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(path) = action.pointer("/remove/path").and_then(|p| p.as_str()) {
                removes.push(path.to_owned());
            }
            if let Some(path) = action.pointer("/add/path").and_then(|p| p.as_str()) {
                adds.push(path.to_owned());
            }
        }
        out.insert(version, (removes, adds));
    }
    out
}

async fn job_row(
    pool: &sqlx::PgPool,
    id: i64,
) -> (String, Option<String>, Option<serde_json::Value>) {
    let row = sqlx::query("SELECT state, worker_id, result FROM jobs WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap();
    (row.get("state"), row.get("worker_id"), row.get("result"))
}

fn replica_of(worker: &str) -> &str {
    worker.split('/').next().unwrap_or(worker)
}

/// Runs `operation` as tasks on three replicas; with `kill`, kills a replica other than the
/// job's own while it runs a task. Checks rows, commits, the job's report and its progress.
async fn spread(operation: &str, kill: bool) {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let uri = table.to_str().unwrap().to_owned();
    let properties: &[(&str, &str)] = if operation == "purge" {
        &[("delta.enableDeletionVectors", "true")]
    } else {
        &[]
    };
    write_small_files_with_properties(&uri, &table_spec(), properties)
        .await
        .unwrap();
    if operation == "purge" {
        // a few rows of every file deleted by deletion vectors: every file has one to purge
        let ids = ids_in_parquet_files(&table).unwrap();
        let doomed: BTreeSet<i64> = ids.iter().copied().step_by(997).collect();
        delete_with_deletion_vectors(&uri, &doomed).await.unwrap();
    }
    let (before, python_before) = both_readers(&uri).await.unwrap();
    assert_eq!(before.len(), python_before.len());
    let active_before = tablekeeper_tests::setup::active_paths(&table)
        .await
        .unwrap();
    let version_before = latest_version(&table).unwrap();
    let inventory = inventory_of(dir.path(), &table);
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let lease = Duration::from_secs(3);
    let env = daemon_env(&db.url, &inventory.path, lease, 1);
    let mut worker_env = env.clone();
    worker_env.push(("TABLEKEEPER_ROLE", "worker".into()));
    let mut daemons = vec![
        Daemon::start("r1", dir.path(), &env).unwrap(),
        Daemon::start("r2", dir.path(), &env).unwrap(),
        Daemon::start("w3", dir.path(), &worker_env).unwrap(),
    ];
    for d in &daemons {
        d.wait_ready(Duration::from_secs(60)).await.unwrap();
    }
    let job = trigger(&daemons[0].base_url, "t", operation).await.unwrap();

    let mut killed: Option<(String, i32)> = None;
    if kill {
        // the moment a task runs on a replica other than the job's own, kill that replica
        let deadline = Instant::now() + Duration::from_secs(120);
        let (victim, task) = loop {
            let coordinator = job_row(&pool, job).await.1.unwrap_or_default();
            let running: Vec<(i32, String)> = sqlx::query_as(
                "SELECT task, worker_id FROM job_tasks WHERE job_id = $1 AND state = 'running'",
            )
            .bind(job)
            .fetch_all(&pool)
            .await
            .unwrap();
            if let Some((task, worker)) = running
                .into_iter()
                .find(|(_, w)| !coordinator.is_empty() && replica_of(w) != replica_of(&coordinator))
            {
                break (replica_of(&worker).to_owned(), task);
            }
            assert!(
                Instant::now() < deadline,
                "no task ran on another replica than the job's own\n{}",
                logs(&daemons)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let d = daemons.iter_mut().find(|d| d.name == victim).unwrap();
        d.kill_now().unwrap();
        let state: String =
            sqlx::query_scalar("SELECT state FROM job_tasks WHERE job_id = $1 AND task = $2")
                .bind(job)
                .bind(task)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!(state, "running", "the kill landed after the task ended");
        // the job waits for the dead replica's task: its progress is on the table's page
        let page_from = daemons
            .iter()
            .find(|d| d.name != "w3" && d.name != victim)
            .unwrap();
        let page = reqwest::get(format!("{}/tables/t", page_from.base_url))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            page.contains("<progress") && page.contains(&format!("job {job} {operation}")),
            "no progress bar on the table page:\n{page}"
        );
        killed = Some((victim, task));
    }

    let finished = wait_until(Duration::from_secs(240), "the job to succeed", || async {
        job_row(&pool, job).await.0 == "succeeded"
    })
    .await;
    if let Err(e) = finished {
        let tasks: Vec<(i32, String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT task, state, worker_id, error FROM job_tasks WHERE job_id = $1 ORDER BY task",
        )
        .bind(job)
        .fetch_all(&pool)
        .await
        .unwrap();
        panic!(
            "{e}: {:?}\ntasks {tasks:#?}\n{}",
            job_row(&pool, job).await,
            logs(&daemons)
        );
    }

    // every row exactly once, through both readers
    let (after, python_after) = both_readers(&uri).await.unwrap();
    assert!(
        after == before,
        "deltalake reads other rows: {} before, {} after",
        before.len(),
        after.len()
    );
    assert!(
        python_after == python_before,
        "python deltalake reads other rows: {} before, {} after",
        python_before.len(),
        python_after.len()
    );

    // every commit removed files that were active before the job (or, for a partition planned
    // again after a task found its inputs gone, files an earlier task of the job wrote), none
    // twice
    let commits = commits_after(&table, version_before);
    let mut removed = BTreeSet::new();
    let mut added = BTreeSet::new();
    for (version, (removes, adds)) in &commits {
        assert!(
            !adds.is_empty() || operation == "purge",
            "version {version} added nothing"
        );
        for path in removes {
            assert!(
                active_before.contains(path) || added.contains(path),
                "version {version} removed {path}, neither an input nor a file the job wrote"
            );
            assert!(
                removed.insert(path.clone()),
                "{path} removed twice: a task committed twice"
            );
        }
        added.extend(adds.iter().cloned());
    }
    let rewrote_own = removed.iter().any(|p| !active_before.contains(p));
    let partitions: BTreeSet<&str> = removed.iter().filter_map(|p| p.split('/').next()).collect();
    assert_eq!(
        partitions.len(),
        PARTITIONS,
        "every partition rewritten: {partitions:?}"
    );

    // the job's report: twelve tasks, which replica ran which, what each committed
    let result = job_row(&pool, job).await.2.unwrap();
    let tasks = result["tasks"].as_array().unwrap();
    let succeeded: Vec<&serde_json::Value> =
        tasks.iter().filter(|t| t["state"] == "succeeded").collect();
    let by_replica: BTreeSet<&str> = succeeded
        .iter()
        .filter_map(|t| t["worker_id"].as_str())
        .map(replica_of)
        .collect();
    assert!(
        by_replica.len() >= 2,
        "tasks ran on {by_replica:?} only: {result:#}"
    );
    if !kill {
        assert!(
            by_replica.contains("w3"),
            "the worker replica ran no task: {result:#}"
        );
    }
    let reported: BTreeSet<i64> = succeeded
        .iter()
        .flat_map(|t| {
            t["commits"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|v| v.as_i64())
        })
        .collect();
    let logged: BTreeSet<i64> = commits
        .iter()
        .filter(|(_, (removes, _))| !removes.is_empty())
        .map(|(v, _)| i64::try_from(*v).unwrap())
        .collect();
    assert!(
        reported.is_subset(&logged),
        "the report names commits the log lacks: {reported:?} vs {logged:?}"
    );
    if !rewrote_own && tasks.iter().all(|t| t["state"] == "succeeded") {
        assert_eq!(
            result["files_removed"].as_u64(),
            Some(removed.len() as u64),
            "{result:#}"
        );
    }
    if let Some((victim, task)) = &killed {
        let row = tasks.iter().find(|t| t["task"] == *task).unwrap();
        assert!(
            row["attempt"].as_i64().unwrap() >= 2,
            "the killed task ran once: {row}"
        );
        assert!(
            !row["worker_id"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{victim}/")),
            "the killed replica still owns its task: {row}"
        );
        assert!(
            row["state"] == "succeeded" || row["state"] == "replanned",
            "{row}"
        );
    }
    assert_no_overlap(&pool).await.unwrap();

    // progress on the API and the fleet-wide gauge, from a live replica that serves them
    let live = daemons
        .iter()
        .find(|d| d.name != "w3" && killed.as_ref().is_none_or(|(victim, _)| *victim != d.name))
        .unwrap();
    let api = reqwest::get(format!("{}/api/v1/jobs/{job}", live.base_url))
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    let progress = &api["progress"];
    assert_eq!(progress["tasks_done"], progress["tasks_total"], "{api:#}");
    assert_eq!(progress["bytes_done"], progress["bytes_total"], "{api:#}");
    assert!(
        progress["tasks_total"].as_u64().unwrap() >= PARTITIONS as u64,
        "{api:#}"
    );
    let metrics = live.metrics().await.unwrap();
    assert!(
        metric_value(&metrics, "tablekeeper_tasks", "state=\"queued\"").is_some(),
        "tablekeeper_tasks missing"
    );
    stop_all(&mut daemons, Duration::from_secs(30)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_compaction_runs_as_tasks_on_several_replicas_the_worker_among_them() {
    spread("compact", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_task_hands_its_compaction_task_on() {
    spread("compact", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_task_hands_its_zorder_task_on() {
    spread("zorder", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_task_hands_its_purge_task_on() {
    spread("purge", true).await;
}

/// SIGTERM to the replica coordinating a split compaction: from the signal on it claims no
/// task of the job (it had been running them one after another), and once its running task
/// ends it hands the job over at once instead of working through the grace period: the job is
/// queued again with its tasks, the replica exits, and the next replica to claim it resumes
/// the tasks and finishes it, every row there exactly once through both readers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_coordinator_claims_no_task_and_hands_its_job_over() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let uri = table.to_str().unwrap().to_owned();
    write_small_files_with_properties(&uri, &table_spec(), &[])
        .await
        .unwrap();
    let (before, python_before) = both_readers(&uri).await.unwrap();
    let inventory = inventory_of(dir.path(), &table);
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let mut env = daemon_env(&db.url, &inventory.path, Duration::from_secs(3), 1);
    env.retain(|(k, _)| *k != "TABLEKEEPER_SHUTDOWN_GRACE");
    env.push(("TABLEKEEPER_SHUTDOWN_GRACE", "120s".into()));
    let mut first = Daemon::start("r1", dir.path(), &env).unwrap();
    first.wait_ready(Duration::from_secs(60)).await.unwrap();
    let job = trigger(&first.base_url, "t", "compact").await.unwrap();
    // the coordinator is running its own tasks, most still queued
    wait_until(Duration::from_secs(120), "a task to succeed", || async {
        tablekeeper_tests::jobs::count(
            &pool,
            &format!("SELECT count(*) FROM job_tasks WHERE job_id = {job} AND state = 'succeeded'"),
        )
        .await
            >= 1
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", first.log()));
    first.signal("TERM").unwrap();
    let code = first.wait_exit(Duration::from_secs(60)).unwrap();
    assert_eq!(code, Some(0), "{}", first.log());

    // The replica's own log orders what it did: nothing starts after the drain began (a claim
    // in flight when the signal came is given back unstarted). The database's clock cannot
    // say this: a claim between reading it and the signal's delivery is not a claim after it.
    let log = first.log();
    let (_, drained) = log
        .split_once("shutting down: no new jobs")
        .unwrap_or_else(|| panic!("the replica never logged its drain\n{log}"));
    assert_eq!(
        drained.matches("task started").count(),
        0,
        "the draining coordinator started tasks after SIGTERM\n{log}"
    );
    let (state, _, _) = job_row(&pool, job).await;
    assert_eq!(
        state,
        "queued",
        "handed over, not run to the end\n{}",
        first.log()
    );
    let queued = tablekeeper_tests::jobs::count(
        &pool,
        &format!("SELECT count(*) FROM job_tasks WHERE job_id = {job} AND state = 'queued'"),
    )
    .await;
    assert!(queued >= 1, "tasks left for the next replica");
    assert!(
        first
            .log()
            .contains("handing the job and its queued tasks over"),
        "{}",
        first.log()
    );

    let second = Daemon::start("r2", dir.path(), &env).unwrap();
    second.wait_ready(Duration::from_secs(60)).await.unwrap();
    wait_until(
        Duration::from_secs(240),
        "the next replica to finish the job",
        || async { job_row(&pool, job).await.0 == "succeeded" },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", second.log()));
    let (after, python_after) = both_readers(&uri).await.unwrap();
    assert!(after == before, "deltalake reads other rows");
    assert!(
        python_after == python_before,
        "python deltalake reads other rows"
    );
    stop_all(&mut [second], Duration::from_secs(60)).unwrap();
}
