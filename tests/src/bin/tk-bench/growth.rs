//! `tk-bench growth`: does maintenance cost grow with the table's age?
//!
//! Simulates `--days` days (default 30) of a table that receives the same amount of new
//! small files every day, each day in a new `day=` partition, and maintains four
//! identical copies of it side by side, timing each day's run:
//! - `scheduled`: the daemon's scheduled path — probe (one `Prober` kept across days, as a
//!   replica keeps it), the planner's compaction need check (a partition with at least
//!   `min_small_files` small files), compaction with the inventory's defaults, a
//!   checkpoint when the inventory's commit threshold is reached, then VACUUM (lite, as
//!   the scheduled runs between full ones) with a zero retention so each day's compacted
//!   files are deleted that day;
//! - `whole_compact`: what a naive script does — deltalake's OPTIMIZE on the whole table;
//! - `zorder_scoped`: tablekeeper's Z-order scoped to partitions with files added since
//!   the last Z-order (the version the probe reports, as the worker passes it);
//! - `zorder_whole`: the same Z-order with no scope (every partition, every day).
//!
//! The options come from an inventory entry parsed by the inventory crate and mapped the
//! way the daemon's executor maps them. Only `--dir` is written to.

use std::num::NonZeroU64;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use chrono::{Days, NaiveDate};
use deltalake::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use deltalake::protocol::SaveMode;
use deltalake::DeltaTable;
use serde_json::{json, Value};
use tablekeeper_delta::{
    checkpoint, open_table, optimize, table_url, vacuum, CheckpointOptions, CompactOptions,
    OpReport, Optimize, ProbeOptions, Prober, VacuumMode, VacuumOptions, ZorderOptions,
    DEFAULT_SMALL_FILE_FACTOR,
};
use tablekeeper_inventory::{Inventory, TableSpec};
use tokio_util::sync::CancellationToken;

use crate::util::{fresh_dir, median, parquet_size, path_str, secs};
use crate::Args;

/// Commit conflicts retried inside one operation, as the daemon's executor does.
const CONFLICT_RETRIES: u32 = 3;
/// The Z-order column (a non-partition column with many distinct values).
const ZORDER_COLUMN: &str = "user_id";

/// Simulated time runs thousands of times faster than the clock tombstones expire by, so
/// the scheduled table gets a deleted-file retention of one second (property and inventory
/// agree) and a checkpoint a day: tombstones then expire and leave the log at the next
/// checkpoint, as they do in real time when a table checkpoints more often than its
/// retention. Without this, every VACUUM re-lists every file deleted since day 1.
const SIMULATED_RETENTION_PROPERTY: (&str, &str) =
    ("delta.deletedFileRetentionDuration", "interval 1 second");
/// The scheduled table also keeps its log for one simulated day (log cleanup at each
/// checkpoint), like a table older than its log retention; a second copy keeps the
/// default 30 days of log (every commit of the month stays in `_delta_log`), like a table
/// in its first month.
const SIMULATED_LOG_RETENTION_PROPERTY: (&str, &str) =
    ("delta.logRetentionDuration", "interval 1 second");
const SIMULATED_RETENTION: std::time::Duration = std::time::Duration::from_millis(1100);

/// Shape of each day's new data.
#[derive(Debug, Clone, Copy)]
struct DailyLoad {
    /// Commits per day, one small file each, all in that day's partition.
    files: u32,
    rows_per_file: u32,
}

