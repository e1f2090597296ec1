//! A worker cut off from Postgres mid-rewrite (its connections silently blackholed by a
//! proxy) while another replica's reaper takes the job over: the cut-off worker abandons
//! its rewrite before the takeover, so only one rewrite commits and no row is duplicated
//! (DESIGN.md hazard: two OPTIMIZE rewrites of the same files both commit). The rewrite is
//! a Z-order, the slowest rewrite, so it outlasts the abandon deadline.

use std::time::Duration;

use tablekeeper_delta::fixtures::SmallFiles;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{assert_no_overlap, wait_until};
use tablekeeper_tests::proxy::PgProxy;
use tablekeeper_tests::setup::{
    daemon_env, latest_version, rows, serial, small_file_table, trigger, InventoryFile, TableEntry,
};
use tablekeeper_tests::Daemon;

const DEFAULTS: &str =
    "  compaction: { schedule: \"0 0 1 1 *\", target_file_size: 256MiB, min_small_files: 2 }
  zorder: { schedule: \"0 0 1 1 *\" }
  vacuum: { enabled: false }
  checkpoint: { enabled: false }
  max_attempts: 3
  timeout: 5m
";

/// (version, commit timestamp in ms) of the OPTIMIZE commits after version `after`, from the
/// JSON commits' `commitInfo`, by version.
fn optimize_commits_after(table: &std::path::Path, after: u64) -> Vec<(i64, i64)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(table.join("_delta_log"))
        .unwrap()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(version) = name
            .strip_suffix(".json")
            .and_then(|v| v.parse::<u64>().ok())
        else {
            continue;
        };
        if version <= after {
            continue;
        }
        for line in std::fs::read_to_string(entry.path()).unwrap().lines() {
            let action: serde_json::Value = serde_json::from_str(line).unwrap();
            let info = &action["commitInfo"];
            if info["operation"] == "OPTIMIZE" {
                found.push((version as i64, info["timestamp"].as_i64().unwrap()));
            }
        }
    }
    found.sort_unstable();
    found
}

/// When the test partitions the worker from Postgres.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CutOff {
    /// As soon as the job row says `running`: the worker has claimed it and may still be
    /// talking to the store before it starts the operation.
    AfterClaim,
    /// Once the worker has logged that the rewrite runs.
    MidOperation,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_mid_rewrite_abandons_before_the_takeover() {
    cut_off_scenario(CutOff::MidOperation).await;
}

/// Found by this suite: a worker whose store went silent right after the claim used to
/// start its rewrite seconds later, after the lease had expired and another replica
/// had taken the job over. The abandon deadline now counts from the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_right_after_its_claim_never_starts() {
    cut_off_scenario(CutOff::AfterClaim).await;
}

