//! `tk-bench fleet`: replicas of the real `tablekeeper` binary (one by default, `--replicas
//! N` on one job store) against inventories of growing size (default 10, 1,000 and 10,000
//! tables; smoke 10 and 100).
//!
//! The tables are tiny real Delta tables: one template (one commit, one data file,
//! unpartitioned) is written with the delta crate's fixtures, and every fleet table is a
//! copy of it made of hard links (log and data file alike; Delta never rewrites a file in
//! place, so the copies stay independent). Schedules are daily or weekly at night so the
//! replica idles. For each size this measures:
//! - `tablekeeper validate` wall time;
//! - start-up: process start to `/readyz` 200, and to the "tablekeeper started" log line
//!   (after the cron schedules are registered);
//! - the first probe round: process start until every table has a probe on every replica
//!   (`tablekeeper_table_version` series count; replicas share the probing);
//! - RSS at ready and after settling (after the first probe round and a pause), peak RSS,
//!   and CPU used while idle (the first replica's; settled RSS and idle CPU of each);
//! - RSS once idle: after the settle window, when the first replica has used under 5% of a
//!   core for 2 s (the history reads and damage checks left from the first round are done),
//!   and how long after the settle window that came;
//! - `/metrics` scrape time (median of 5) and size, as plain text and as Prometheus fetches
//!   it (gzip: the bytes on the wire);
//! - the dashboard's front page and one table's page: time (median of 5) and size;
//! - enqueueing one job per table through the store API (`connect` + `enqueue`) on a
//!   fresh Postgres database and on a fresh SQLite file;
//! - in this process, after the replicas: the RSS one `Prober` holding every table loaded
//!   adds (the daemon keeps at most `loaded_snapshots` loaded).
//!
//! The replica uses a fresh `tk_test_*` Postgres database, dropped at the end; every file
//! goes under `--dir`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use tablekeeper_delta::fixtures::{write_small_files, SmallFiles};
use tablekeeper_delta::{ProbeOptions, Prober};
use tablekeeper_inventory::defaults::COMPACTION_TARGET_FILE_SIZE;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_store::{connect, NewJob, Operation, StoreOptions, Trigger};

use crate::util::{
    cpu_seconds, fresh_dir, median, own_rss_mb, path_str, proc_status_kb, secs, wait_ready, Replica,
};
use crate::Args;

/// Longest wait for `/readyz`, and for the first probe round per 1,000 tables.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
const PROBE_ROUND_TIMEOUT_PER_1000: Duration = Duration::from_secs(120);
/// How often the first probe round's progress is read from `/metrics`: every 50 ms per 1,000
/// tables (5 s at 100,000), at least every 100 ms.
fn poll_interval(tables: usize) -> Duration {
    Duration::from_millis(u64::try_from(tables / 20).unwrap_or(u64::MAX).max(100))
}

/// Scrapes of `/metrics` per size (the median is reported).
const SCRAPES: usize = 5;

/// A replica is quiet when it used under this share of a core over [`QUIET_WINDOW`].
const QUIET_CPU_SHARE: f64 = 0.05;
const QUIET_WINDOW: Duration = Duration::from_secs(2);
/// Longest wait for a replica to become quiet after the settle window, per 1,000 tables.
const QUIET_TIMEOUT_PER_1000: Duration = Duration::from_secs(30);

/// Waits until `pid` uses under [`QUIET_CPU_SHARE`] of a core over one [`QUIET_WINDOW`], at
/// most `timeout`; returns the seconds waited, `None` when it never became quiet.
async fn wait_quiet(pid: u32, timeout: Duration) -> Option<f64> {
    let started = Instant::now();
    while started.elapsed() < timeout {
        let before = cpu_seconds(pid)?;
        tokio::time::sleep(QUIET_WINDOW).await;
        let used = cpu_seconds(pid)? - before;
        if used < QUIET_CPU_SHARE * QUIET_WINDOW.as_secs_f64() {
            return Some(secs(started));
        }
    }
    None
}