pub async fn bench_growth(args: &Args) -> Result<Value> {
    let dir = args.dir.as_deref().context("growth needs --dir DIR")?;
    let days = args.days.unwrap_or(if args.smoke { 3 } else { 30 });
    if days < 2 {
        bail!("--days must be at least 2 to compare the last day with the first");
    }
    let load = if args.smoke {
        DailyLoad {
            files: 10,
            rows_per_file: 100,
        }
    } else {
        DailyLoad {
            files: 12,
            rows_per_file: 10_000,
        }
    };
    let dir = fresh_dir(dir)?;
    let scheduled = path_str(&dir.join("scheduled"))?;
    let long_log = path_str(&dir.join("scheduled_long_log"))?;
    let whole = path_str(&dir.join("whole_compact"))?;
    let z_scoped = path_str(&dir.join("zorder_scoped"))?;
    let z_whole = path_str(&dir.join("zorder_whole"))?;
    let spec = inventory_spec(&dir, &scheduled)?;
    let mut long_log_spec = spec.clone();
    long_log_spec.path = long_log.clone();
    long_log_spec.retention.log_retention = std::time::Duration::from_secs(30 * 86_400);
    if u64::from(load.files) < u64::from(spec.compaction.min_small_files) {
        bail!(
            "{} files a day would never reach min_small_files {}: raise DailyLoad::files",
            load.files,
            spec.compaction.min_small_files
        );
    }
    eprintln!(
        "growth: {days} days x {} files x {} rows; target {} bytes, min_small_files {}",
        load.files,
        load.rows_per_file,
        spec.compaction.target_file_size,
        spec.compaction.min_small_files
    );

    let probe_options = ProbeOptions::for_target(spec.compaction.target_file_size);
    let scheduled_prober = Prober::new();
    let long_log_prober = Prober::new();
    let zorder_prober = Prober::new();
    let first_day = NaiveDate::from_ymd_opt(2026, 1, 1).context("a valid start date")?;
    let mut rows_out = Vec::new();
    let cancel = CancellationToken::new();
    let started = Instant::now();
    for d in 1..=days {
        let day = first_day
            .checked_add_days(Days::new(u64::from(d - 1)))
            .context("day out of range")?
            .to_string();
        let written_at = Instant::now();
        for table in [&scheduled, &long_log, &whole, &z_scoped, &z_whole] {
            let properties: &[(&str, &str)] = if table == &scheduled {
                &[
                    SIMULATED_RETENTION_PROPERTY,
                    SIMULATED_LOG_RETENTION_PROPERTY,
                ]
            } else if table == &long_log {
                &[SIMULATED_RETENTION_PROPERTY]
            } else {
                &[]
            };
            write_day(table, &day, load, properties).await?;
        }
        let write_secs = secs(written_at);

        // scheduled path: probe, need check, compact, checkpoint if due, vacuum
        let ScheduledDay {
            probe_secs,
            probe,
            compaction,
            checkpoint: checkpoint_figures,
            vacuum: vacuum_figures,
        } = scheduled_day(
            &scheduled,
            &spec,
            &scheduled_prober,
            &probe_options,
            &cancel,
        )
        .await?;
        let long_log_day = scheduled_day(
            &long_log,
            &long_log_spec,
            &long_log_prober,
            &probe_options,
            &cancel,
        )
        .await?;

        // naive whole-table compaction with the same target size
        let whole_figures = whole_table_compact(&whole, spec.compaction.target_file_size).await?;

        // Z-order scoped the way the worker scopes it, and unscoped
        let since_version = zorder_prober
            .probe(&z_scoped, &probe_options)
            .await?
            .history
            .last_zorder_version;
        let scoped_figures = run_zorder(&z_scoped, &spec, since_version, &cancel).await?;
        let unscoped_figures = run_zorder(&z_whole, &spec, None, &cancel).await?;

        eprintln!(
            "day {d:>2}: write {write_secs:.2}s | scheduled probe {probe_secs:.3}s compact {} vacuum {:.3}s | whole compact {:.3}s | zorder scoped {:.3}s whole {:.3}s",
            compaction
                .as_ref()
                .and_then(|c| c["seconds"].as_f64())
                .map_or_else(|| "skipped".to_owned(), |s| format!("{s:.3}s")),
            vacuum_figures["seconds"].as_f64().unwrap_or(0.0),
            whole_figures["seconds"].as_f64().unwrap_or(0.0),
            scoped_figures["seconds"].as_f64().unwrap_or(0.0),
            unscoped_figures["seconds"].as_f64().unwrap_or(0.0),
        );
        rows_out.push(json!({
            "day": d,
            "partition": day,
            "table_version": probe.version,
            "active_files": probe.files,
            "write_seconds": write_secs,
            "scheduled_probe_seconds": probe_secs,
            "scheduled_compact": compaction,
            "scheduled_checkpoint": checkpoint_figures,
            "vacuum": vacuum_figures,
            "vacuum_long_log": long_log_day.vacuum,
            "long_log_checkpoint": long_log_day.checkpoint,
            "whole_compact": whole_figures,
            "zorder_scoped": scoped_figures,
            "zorder_whole": unscoped_figures,
        }));
    }

    let first = rows_out.first().cloned().unwrap_or(Value::Null);
    let last = rows_out.last().cloned().unwrap_or(Value::Null);
    let ratio = |key: &str| -> Value {
        let a = first[key]["seconds"].as_f64();
        let b = last[key]["seconds"].as_f64();
        match (a, b) {
            (Some(a), Some(b)) if a > 0.0 => json!(b / a),
            _ => Value::Null,
        }
    };
    // single days are noisy at these durations: also compare the median of the first
    // three days with the median of the last three
    let window = |key: &str, from_start: bool| -> Option<f64> {
        let days: Vec<&Value> = if from_start {
            rows_out.iter().take(3).collect()
        } else {
            rows_out.iter().rev().take(3).collect()
        };
        let values: Option<Vec<f64>> = days
            .iter()
            .map(|d| match key {
                "scheduled_probe" => d["scheduled_probe_seconds"].as_f64(),
                _ => d[key]["seconds"].as_f64(),
            })
            .collect();
        values.map(|v| median(&v))
    };
    let median_ratio = |key: &str| -> Value {
        match (window(key, true), window(key, false)) {
            (Some(a), Some(b)) if a > 0.0 => json!(b / a),
            _ => Value::Null,
        }
    };
    let probe_ratio = match (
        first["scheduled_probe_seconds"].as_f64(),
        last["scheduled_probe_seconds"].as_f64(),
    ) {
        (Some(a), Some(b)) if a > 0.0 => json!(b / a),
        _ => Value::Null,
    };
    Ok(json!({
        "build_profile": crate::build_profile(),
        "days": days,
        "files_per_day": load.files,
        "rows_per_file": load.rows_per_file,
        "target_file_size": spec.compaction.target_file_size,
        "min_small_files": spec.compaction.min_small_files,
        "total_seconds": secs(started),
        "ratios_last_to_first": {
            "scheduled_compact": ratio("scheduled_compact"),
            "whole_compact": ratio("whole_compact"),
            "zorder_scoped": ratio("zorder_scoped"),
            "zorder_whole": ratio("zorder_whole"),
            "vacuum": ratio("vacuum"),
            "vacuum_long_log": ratio("vacuum_long_log"),
            "scheduled_probe": probe_ratio,
        },
        "median_ratios_last3_to_first3": {
            "scheduled_compact": median_ratio("scheduled_compact"),
            "whole_compact": median_ratio("whole_compact"),
            "zorder_scoped": median_ratio("zorder_scoped"),
            "zorder_whole": median_ratio("zorder_whole"),
            "vacuum": median_ratio("vacuum"),
            "vacuum_long_log": median_ratio("vacuum_long_log"),
            "scheduled_probe": median_ratio("scheduled_probe"),
        },
        "per_day": rows_out,
    }))
}

