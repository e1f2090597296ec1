//! `tk-bench jobs`: claim + complete throughput of the job table, Postgres with several
//! replicas (separate pools) and the embedded SQLite store with one.
//!
//! Postgres runs go through `TestDatabase` (a fresh `tk_test_*` database, dropped at the
//! end); SQLite runs use a temporary file. It never touches a database it did not create.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_store::{connect, JobState, JobStore, NewJob, Operation, StoreOptions, Trigger};

use crate::Args;

/// Replicas sharing the Postgres job table: the smallest fleet where claims from
/// different pools contend on the same rows (the brief's benchmark shape).
const PG_REPLICAS: usize = 4;
/// Concurrent workers per replica, a daemon's default worker count order of magnitude.
const WORKERS_PER_REPLICA: usize = 4;
/// Distinct concurrency keys: many more than the 16 workers, so workers rarely wait on a
/// key, as in a fleet where most tables have their own key.
const CONCURRENCY_KEYS: usize = 64;
/// Long enough that no lease expires during a run; the reaper plays no part here.
const LEASE: Duration = Duration::from_secs(300);

pub async fn bench_jobs(args: &Args) -> Result<serde_json::Value> {
    // Smoke: enough jobs to exercise every key a few times, done in seconds.
    let jobs = args.jobs.unwrap_or(if args.smoke { 300 } else { 5_000 });

    let db = TestDatabase::create().await?;
    let postgres = async {
        let mut stores = Vec::new();
        for _ in 0..PG_REPLICAS {
            let opts = StoreOptions {
                max_connections: WORKERS_PER_REPLICA as u32,
                ..StoreOptions::default()
            };
            stores.push(connect(&db.url, opts).await?);
        }
        stores[0].migrate().await?;
        run_jobs("postgres", &stores, jobs).await
    }
    .await;
    db.drop_db().await?;
    let postgres = postgres?;

    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let sqlite_store = connect(&url, StoreOptions::default()).await?;
    sqlite_store.migrate().await?;
    let sqlite = run_jobs("sqlite", &[sqlite_store], jobs).await?;

    Ok(json!({ "postgres": postgres, "sqlite": sqlite }))
}

/// Enqueues `jobs` jobs on distinct tables, then times every replica's workers claiming and
/// completing until all have succeeded.
async fn run_jobs(backend: &str, stores: &[Arc<JobStore>], jobs: u64) -> Result<serde_json::Value> {
    let first = stores.first().context("no store")?;
    for i in 0..jobs {
        let key = format!("bench-key-{}", i % CONCURRENCY_KEYS as u64);
        first
            .enqueue(
                NewJob::new(
                    format!("bench_table_{i}"),
                    Operation::Compact,
                    Trigger::Schedule,
                )
                .with_concurrency_key(key),
            )
            .await?;
    }

    let done = Arc::new(AtomicU64::new(0));
    let empty_claims = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for (r, store) in stores.iter().enumerate() {
        for w in 0..WORKERS_PER_REPLICA {
            let store = Arc::clone(store);
            let done = Arc::clone(&done);
            let empty_claims = Arc::clone(&empty_claims);
            let worker_id = format!("bench-replica-{r}/worker-{w}");
            workers.spawn(async move {
                while done.load(Ordering::Relaxed) < jobs {
                    let outcome = store.claim(&worker_id, LEASE).await?;
                    match outcome.job {
                        Some(claimed) => {
                            let ok = store.complete(&claimed.lease, json!({})).await?;
                            if !ok {
                                bail!("job {} lost its lease mid-benchmark", claimed.job.id);
                            }
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        None => {
                            // Every due job's key is running elsewhere (or the queue is
                            // drained): let the other workers finish theirs first.
                            empty_claims.fetch_add(1, Ordering::Relaxed);
                            tokio::task::yield_now().await;
                        }
                    }
                }
                Ok(())
            });
        }
    }
    while let Some(joined) = workers.join_next().await {
        joined??;
    }
    let seconds = started.elapsed().as_secs_f64();

    let counts = first.counts_by_state().await?;
    let succeeded = counts.get(&JobState::Succeeded).copied().unwrap_or(0);
    if u64::try_from(succeeded)? != jobs {
        bail!("{backend}: {succeeded} jobs succeeded, expected {jobs}: {counts:?}");
    }
    for store in stores {
        store.close().await;
    }
    let per_sec = jobs as f64 / seconds;
    eprintln!("{backend}: {jobs} jobs claimed+completed in {seconds:.2}s = {per_sec:.0} jobs/s");
    Ok(json!({
        "backend": backend,
        "replicas": stores.len(),
        "workers_per_replica": WORKERS_PER_REPLICA,
        "concurrency_keys": CONCURRENCY_KEYS,
        "jobs": jobs,
        "seconds": seconds,
        "jobs_per_sec": per_sec,
        "empty_claims": empty_claims.load(Ordering::Relaxed),
    }))
}