async fn cut_off_scenario(cut: CutOff) {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("big");
    // Z-ordering it takes about 4 s in a debug build here, well past the abandon deadline
    // (1.5 s for a 2 s lease); Z-order rewrites files exactly like compaction (same hazard)
    // but costs several times more per row, so the table can stay small. Unpartitioned, so
    // the job is one unit that one worker runs whole (a job split into tasks is cut off and
    // taken over task by task: `tasks.rs`).
    let before = small_file_table(
        &table,
        &SmallFiles {
            partitions: 0,
            files_per_partition: 40,
            rows_per_file: 75_000,
            payload_bytes: 24,
        },
    )
    .await
    .unwrap();
    let last_version = latest_version(&table).unwrap();
    let inv = InventoryFile::write(
        dir.path(),
        DEFAULTS,
        &[TableEntry {
            name: "faults.big",
            path: &table,
            extra: "    layout:\n      zorder: [user_id]\n",
        }],
    )
    .unwrap();
    let lease = Duration::from_secs(2);
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let (proxy, proxied_url) = PgProxy::in_front_of(&db.url).await.unwrap();

    let r1 = Daemon::start(
        "r1",
        dir.path(),
        &daemon_env(&proxied_url, &inv.path, lease, 1),
    )
    .unwrap();
    r1.wait_ready(Duration::from_secs(60)).await.unwrap();
    // Mid-rewrite: a Z-order, long enough to outlast the abandon deadline. Right after
    // the claim: a compaction, short enough that a worker wrongly starting it late, while
    // still cut off, could finish it before its (wrongly late) deadline.
    let operation = match cut {
        CutOff::MidOperation => "zorder",
        CutOff::AfterClaim => "compact",
    };
    let job = trigger(&r1.base_url, "faults.big", operation)
        .await
        .unwrap();
    // Poll tightly: the partition must start while the job is r1's.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&pool)
            .await
            .unwrap();
        let ready = match cut {
            CutOff::AfterClaim => state == "running",
            CutOff::MidOperation => r1.log().lines().any(|l| {
                l.contains("tablekeeper_delta::rewrite::optimize: rewriting")
                    && l.contains("operation=zorder")
            }),
        };
        if ready {
            break;
        }
        assert!(
            state == "queued" || state == "running",
            "r1's rewrite ended before it could be cut off: {state}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "r1 never got there; log:\n{}",
            r1.log()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Partition r1 from Postgres mid-rewrite; r2 (direct connection) will reap the job.
    proxy.freeze();
    let r2 = Daemon::start("r2", dir.path(), &daemon_env(&db.url, &inv.path, lease, 1)).unwrap();
    r2.wait_ready(Duration::from_secs(60)).await.unwrap();
    wait_until(Duration::from_secs(120), "the job to end", || async {
        let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&pool)
            .await
            .unwrap();
        state == "succeeded" || state == "failed"
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; r1 log:\n{}\nr2 log:\n{}", r1.log(), r2.log()));
    let (state, error): (String, Option<String>) =
        sqlx::query_as("SELECT state, error FROM jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(state, "succeeded", "the job failed: {error:?}");
    // Give r1 every chance to commit late, then reconnect it.
    tokio::time::sleep(lease * 2).await;
    proxy.thaw();
    tokio::time::sleep(lease).await;

    // Mid-operation the worker must say it abandoned. Cut off right after the claim it
    // either abandons before starting, or its claim call itself hangs until the thaw and
    // then fails: both leave r2 the only compactor, which the checks below establish.
    if cut == CutOff::MidOperation {
        assert!(
            r1.log()
                .contains("abandoning the operation before another replica can take the job over"),
            "r1 did not abandon; log:\n{}",
            r1.log()
        );
    }
    assert_eq!(
        rows(&table).await.unwrap(),
        before,
        "rows duplicated or lost"
    );
    // A compaction commits one bin at a time, a Z-order once: r2's run committed what its
    // job result lists; anything else is r1's, allowed only while r1 still held the lease.
    let commits = optimize_commits_after(&table, last_version);
    let (worker, report): (String, serde_json::Value) =
        sqlx::query_as("SELECT worker_id, result FROM jobs WHERE id = $1")
            .bind(job)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(worker.starts_with("r2/"), "{worker}");
    let by_r2: Vec<i64> = report["commits"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(serde_json::Value::as_i64)
        .collect();
    let by_r1: Vec<(i64, i64)> = commits
        .iter()
        .filter(|(version, _)| !by_r2.contains(version))
        .copied()
        .collect();
    assert!(!commits.is_empty(), "nothing was rewritten");
    if cut == CutOff::MidOperation {
        assert_eq!(
            commits.len(),
            1,
            "exactly one Z-order may commit; r1 log:\n{}",
            r1.log()
        );
    }
    if !by_r1.is_empty() {
        let taken_over: chrono::DateTime<chrono::Utc> = sqlx::query_scalar(
            "SELECT started_at FROM job_attempts WHERE job_id = $1 AND worker_id LIKE 'r2/%'",
        )
        .bind(job)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(
            cut == CutOff::AfterClaim,
            "r1 finished its Z-order before it was cut off: the table is too small for this \
             machine to exercise the race"
        );
        for (version, at) in &by_r1 {
            assert!(
                *at < taken_over.timestamp_millis(),
                "r1 committed version {version} at {at} ms, after r2 took the job over at \
                 {taken_over}: a worker rewrote the table without its lease; r1 log:\n{}",
                r1.log()
            );
        }
    }
    let outcomes: Vec<Option<String>> =
        sqlx::query_scalar("SELECT outcome FROM job_attempts WHERE job_id = $1 ORDER BY attempt")
            .bind(job)
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(
        outcomes,
        vec![
            Some("lost_lease".to_string()),
            Some("succeeded".to_string())
        ]
    );
    assert_no_overlap(&pool).await.unwrap();
    pool.close().await;
    drop((r1, r2, proxy));
    db.drop_db().await.unwrap();
}