/// The benchmark table's inventory entry, parsed (and defaulted) by the inventory crate
/// exactly as the daemon would read it.
/// What one day of the scheduled path cost on one table.
struct ScheduledDay {
    probe_secs: f64,
    probe: tablekeeper_delta::Probe,
    compaction: Option<Value>,
    checkpoint: Option<Value>,
    vacuum: Value,
}

/// The daemon's scheduled path for one day: probe, need check, compact, checkpoint if
/// due, then a lite VACUUM once today's tombstones passed the simulated retention.
async fn scheduled_day(
    uri: &str,
    spec: &TableSpec,
    prober: &Prober,
    probe_options: &ProbeOptions,
    cancel: &CancellationToken,
) -> Result<ScheduledDay> {
    let t = Instant::now();
    let probe = prober.probe(uri, probe_options).await?;
    let probe_secs = secs(t);
    let min = u64::from(spec.compaction.min_small_files);
    let needed = probe.small_files_by_partition.values().any(|n| *n >= min);
    let compaction = if needed {
        let options = CompactOptions {
            target_file_size: spec.compaction.target_file_size,
            min_small_files: min,
            small_file_factor: DEFAULT_SMALL_FILE_FACTOR,
            compression: Default::default(),
            dry_run: false,
            max_conflict_retries: CONFLICT_RETRIES,
        };
        let t = Instant::now();
        let report = optimize(uri, Optimize::Compact(&options), cancel).await?;
        Some(op_figures(&report, secs(t)))
    } else {
        None
    };
    // the worker re-probes after a success; the checkpoint tick reads that probe
    let probe = prober.probe(uri, probe_options).await?;
    let checkpoint_figures =
        if probe.commits_since_checkpoint >= spec.checkpoint.max_commits_since_checkpoint {
            let options = CheckpointOptions {
                max_commits_since_checkpoint: spec.checkpoint.max_commits_since_checkpoint,
                log_retention: spec.retention.log_retention,
                force: false,
                log_cleanup: tablekeeper_delta::LogCleanup::Unrecorded,
                pins: Vec::new(),
            };
            let t = Instant::now();
            let report = checkpoint(uri, &options, cancel).await?;
            Some(op_figures(&report, secs(t)))
        } else {
            None
        };
    let vacuum_options = VacuumOptions {
        inventory_retention: spec.retention.deleted_file_retention,
        allow_short_retention: spec.retention.allow_short_retention,
        mode: VacuumMode::Lite,
        dry_run: false,
        stale_watch: tablekeeper_delta::DEFAULT_STALE_WATCH,
        keep: Default::default(),
    };
    // untimed: today's compaction tombstones pass the (simulated) retention
    tokio::time::sleep(SIMULATED_RETENTION).await;
    let vacuum_figures = run_vacuum(uri, &vacuum_options, cancel).await?;
    Ok(ScheduledDay {
        probe_secs,
        probe,
        compaction,
        checkpoint: checkpoint_figures,
        vacuum: vacuum_figures,
    })
}

