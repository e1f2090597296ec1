//! `tk-bench`: the Rust half of `scripts/bench.sh` (see BENCHMARKS.md).
//!
//! Owns two measurements and nothing else:
//! - `jobs`: claim + complete throughput of the job table, Postgres with several replicas
//!   (separate pools) and the embedded SQLite store with one;
//! - `compact`: tablekeeper's compaction of one small-file table, after preparing two
//!   identical copies of it so the script can time python deltalake and `cp -r` on the
//!   same bytes.
//!
//! It must never touch a database it did not create (Postgres runs go through
//! `TestDatabase`, a fresh `tk_test_*` database dropped at the end) nor a directory
//! outside the `--dir` it is given. Figures go to stdout and to the `--out` JSON file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::json;
use tablekeeper_delta::fixtures::{active_files, write_small_files, SmallFiles};
use tablekeeper_delta::{compact, CompactOptions, DEFAULT_SMALL_FILE_FACTOR};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_store::{connect, JobState, JobStore, NewJob, StoreOptions, Trigger};
use tokio_util::sync::CancellationToken;

const USAGE: &str = "usage:
  tk-bench jobs    [--smoke] [--jobs N] [--out FILE]
  tk-bench compact [--smoke] --dir DIR [--out FILE]";

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

/// Target of the compaction benchmark: 64 MiB, the size the brief compares engines at.
const TARGET_FILE_SIZE: u64 = 64 * 1024 * 1024;

#[derive(Debug, Default)]
struct Args {
    command: String,
    smoke: bool,
    jobs: Option<u64>,
    dir: Option<PathBuf>,
    out: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--smoke" => args.smoke = true,
            "--jobs" => {
                let value = it.next().context("--jobs needs a number")?;
                args.jobs = Some(value.parse().context("--jobs needs a number")?);
            }
            "--dir" => args.dir = Some(it.next().context("--dir needs a path")?.into()),
            "--out" => args.out = Some(it.next().context("--out needs a path")?.into()),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other if args.command.is_empty() && !other.starts_with('-') => {
                args.command = other.to_owned();
            }
            other => bail!("unknown argument {other}\n{USAGE}"),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let figures = match args.command.as_str() {
        "jobs" => bench_jobs(&args).await?,
        "compact" => bench_compact(&args).await?,
        _ => bail!("missing or unknown subcommand\n{USAGE}"),
    };
    let text = serde_json::to_string_pretty(&figures)?;
    println!("{text}");
    if let Some(out) = &args.out {
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(out, text + "\n").with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

async fn bench_jobs(args: &Args) -> Result<serde_json::Value> {
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
async fn run_jobs(
    backend: &str,
    stores: &[Arc<dyn JobStore>],
    jobs: u64,
) -> Result<serde_json::Value> {
    let first = stores.first().context("no store")?;
    for i in 0..jobs {
        let key = format!("bench-key-{}", i % CONCURRENCY_KEYS as u64);
        first
            .enqueue(
                NewJob::new(format!("bench_table_{i}"), "compact", Trigger::Schedule)
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
                            let ok = store
                                .complete(claimed.job.id, claimed.lease_token, json!({}))
                                .await?;
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

async fn bench_compact(args: &Args) -> Result<serde_json::Value> {
    let dir = args.dir.as_deref().context("compact needs --dir DIR")?;
    let spec = if args.smoke {
        SmallFiles {
            partitions: 2,
            files_per_partition: 10,
            rows_per_file: 100,
            payload_bytes: 16,
        }
    } else {
        SmallFiles {
            partitions: 4,
            files_per_partition: 100,
            rows_per_file: 2_000,
            payload_bytes: 16,
        }
    };
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir)?;
    let dir = dir.canonicalize()?;
    let source = dir.join("source");
    let copy_a = dir.join("a");
    let copy_b = dir.join("b");

    let written_at = Instant::now();
    let rows = write_small_files(&path_str(&source)?, &spec).await?;
    eprintln!(
        "wrote {rows} rows into {} small files in {:.1}s",
        spec.partitions * spec.files_per_partition,
        written_at.elapsed().as_secs_f64()
    );
    copy_tree(&source, &copy_a)?;
    copy_tree(&source, &copy_b)?;
    let files_before = active_files(&path_str(&copy_a)?).await?;
    let (data_files, data_bytes) = parquet_size(&source)?;

    let options = CompactOptions {
        target_file_size: TARGET_FILE_SIZE,
        min_small_files: 2,
        small_file_factor: DEFAULT_SMALL_FILE_FACTOR,
        dry_run: false,
        max_conflict_retries: 0,
    };
    let started = Instant::now();
    let report = compact(&path_str(&copy_a)?, &options, &CancellationToken::new()).await?;
    let seconds = started.elapsed().as_secs_f64();
    let files_after = active_files(&path_str(&copy_a)?).await?;
    if report.files_removed != files_before as u64 {
        bail!(
            "compaction removed {} of {files_before} files: the benchmark table should be \
             compacted entirely",
            report.files_removed
        );
    }
    eprintln!(
        "tablekeeper compact: {files_before} -> {files_after} files in {seconds:.2}s \
         ({:.1} MB/s of input)",
        data_bytes as f64 / 1e6 / seconds
    );
    Ok(json!({
        "engine": "tablekeeper",
        "build_profile": if cfg!(debug_assertions) { "debug" } else { "release" },
        "partitions": spec.partitions,
        "files_per_partition": spec.files_per_partition,
        "rows_per_file": spec.rows_per_file,
        "rows": rows,
        "source": source,
        "copy_a": copy_a,
        "copy_b": copy_b,
        "data_files": data_files,
        "data_bytes": data_bytes,
        "files_before": files_before,
        "files_after": files_after,
        "target_file_size": TARGET_FILE_SIZE,
        "seconds": seconds,
        "bytes_removed": report.bytes_removed,
        "bytes_added": report.bytes_added,
    }))
}

fn path_str(path: &Path) -> Result<String> {
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("{} is not valid UTF-8", path.display()))
}

/// `cp -r`, so both copies are byte-identical to the source (log and data alike).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let status = Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .context("running cp")?;
    if !status.success() {
        bail!("cp -r {} {} failed: {status}", from.display(), to.display());
    }
    Ok(())
}

/// Number and total size of the parquet files under `root`.
fn parquet_size(root: &Path) -> Result<(u64, u64)> {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else if entry.path().extension().is_some_and(|e| e == "parquet") {
                files += 1;
                bytes += meta.len();
            }
        }
    }
    Ok((files, bytes))
}