pub async fn bench_fleet(args: &Args) -> Result<Value> {
    let dir = args.dir.as_deref().context("fleet needs --dir DIR")?;
    let binary = args
        .tablekeeper
        .as_deref()
        .context("fleet needs --tablekeeper PATH (the built tablekeeper binary)")?;
    if !binary.is_file() {
        bail!(
            "{} does not exist: build it with `cargo build --workspace --bins`",
            binary.display()
        );
    }
    let sizes = args.sizes.clone().unwrap_or_else(|| {
        if args.smoke {
            vec![10, 100]
        } else {
            vec![10, 1_000, 10_000]
        }
    });
    let settle = Duration::from_secs(if args.smoke { 1 } else { 5 });
    let idle_window = Duration::from_secs(if args.smoke { 2 } else { 10 });
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let replicas = args.replicas.unwrap_or(1).max(1);

    let dir = fresh_dir(dir)?;
    let t = Instant::now();
    let tables = make_tables(&dir, largest).await?;
    eprintln!(
        "fleet: {largest} tables (hard-linked copies of one template) in {:.1}s",
        secs(t)
    );

    let mut results = Vec::new();
    for &n in &sizes {
        let inventory = dir.join(format!("inventory-{n}.yaml"));
        write_inventory(&inventory, &tables[..n])?;
        let run = Run {
            binary,
            dir: &dir,
            inventory: &inventory,
            tables: n,
            replicas,
            settle,
            idle_window,
        };
        let figures = measure_size(&run).await?;
        results.push(figures);
    }
    let prober = prober_memory(&tables).await?;
    Ok(json!({
        "build_profile": crate::build_profile(),
        "tablekeeper": binary,
        "prober_in_process": prober,
        "tables": "hard-linked copies of one unpartitioned template table (1 commit, 1 file)",
        "replicas": replicas,
        "sizes": results,
    }))
}

/// `errno` for "too many links".
const EMLINK: i32 = 31;

/// The template table and `n` hard-linked copies of it; returns the copies' paths.
async fn make_tables(dir: &Path, n: usize) -> Result<Vec<PathBuf>> {
    let template = dir.join("template");
    let spec = SmallFiles {
        partitions: 0,
        files_per_partition: 1,
        rows_per_file: 10,
        payload_bytes: 16,
    };
    write_small_files(&path_str(&template)?, &spec).await?;
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for entry in std::fs::read_dir(template.join(&rel))? {
            let entry = entry?;
            let path = rel.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    let tables_dir = dir.join("tables");
    let mut tables = Vec::with_capacity(n);
    for i in 0..n {
        let table = tables_dir.join(format!("t{i:05}"));
        for rel in &files {
            let target = table.join(rel);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            // ext4 allows 65,000 links to a file: past that, copies (a few KB each)
            match std::fs::hard_link(template.join(rel), &target) {
                Err(e) if e.raw_os_error() == Some(EMLINK) => {
                    std::fs::copy(template.join(rel), &target).map(drop)
                }
                linked => linked,
            }
            .with_context(|| format!("linking {}", target.display()))?;
        }
        tables.push(table);
    }
    Ok(tables)
}

fn write_inventory(path: &Path, tables: &[PathBuf]) -> Result<()> {
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    // nightly/weekly schedules: nothing fires during a run (unless it straddles 01:00-04:00 UTC)
    writeln!(
        out,
        "defaults:\n  compaction: {{ schedule: \"0 2 * * *\" }}\n  vacuum: {{ schedule: \"0 3 * * 0\" }}\n  \
         checkpoint: {{ schedule: \"0 1 * * *\" }}\ntables:"
    )?;
    for (i, table) in tables.iter().enumerate() {
        writeln!(
            out,
            "  - name: fleet.t{i:05}\n    path: {}\n    owner: team-{}",
            table.display(),
            i % 50
        )?;
    }
    out.flush()?;
    Ok(())
}

/// One measurement: `replicas` replicas of `binary` on an inventory of `tables` tables.
struct Run<'a> {
    binary: &'a Path,
    dir: &'a Path,
    inventory: &'a Path,
    tables: usize,
    replicas: usize,
    settle: Duration,
    idle_window: Duration,
}

