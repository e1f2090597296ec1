//! Many replicas under random `kill -9` and restarts: 4 replicas × 2 workers, a dozen
//! tables (some sharing a concurrency key) on second-level schedules, writers feeding them
//! small files. For a bounded time a random replica is killed every few seconds and
//! restarted. Afterwards: no two attempts on one key ever overlapped, every attempt of a
//! killed replica was closed by a reaper, every job ends terminal or queued, every table
//! was compacted after the last kill (staleness keeps falling), and no row was lost or
//! duplicated.

use std::time::{Duration, Instant};

use rand::Rng;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{assert_no_overlap, assert_settled, count, wait_until};
use tablekeeper_tests::setup::{daemon_env, serial, InventoryFile, TableEntry};
use tablekeeper_tests::writer::ModelWriter;
use tablekeeper_tests::{logs, stop_all, Daemon};

const TABLES: usize = 12;
const REPLICAS: usize = 4;
const CHAOS: Duration = Duration::from_secs(40);

const DEFAULTS: &str =
    "  compaction: { schedule: \"*/2 * * * * *\", target_file_size: 64MiB, min_small_files: 2 }
  zorder: { enabled: false }
  vacuum: { enabled: false }
  checkpoint: { schedule: \"*/3 * * * * *\", max_commits_since_checkpoint: 4 }
  max_attempts: 10
  timeout: 2m
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_replicas_under_random_kills_keep_every_guarantee() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..TABLES).map(|i| format!("chaos.t{i:02}")).collect();
    let paths: Vec<_> = names.iter().map(|n| dir.path().join(n)).collect();
    let mut writers = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        writers.push(ModelWriter::create(path, i % 2 == 0, 2, 100).await.unwrap());
    }
    // Every third table shares one key: at most one of them is maintained at a time.
    let extras: Vec<&str> = (0..TABLES)
        .map(|i| {
            if i % 3 == 0 {
                "    concurrency_key: chaos-shared\n"
            } else {
                ""
            }
        })
        .collect();
    let entries: Vec<TableEntry<'_>> = (0..TABLES)
        .map(|i| TableEntry {
            name: &names[i],
            path: &paths[i],
            extra: extras[i],
        })
        .collect();
    let inv = InventoryFile::write(dir.path(), DEFAULTS, &entries).unwrap();
    let env = daemon_env(&db.url, &inv.path, Duration::from_secs(3), 2);
    let mut generation = [0u32; REPLICAS];
    let start = |i: usize, g: u32| Daemon::start(&format!("r{i}g{g}"), dir.path(), &env).unwrap();
    let mut replicas: Vec<Daemon> = (0..REPLICAS).map(|i| start(i, 0)).collect();
    for r in &replicas {
        r.wait_ready(Duration::from_secs(60)).await.unwrap();
    }
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();

    let mut killed: Vec<String> = Vec::new();
    let began = Instant::now();
    let mut next_kill = Instant::now() + Duration::from_secs(2);
    let mut rng = rand::rng();
    let mut round = 0usize;
    while began.elapsed() < CHAOS {
        // feed one table a small file per round
        // enough rows that a compaction takes tens of milliseconds, so kills land mid-job
        writers[round % TABLES].append(2_000).await.unwrap();
        round += 1;
        if Instant::now() >= next_kill {
            // Every other kill aims at a replica that is running a job right now, so
            // takeovers are exercised on every run, not by luck.
            let busy: Vec<String> =
                sqlx::query_scalar("SELECT worker_id FROM jobs WHERE state = 'running'")
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            let busy_replica = busy.iter().find_map(|worker| {
                replicas
                    .iter()
                    .position(|r| worker.starts_with(&format!("{}/", r.name)))
            });
            let i = match busy_replica {
                Some(i) if killed.len().is_multiple_of(2) => i,
                _ => rng.random_range(0..REPLICAS),
            };
            replicas[i].kill_now().unwrap();
            killed.push(replicas[i].name.clone());
            // restart after a moment, under a new name so its attempts are told apart
            tokio::time::sleep(Duration::from_millis(rng.random_range(200..1500))).await;
            generation[i] += 1;
            replicas[i] = start(i, generation[i]);
            next_kill = Instant::now() + Duration::from_millis(rng.random_range(1500..4000));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let last_kill_done: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(killed.len() >= 8, "only {} kills", killed.len());
    for w in &mut writers {
        w.append(20).await.unwrap(); // new small files for the post-chaos compactions
    }

    // Reapers close every attempt of the killed incarnations; every table gets compacted.
    let killed_pattern: Vec<String> = killed.iter().map(|k| format!("{k}/%")).collect();
    wait_until(Duration::from_secs(120), "recovery from the kills", || async {
        let open_by_dead: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM job_attempts WHERE outcome IS NULL AND worker_id LIKE ANY($1)",
        )
        .bind(&killed_pattern)
        .fetch_one(&pool)
        .await
        .unwrap();
        let compacted: i64 = sqlx::query_scalar(
            "SELECT count(DISTINCT table_name) FROM jobs WHERE operation = 'compact' AND state = 'succeeded' AND finished_at > $1",
        )
        .bind(last_kill_done)
        .fetch_one(&pool)
        .await
        .unwrap();
        open_by_dead == 0 && compacted == TABLES as i64
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; logs:\n{}", logs(&replicas)));

    stop_all(&mut replicas, Duration::from_secs(40)).unwrap();
    assert_settled(&pool).await.unwrap();
    let lost = count(
        &pool,
        "SELECT count(*) FROM job_attempts WHERE outcome = 'lost_lease'",
    )
    .await;
    assert!(
        lost >= 1,
        "no kill hit a running job: the scenario proved nothing; attempts by outcome: {:?}; killed {killed:?}",
        sqlx::query_as::<_, (Option<String>, String, i64)>("SELECT outcome, split_part(worker_id, '/', 1), count(*) FROM job_attempts GROUP BY 1, 2 ORDER BY 2").fetch_all(&pool).await.unwrap()
    );
    let checked = assert_no_overlap(&pool).await.unwrap();
    assert!(checked > 50, "only {checked} attempts");
    for w in &writers {
        w.check().await.unwrap();
    }
    pool.close().await;
    db.drop_db().await.unwrap();
}
