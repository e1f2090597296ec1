//! `tk-bench compact`: tablekeeper's compaction of one small-file table, after preparing
//! two identical copies of it so the script can time python deltalake and `cp -r` on the
//! same bytes. Touches nothing outside the `--dir` it is given.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::json;
use tablekeeper_delta::fixtures::{active_files, write_small_files, SmallFiles};
use tablekeeper_delta::{optimize, CompactOptions, Optimize, DEFAULT_SMALL_FILE_FACTOR};
use tokio_util::sync::CancellationToken;

use crate::util::{copy_tree, fresh_dir, parquet_size, path_str};
use crate::Args;

/// Target of the compaction benchmark: 64 MiB, the size the brief compares engines at.
const TARGET_FILE_SIZE: u64 = 64 * 1024 * 1024;

pub async fn bench_compact(args: &Args) -> Result<serde_json::Value> {
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
            rows_per_file: args.rows_per_file.unwrap_or(2_000),
            payload_bytes: 16,
        }
    };
    let dir = fresh_dir(dir)?;
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
    let report = optimize(
        &path_str(&copy_a)?,
        Optimize::Compact(&options),
        &CancellationToken::new(),
    )
    .await?;
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
