//! `tk-bench compact`: tablekeeper's compaction (and, with `--zorder`, its Z-order) of one
//! small-file table, after preparing identical copies of it so the script can time python
//! deltalake and a cold-cache `cp -r` on the same bytes. The page cache is dropped before each
//! timed run when this process may (root): the figures are then cold reads, as on a replica
//! that did not just write the table. Touches nothing outside the `--dir` it is given.
//!
//! `tk-bench partition` writes one unpartitioned table of about 2 GB (the memory benchmark's
//! "one large partition") and an inventory naming it, for `tablekeeper maintain` to rewrite
//! under `/usr/bin/time`.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde_json::json;
use tablekeeper_delta::fixtures::{
    active_files, write_files_with_row_groups, write_small_files, SmallFiles,
};
use tablekeeper_delta::{
    optimize, CompactOptions, Optimize, ZorderOptions, DEFAULT_SMALL_FILE_FACTOR,
};
use tokio_util::sync::CancellationToken;

use crate::util::{copy_tree, fresh_dir, parquet_size, path_str};
use crate::Args;

/// Target of the compaction benchmark: 64 MiB, the size the brief compares engines at.
const TARGET_FILE_SIZE: u64 = 64 * 1024 * 1024;

/// The column the Z-order benchmark clusters on.
const ZORDER_COLUMN: &str = "user_id";

/// Drops the page cache (needs root); returns whether it could.
pub fn drop_caches() -> bool {
    // flush dirty pages first: drop_caches frees clean pages only
    let synced = std::process::Command::new("sync")
        .status()
        .is_ok_and(|s| s.success());
    synced && std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

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
    let written_at = Instant::now();
    let rows = write_small_files(&path_str(&source)?, &spec).await?;
    eprintln!(
        "wrote {rows} rows into {} small files in {:.1}s",
        spec.partitions * spec.files_per_partition,
        written_at.elapsed().as_secs_f64()
    );
    let copies = if args.zorder {
        ["a", "b", "c", "d"].as_slice()
    } else {
        &["a", "b"]
    };
    for copy in copies {
        copy_tree(&source, &dir.join(copy))?;
    }
    let copy_a = dir.join("a");
    let files_before = active_files(&path_str(&copy_a)?).await?;
    let (data_files, data_bytes) = parquet_size(&source)?;

    let options = CompactOptions {
        target_file_size: TARGET_FILE_SIZE,
        min_small_files: 2,
        small_file_factor: DEFAULT_SMALL_FILE_FACTOR,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: 0,
    };
    let cold_cache = drop_caches();
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
         ({:.1} MB/s of input, cold cache: {cold_cache})",
        data_bytes as f64 / 1e6 / seconds
    );
    let zorder_seconds = if args.zorder {
        let zorder = ZorderOptions {
            columns: vec![ZORDER_COLUMN.to_owned()],
            target_file_size: TARGET_FILE_SIZE,
            since_version: None,
            compression: Default::default(),
            dry_run: false,
            max_conflict_retries: 0,
        };
        drop_caches();
        let started = Instant::now();
        optimize(
            &path_str(&dir.join("c"))?,
            Optimize::ZOrder(&zorder),
            &CancellationToken::new(),
        )
        .await?;
        let seconds = started.elapsed().as_secs_f64();
        eprintln!("tablekeeper z-order on {ZORDER_COLUMN}: {seconds:.2}s");
        Some(seconds)
    } else {
        None
    };
    Ok(json!({
        "engine": "tablekeeper",
        "build_profile": crate::build_profile(),
        "partitions": spec.partitions,
        "files_per_partition": spec.files_per_partition,
        "rows_per_file": spec.rows_per_file,
        "rows": rows,
        "source": source,
        "copy_a": copy_a,
        "copy_b": dir.join("b"),
        "copy_d": args.zorder.then(|| dir.join("d")),
        "zorder_column": ZORDER_COLUMN,
        "data_files": data_files,
        "data_bytes": data_bytes,
        "files_before": files_before,
        "files_after": files_after,
        "target_file_size": TARGET_FILE_SIZE,
        "cold_cache": cold_cache,
        "seconds": seconds,
        "zorder_seconds": zorder_seconds,
        "bytes_removed": report.bytes_removed,
        "bytes_added": report.bytes_added,
    }))
}

/// Rows per file of the large partition: about 5 MB files (14 bytes a row once encoded),
/// 400 of them, 2 GB in all.
const PARTITION_ROWS_PER_FILE: u32 = 360_000;

pub async fn bench_partition(args: &Args) -> Result<serde_json::Value> {
    let dir = args.dir.as_deref().context("partition needs --dir DIR")?;
    let dir = fresh_dir(dir)?;
    let spec = SmallFiles {
        partitions: 0,
        files_per_partition: if args.smoke { 4 } else { 400 },
        rows_per_file: if args.smoke {
            1_000
        } else {
            PARTITION_ROWS_PER_FILE
        },
        payload_bytes: 16,
    };
    let table = dir.join("table");
    let started = Instant::now();
    let rows = match args.rows_per_row_group {
        Some(n) => write_files_with_row_groups(&path_str(&table)?, &spec, n).await?,
        None => write_small_files(&path_str(&table)?, &spec).await?,
    };
    let (files, bytes) = parquet_size(&table)?;
    eprintln!(
        "wrote {rows} rows, {files} files, {:.0} MB in {:.1}s",
        bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let inventory = dir.join("inventory.yaml");
    write_inventory(&inventory, &table)?;
    Ok(json!({
        "table": table,
        "inventory": inventory,
        "rows": rows,
        "files": files,
        "bytes": bytes,
        "rows_per_row_group": args.rows_per_row_group,
        "zorder_column": ZORDER_COLUMN,
    }))
}

/// One table, `bench.big`, compacted to 1 GiB files (so a bin spans half the partition) and
/// Z-ordered on [`ZORDER_COLUMN`].
fn write_inventory(path: &Path, table: &Path) -> Result<()> {
    let text = format!(
        "tables:\n  - name: bench.big\n    path: {}\n    owner: bench\n    layout:\n      \
         zorder: [{ZORDER_COLUMN}]\n    maintenance:\n      compaction: {{ target_file_size: \
         1GiB, min_small_files: 2 }}\n",
        table.display()
    );
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