fn inventory_spec(dir: &Path, table_path: &str) -> Result<TableSpec> {
    let yaml = format!(
        "tables:\n  - name: bench.growth\n    path: {table_path}\n    owner: bench\n    \
         layout:\n      partition_by: [day]\n      zorder: [{ZORDER_COLUMN}]\n    \
         retention:\n      deleted_file_retention: 1s\n      log_retention: 1s\n      allow_short_retention: true\n    \
         maintenance:\n      checkpoint: {{ max_commits_since_checkpoint: 12 }}\n"
    );
    let file = dir.join("inventory.yaml");
    std::fs::write(&file, &yaml).with_context(|| format!("writing {}", file.display()))?;
    let inventory = Inventory::parse(&file, &yaml)
        .map_err(|e| anyhow::anyhow!("the growth benchmark's inventory is invalid: {e:?}"))?;
    inventory
        .tables
        .into_iter()
        .next()
        .context("the growth inventory holds no table")
}

/// Appends one day's files: `load.files` commits of one file each, all in `day=<day>`,
/// like a streaming writer committing small batches. `properties` are set when the first
/// write creates the table.
async fn write_day(
    uri: &str,
    day: &str,
    load: DailyLoad,
    properties: &[(&str, &str)],
) -> Result<()> {
    std::fs::create_dir_all(uri).with_context(|| format!("creating {uri}"))?;
    let url = table_url(uri)?;
    for file in 0..load.files {
        let rows = i64::from(load.rows_per_file);
        let base = i64::from(file) * rows;
        let ids: Vec<i64> = (base..base + rows).collect();
        let users: Vec<i64> = ids
            .iter()
            .map(|id| id.wrapping_mul(7919).rem_euclid(10_000))
            .collect();
        let amounts: Vec<f64> = ids.iter().map(|id| (id % 10_000) as f64 / 100.0).collect();
        let payloads: Vec<String> = ids
            .iter()
            .map(|id| format!("{id}:{day}:xxxxxxxx"))
            .collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(vec![day; load.rows_per_file as usize])),
            Arc::new(Int64Array::from(users)),
            Arc::new(Float64Array::from(amounts)),
            Arc::new(StringArray::from(payloads)),
        ];
        let batch = RecordBatch::try_new(tablekeeper_delta::fixtures::schema(), columns)
            .context("building a day's batch")?;
        let table = DeltaTable::try_from_url(url.clone())
            .await
            .with_context(|| format!("opening {uri} to append"))?;
        let creating = table.version().is_none();
        let mut write = table
            .write(vec![batch])
            .with_save_mode(SaveMode::Append)
            .with_partition_columns(["day"]);
        if creating && !properties.is_empty() {
            write = write.with_configuration(
                properties
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned()))),
            );
        }
        write
            .await
            .with_context(|| format!("appending day {day} to {uri}"))?;
    }
    Ok(())
}