async fn measure_size(run: &Run<'_>) -> Result<Value> {
    let (binary, inventory, n) = (run.binary, run.inventory, run.tables);
    // validate
    let t = Instant::now();
    let out = Command::new(binary)
        .arg("validate")
        .arg(inventory)
        .output()
        .context("running tablekeeper validate")?;
    let validate_secs = secs(t);
    if !out.status.success() {
        bail!(
            "tablekeeper validate rejected the {n}-table inventory: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let db = TestDatabase::create().await?;
    let replica = run_replicas(run, &db.url).await;
    let enqueue_pg = enqueue_all(&db.url, n).await;
    db.drop_db().await?;
    let replica = replica?;
    let enqueue_pg = enqueue_pg?;
    let sqlite_dir = tempfile::tempdir()?;
    let sqlite_url = format!(
        "sqlite://{}",
        sqlite_dir.path().join("enqueue.db").display()
    );
    let enqueue_sqlite = enqueue_all(&sqlite_url, n).await?;

    eprintln!(
        "fleet {n:>5} x{}: validate {validate_secs:.2}s | ready {:.2}s, started {:.2}s, all probed {:.1}s | RSS settled {:.0} MB | /metrics {:.3}s {} KB, gzip {:.3}s {} KB | / {:.3}s {} KB | enqueue pg {:.2}s sqlite {:.2}s",
        run.replicas,
        replica["ready_seconds"].as_f64().unwrap_or(0.0),
        replica["started_log_seconds"].as_f64().unwrap_or(0.0),
        replica["first_probe_round_seconds"].as_f64().unwrap_or(0.0),
        replica["rss_settled_mb"].as_f64().unwrap_or(0.0),
        replica["metrics_scrape_seconds"].as_f64().unwrap_or(0.0),
        replica["metrics_bytes"].as_u64().unwrap_or(0) / 1024,
        replica["metrics_gzip_scrape_seconds"].as_f64().unwrap_or(0.0),
        replica["metrics_gzip_bytes"].as_u64().unwrap_or(0) / 1024,
        replica["dashboard_seconds"].as_f64().unwrap_or(0.0),
        replica["dashboard_bytes"].as_u64().unwrap_or(0) / 1024,
        enqueue_pg["seconds"].as_f64().unwrap_or(0.0),
        enqueue_sqlite["seconds"].as_f64().unwrap_or(0.0),
    );
    Ok(json!({
        "tables": n,
        "validate_seconds": validate_secs,
        "replica": replica,
        "enqueue_postgres": enqueue_pg,
        "enqueue_sqlite": enqueue_sqlite,
    }))
}

/// Starts the replicas, waits for them, measures, and stops them with SIGTERM; the figures
/// of the first replica, with each replica's settled RSS and idle CPU beside them.
async fn run_replicas(run: &Run<'_>, database_url: &str) -> Result<Value> {
    let n = run.tables;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let started = Instant::now();
    let mut replicas = Vec::with_capacity(run.replicas);
    for i in 0..run.replicas {
        replicas.push(start_replica(run, database_url, i)?);
    }
    let first = &replicas[0];
    let base = first.base.clone();
    let pid_str = first.child.id().to_string();

    // process start -> /readyz 200, the first replica's (then every other's)
    let mut ready_secs = None;
    for replica in &mut replicas {
        let ready = wait_ready(&client, replica, started, READY_TIMEOUT).await?;
        ready_secs.get_or_insert(ready);
    }
    let ready_secs = ready_secs.unwrap_or_default();
    let rss_ready_kb = proc_status_kb(&pid_str, "VmRSS").unwrap_or(0);

    // the schedules are registered once the "tablekeeper started" line is logged
    let started_log_secs = loop {
        let text = std::fs::read_to_string(&replicas[0].log).unwrap_or_default();
        if text.contains("tablekeeper started") {
            break secs(started);
        }
        if started.elapsed() > READY_TIMEOUT {
            bail!(
                "no \"tablekeeper started\" log line within {READY_TIMEOUT:?}; see {}",
                replicas[0].log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    // the first probe round: every table has a tablekeeper_table_version series on every
    // replica (each probes its share and takes the others' from the job store)
    let round_timeout = PROBE_ROUND_TIMEOUT_PER_1000 * u32::try_from(n / 1000 + 1)?;
    for replica in &replicas {
        loop {
            let body = client
                .get(format!("{}/metrics", replica.base))
                .send()
                .await?
                .text()
                .await?;
            let probed = body
                .lines()
                .filter(|l| l.starts_with("tablekeeper_table_version{"))
                .count();
            let failed = body
                .lines()
                .filter(|l| l.starts_with("tablekeeper_table_probe_failures_total{"))
                .filter(|l| !l.ends_with(" 0"))
                .count();
            if failed > 0 {
                bail!(
                    "{failed} of {n} tables failed their probe; see {}",
                    replica.log.display()
                );
            }
            if probed >= n {
                break;
            }
            if started.elapsed() > round_timeout {
                bail!(
                    "only {probed} of {n} tables probed after {round_timeout:?}; see {}",
                    replica.log.display()
                );
            }
            // a scrape costs about 6 µs of CPU per table (0.6 s at 100,000 on these 2 cores):
            // poll rarely enough that the polling takes under a tenth of a core from the round
            tokio::time::sleep(poll_interval(n)).await;
        }
    }
    let probe_round_secs = secs(started);

    tokio::time::sleep(run.settle).await;
    let pids: Vec<u32> = replicas.iter().map(|r| r.child.id()).collect();
    let cpu_before: Vec<f64> = pids
        .iter()
        .map(|&p| cpu_seconds(p).unwrap_or(0.0))
        .collect();
    tokio::time::sleep(run.idle_window).await;
    let cpu_idle: Vec<f64> = pids
        .iter()
        .zip(&cpu_before)
        .map(|(&p, before)| cpu_seconds(p).unwrap_or(0.0) - before)
        .collect();
    let rss_settled_mb: Vec<f64> = pids
        .iter()
        .map(|p| proc_status_kb(&p.to_string(), "VmRSS").unwrap_or(0) as f64 / 1024.0)
        .collect();
    // "settled" above is taken while the first round's tail (the history reads and damage
    // checks left beside the probes) may still run; idle is when that work is done
    let quiet = wait_quiet(
        pids[0],
        QUIET_TIMEOUT_PER_1000 * u32::try_from(n / 1000 + 1)?,
    )
    .await;
    let rss_quiet_mb: Vec<f64> = pids
        .iter()
        .map(|p| proc_status_kb(&p.to_string(), "VmRSS").unwrap_or(0) as f64 / 1024.0)
        .collect();

    let mut scrape_secs = Vec::new();
    let mut metrics_bytes = 0;
    let mut series = 0;
    for _ in 0..SCRAPES {
        let t = Instant::now();
        let body = client
            .get(format!("{base}/metrics"))
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        scrape_secs.push(secs(t));
        metrics_bytes = body.len();
        series = String::from_utf8_lossy(&body)
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count();
    }
    // as Prometheus scrapes it: gzip asked for (reqwest, built without gzip, leaves the
    // body compressed, so its length is the bytes on the wire)
    let mut gzip_secs = Vec::new();
    let mut metrics_gzip_bytes = 0;
    for _ in 0..SCRAPES {
        let t = Instant::now();
        let response = client
            .get(format!("{base}/metrics"))
            .header(reqwest::header::ACCEPT_ENCODING, "gzip")
            .send()
            .await?
            .error_for_status()?;
        let encoding = response
            .headers()
            .get(reqwest::header::CONTENT_ENCODING)
            .cloned();
        let body = response.bytes().await?;
        gzip_secs.push(secs(t));
        if encoding.as_ref().and_then(|v| v.to_str().ok()) != Some("gzip") {
            bail!("/metrics did not answer gzip when asked (content-encoding {encoding:?})");
        }
        metrics_gzip_bytes = body.len();
    }
    // the dashboard's front page (worst first, one page) and one table's page
    let mut page_secs = Vec::new();
    let mut table_page_secs = Vec::new();
    let mut page_bytes = 0;
    for _ in 0..SCRAPES {
        let t = Instant::now();
        let body = client
            .get(format!("{base}/"))
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        page_secs.push(secs(t));
        page_bytes = body.len();
        let t = Instant::now();
        client
            .get(format!("{base}/tables/fleet.t{:05}", n / 2))
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        table_page_secs.push(secs(t));
    }
    let rss_peak_kb = proc_status_kb(&pid_str, "VmHWM").unwrap_or(0);

    // stop with SIGTERM, as Kubernetes would
    let t = Instant::now();
    for pid in &pids {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status();
    }
    let mut stop_secs = None;
    while t.elapsed() < Duration::from_secs(30) {
        if let Ok(Some(_)) = replicas[0].child.try_wait() {
            stop_secs = Some(secs(t));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let log = replicas[0].log.clone();
    drop(replicas);

    Ok(json!({
        "replicas": run.replicas,
        "ready_seconds": ready_secs,
        "started_log_seconds": started_log_secs,
        "first_probe_round_seconds": probe_round_secs,
        "rss_ready_mb": rss_ready_kb as f64 / 1024.0,
        "rss_settled_mb": rss_settled_mb[0],
        "rss_settled_mb_per_replica": rss_settled_mb,
        "rss_quiet_mb": rss_quiet_mb[0],
        "rss_quiet_mb_per_replica": rss_quiet_mb,
        "quiet_after_round_seconds": quiet,
        "rss_peak_mb": rss_peak_kb as f64 / 1024.0,
        "idle_cpu_seconds": cpu_idle[0],
        "idle_cpu_seconds_per_replica": cpu_idle,
        "idle_window_seconds": run.idle_window.as_secs_f64(),
        "metrics_scrape_seconds": median(&scrape_secs),
        "metrics_bytes": metrics_bytes,
        "metrics_series": series,
        "metrics_gzip_scrape_seconds": median(&gzip_secs),
        "metrics_gzip_bytes": metrics_gzip_bytes,
        "dashboard_seconds": median(&page_secs),
        "dashboard_bytes": page_bytes,
        "table_page_seconds": median(&table_page_secs),
        "sigterm_to_exit_seconds": stop_secs,
        "log": log,
    }))
}

fn start_replica(run: &Run<'_>, database_url: &str, index: usize) -> Result<Replica> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let log = run.dir.join(format!("replica-{}-{index}.log", run.tables));
    let log_file = std::fs::File::create(&log)?;
    let child = Command::new(run.binary)
        .arg("run")
        .env("TABLEKEEPER_DATABASE_URL", database_url)
        .env("TABLEKEEPER_INVENTORY", run.inventory)
        .env("TABLEKEEPER_LISTEN", format!("127.0.0.1:{port}"))
        .env("TABLEKEEPER_REPLICA_ID", format!("bench-{index}"))
        .env("TABLEKEEPER_PROBE_INTERVAL", "1h")
        .env("TABLEKEEPER_WORKERS", "2")
        .env("TABLEKEEPER_SHUTDOWN_GRACE", "10s")
        // the binary's default log filter; plain text so the log can be searched
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .context("starting tablekeeper run")?;
    Ok(Replica {
        child,
        base: format!("http://127.0.0.1:{port}"),
        log,
    })
}

/// What keeping every table loaded costs: this process's RSS before and after one
/// `Prober` with no cap on loaded snapshots (the daemon caps them at `loaded_snapshots`)
/// probes all `tables`, and again after the `Prober` is dropped.
/// Memory freed earlier in this process may be reused, so the growth is a lower bound.
async fn prober_memory(tables: &[PathBuf]) -> Result<Value> {
    let options = ProbeOptions::for_target(COMPACTION_TARGET_FILE_SIZE);
    let before = own_rss_mb();
    let prober = Prober::with_loaded_snapshots(usize::MAX);
    let t = Instant::now();
    for table in tables {
        let probe = prober.probe(&path_str(table)?, &options).await?;
        drop(probe);
    }
    let seconds = secs(t);
    let after = own_rss_mb();
    drop(prober);
    let released = own_rss_mb();
    eprintln!(
        "in-process Prober over {} tables: {seconds:.1}s, RSS {before:.0} -> {after:.0} MB \
         ({:.1} KB per table); {released:.0} MB after dropping it",
        tables.len(),
        (after - before) * 1024.0 / tables.len().max(1) as f64
    );
    Ok(json!({
        "tables": tables.len(),
        "seconds": seconds,
        "rss_before_mb": before,
        "rss_with_prober_mb": after,
        "rss_after_drop_mb": released,
        "kb_per_table": (after - before) * 1024.0 / tables.len().max(1) as f64,
    }))
}

/// One `schedule` job per table enqueued sequentially (as cron ticks enqueue them), on a
/// freshly migrated store.
async fn enqueue_all(url: &str, n: usize) -> Result<Value> {
    let store = connect(url, StoreOptions::default()).await?;
    store.migrate().await?;
    let t = Instant::now();
    for i in 0..n {
        store
            .enqueue(NewJob::new(
                format!("fleet.t{i:05}"),
                Operation::Compact,
                Trigger::Schedule,
            ))
            .await?;
    }
    let seconds = secs(t);
    store.close().await;
    Ok(json!({
        "jobs": n,
        "seconds": seconds,
        "jobs_per_sec": n as f64 / seconds.max(f64::EPSILON),
    }))
}
