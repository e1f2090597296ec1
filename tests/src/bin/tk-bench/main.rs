//! `tk-bench`: the Rust half of `scripts/bench.sh` (see BENCHMARKS.md).
//!
//! Owns the measurements, one module each, and nothing else:
//! - [`jobs`]: claim + complete throughput of the job table (Postgres, SQLite);
//! - [`compact`]: one compaction (and Z-order) of a small-file table, next to copies for python
//!   and `cp`, and the 2 GB partition the rewrite memory benchmark runs `tablekeeper maintain` on;
//! - [`floor`]: the Parquet library's own decode and re-encode of a decoded table, per codec
//!   (the limit beside python and `tablekeeper maintain` in the codecs section);
//! - [`growth`]: 30 simulated days of new data, compacted, Z-ordered and vacuumed each day;
//! - [`probe`]: probing a 100k-file, 10k-commit table from its log, cold and incremental;
//! - [`fleet`]: the real `tablekeeper` binary with inventories of 10 to 10,000 tables;
//! - [`tasks`]: one compaction run as tasks by several replicas of the real binary.
//!
//! It must never touch a database it did not create (Postgres runs go through
//! `TestDatabase`, a fresh `tk_test_*` database dropped at the end) nor a directory
//! outside the `--dir` it is given. Figures go to stdout and to the `--out` JSON file;
//! progress goes to stderr.

mod compact;
mod fleet;
mod floor;
mod growth;
mod jobs;
mod probe;
mod tasks;
mod util;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

const USAGE: &str = "usage:
  tk-bench jobs    [--smoke] [--jobs N] [--out FILE]
  tk-bench compact [--smoke] --dir DIR [--rows-per-file N] [--zorder] [--out FILE]
  tk-bench partition [--smoke] --dir DIR [--rows-per-row-group N] [--out FILE]
  tk-bench floor   --dir TABLE [--codec CODEC] [--plain COLUMN,...] [--out FILE]
  tk-bench growth  [--smoke] --dir DIR [--days N] [--out FILE]
  tk-bench probe   [--smoke] --dir DIR [--out FILE]
  tk-bench fleet   [--smoke] --dir DIR --tablekeeper BIN [--sizes N,N,...] [--replicas N] [--out FILE]
  tk-bench tasks   [--smoke] --dir DIR --tablekeeper BIN [--replicas N] [--rows-per-file N] [--out FILE]";

/// Command-line arguments shared by every subcommand (each reads the ones it needs).
#[derive(Debug, Default)]
pub struct Args {
    command: String,
    smoke: bool,
    jobs: Option<u64>,
    days: Option<u32>,
    rows_per_file: Option<u32>,
    /// Rows per Parquet row group of the files written (partition; default: the writer's).
    rows_per_row_group: Option<usize>,
    /// Also time Z-order (compact).
    zorder: bool,
    sizes: Option<Vec<usize>>,
    /// Replicas of `tablekeeper run` sharing one job store (fleet; default 1).
    replicas: Option<usize>,
    /// Output codec as arrow-rs parses it, e.g. `zstd(4)` (floor; default `zstd(4)`).
    codec: Option<String>,
    /// Columns written without a dictionary (floor; default: none, every column dictionary-
    /// encoded as python deltalake writes them).
    plain: Vec<String>,
    dir: Option<PathBuf>,
    tablekeeper: Option<PathBuf>,
    out: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--smoke" => args.smoke = true,
            "--zorder" => args.zorder = true,
            "--rows-per-row-group" => {
                let value = it.next().context("--rows-per-row-group needs a number")?;
                args.rows_per_row_group = Some(
                    value
                        .parse()
                        .context("--rows-per-row-group needs a number")?,
                );
            }
            "--jobs" => {
                let value = it.next().context("--jobs needs a number")?;
                args.jobs = Some(value.parse().context("--jobs needs a number")?);
            }
            "--days" => {
                let value = it.next().context("--days needs a number")?;
                args.days = Some(value.parse().context("--days needs a number")?);
            }
            "--sizes" => {
                let value = it.next().context("--sizes needs N,N,...")?;
                let sizes = value
                    .split(',')
                    .map(|n| n.trim().parse::<usize>())
                    .collect::<Result<Vec<_>, _>>()
                    .context("--sizes needs comma-separated table counts, e.g. 10,1000")?;
                args.sizes = Some(sizes);
            }
            "--replicas" => {
                let value = it.next().context("--replicas needs a number")?;
                args.replicas = Some(value.parse().context("--replicas needs a number")?);
            }
            "--rows-per-file" => {
                let value = it.next().context("--rows-per-file needs a number")?;
                args.rows_per_file = Some(value.parse().context("--rows-per-file needs a number")?);
            }
            "--codec" => {
                args.codec = Some(it.next().context("--codec needs a codec, e.g. zstd(4)")?)
            }
            "--plain" => {
                let value = it
                    .next()
                    .context("--plain needs column names, e.g. id,payload")?;
                args.plain = value.split(',').map(|c| c.trim().to_owned()).collect();
            }
            "--dir" => args.dir = Some(it.next().context("--dir needs a path")?.into()),
            "--tablekeeper" => {
                args.tablekeeper = Some(it.next().context("--tablekeeper needs a path")?.into());
            }
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

/// The build profile of this binary, recorded with every figure.
pub fn build_profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = parse_args()?;
    let figures = match args.command.as_str() {
        "jobs" => jobs::bench_jobs(&args).await?,
        "compact" => compact::bench_compact(&args).await?,
        "partition" => compact::bench_partition(&args).await?,
        "floor" => floor::bench_floor(&args).await?,
        "growth" => growth::bench_growth(&args).await?,
        "probe" => probe::bench_probe(&args).await?,
        "fleet" => fleet::bench_fleet(&args).await?,
        "tasks" => tasks::bench_tasks(&args).await?,
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