/// Time, files and bytes of one operation's report.
fn op_figures(report: &OpReport, seconds: f64) -> Value {
    json!({
        "seconds": seconds,
        "files_removed": report.files_removed,
        "files_added": report.files_added,
        "bytes_removed": report.bytes_removed,
        "bytes_added": report.bytes_added,
        "partitions_touched": report.partitions_touched.len(),
        "would_delete_files": report.would_delete_files,
        "skipped": report.skipped,
    })
}

/// deltalake's OPTIMIZE over the whole table (opening included), as a script would run it.
async fn whole_table_compact(uri: &str, target_file_size: u64) -> Result<Value> {
    let target = NonZeroU64::new(target_file_size).context("target size must be positive")?;
    let t = Instant::now();
    let table = open_table(uri).await?;
    let (_, metrics) = table
        .optimize()
        .with_target_size(target)
        .await
        .with_context(|| format!("whole-table optimize of {uri}"))?;
    Ok(json!({
        "seconds": secs(t),
        "files_removed": metrics.num_files_removed,
        "files_added": metrics.num_files_added,
        "bytes_removed": metrics.files_removed.total_size,
        "bytes_added": metrics.files_added.total_size,
        "partitions_touched": metrics.partitions_optimized,
        "files_considered": metrics.total_considered_files,
    }))
}

/// One VACUUM, with what it deleted counted on disk.
async fn run_vacuum(
    uri: &str,
    options: &VacuumOptions,
    cancel: &CancellationToken,
) -> Result<Value> {
    let (files_before, bytes_before) = parquet_size(Path::new(uri))?;
    let t = Instant::now();
    let outcome = vacuum(uri, options, cancel).await;
    let seconds = secs(t);
    let (files_after, bytes_after) = parquet_size(Path::new(uri))?;
    let mut figures = op_figures(&outcome?, seconds);
    figures["files_deleted_on_disk"] = json!(files_before.saturating_sub(files_after));
    figures["bytes_deleted_on_disk"] = json!(bytes_before.saturating_sub(bytes_after));
    figures["files_removed"] = figures["files_deleted_on_disk"].clone();
    figures["bytes_removed"] = figures["bytes_deleted_on_disk"].clone();
    Ok(figures)
}

async fn run_zorder(
    uri: &str,
    spec: &TableSpec,
    since_version: Option<i64>,
    cancel: &CancellationToken,
) -> Result<Value> {
    let options = ZorderOptions {
        columns: spec.layout.zorder.clone(),
        target_file_size: spec.compaction.target_file_size,
        since_version,
        compression: Default::default(),
        dry_run: false,
        max_conflict_retries: CONFLICT_RETRIES,
    };
    let t = Instant::now();
    let report = optimize(uri, Optimize::ZOrder(&options), cancel).await?;
    let mut figures = op_figures(&report, secs(t));
    figures["since_version"] = json!(since_version);
    Ok(figures)
}
