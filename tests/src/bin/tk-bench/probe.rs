//! `tk-bench probe`: the cost of probing a large table from its log.
//!
//! Builds a table of 100,000 active files in 10,000 commits (smoke: 1,000 in 100) plus a
//! checkpoint at the last version, then times, with the probe's default options:
//! - deltalake's plain table load (`open_table`), to separate the snapshot from the rest;
//! - a cold probe (a new `Prober`), the first probe a replica makes of the table, with the
//!   daemon's options (its first damage check runs beside the probe), and apart the time
//!   until that check has ended;
//! - after 10 more commits, the incremental re-probe with the same `Prober`;
//! - apart, the floors of two parts of a probe: one object-store listing of the table
//!   root, and reading and parsing every JSON commit.
//!
//! The log is written as Delta JSON commit files directly (protocol, metadata, then
//! `add` actions with statistics, 10 per commit, one `commitInfo` each) — the same
//! bytes a writer's commits would leave, at a fraction of the time; the checkpoint is
//! written by deltalake. Every referenced data file is created as an empty placeholder
//! (the log sizes say 0 bytes to match), so a probe that checks files against a
//! directory listing finds them all; no data file is ever read. Python deltalake's load
//! of the same table is timed by `scripts/bench.sh`. Only `--dir` is written to.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::{json, Value};
use tablekeeper_delta::{open_table, ProbeOptions, Prober};
use tablekeeper_inventory::defaults::COMPACTION_TARGET_FILE_SIZE;

use crate::util::{fresh_dir, own_rss_mb, path_str, secs};
use crate::Args;

/// Files added by each commit.
const FILES_PER_COMMIT: u64 = 10;
/// Commits made after the cold probe, for the incremental re-probe.
const NEW_COMMITS: u64 = 10;

/// Shape of the benchmark table.
#[derive(Debug, Clone, Copy)]
struct Shape {
    commits: u64,
    partitions: u64,
}

pub async fn bench_probe(args: &Args) -> Result<Value> {
    let dir = args.dir.as_deref().context("probe needs --dir DIR")?;
    let shape = if args.smoke {
        Shape {
            commits: 100,
            partitions: 10,
        }
    } else {
        Shape {
            commits: 10_000,
            partitions: 100,
        }
    };
    let dir = fresh_dir(dir)?;
    let table_dir = dir.join("table");
    let uri = path_str(&table_dir)?;
    let now_ms = chrono::Utc::now().timestamp_millis();

    let t = Instant::now();
    write_commit(&table_dir, 0, &create_actions(now_ms))?;
    for version in 1..=shape.commits {
        write_add_commit(&table_dir, version, shape, now_ms)?;
    }
    let log_secs = secs(t);
    let t = Instant::now();
    let table = open_table(&uri).await?;
    deltalake::checkpoints::create_checkpoint(&table, None)
        .await
        .context("writing the checkpoint")?;
    drop(table);
    let checkpoint_secs = secs(t);
    let files = shape.commits * FILES_PER_COMMIT;
    eprintln!(
        "probe table: {files} files in {} commits written in {log_secs:.1}s, checkpoint at \
         version {} in {checkpoint_secs:.1}s",
        shape.commits + 1,
        shape.commits
    );
    let log_bytes = dir_bytes(&table_dir.join("_delta_log"))?;

    // warm the page cache the same way for every reader: one untimed load
    drop(open_table(&uri).await?);

    // as the daemon probes: the first listing of a table runs beside its first probe
    let options = ProbeOptions {
        first_sight_beside: true,
        ..ProbeOptions::for_target(COMPACTION_TARGET_FILE_SIZE)
    };
    let t = Instant::now();
    let table = open_table(&uri).await?;
    let load_secs = secs(t);
    drop(table);

    // the floors of two parts of a probe, measured apart: one listing of the table root
    // through deltalake's object store (what the data-file presence check does), and
    // reading and parsing every JSON commit (what the first probe's history scan does)
    let t = Instant::now();
    let listed = list_table_root(&uri).await?;
    let listing_secs = secs(t);
    let t = Instant::now();
    let commit_lines = read_all_commits(&table_dir.join("_delta_log"))?;
    let read_commits_secs = secs(t);

    let rss_before = own_rss_mb();
    let prober = Prober::new();
    let t = Instant::now();
    let cold = prober.probe(&uri, &options).await?;
    let cold_secs = secs(t);
    let rss_after = own_rss_mb();
    // until the first damage check has ended: idle re-probes (one LIST of the log each)
    // the first-sight work left beside the cold probe: when each part's result was in
    let (mut check_pending, mut history_pending) =
        (cold.damage_check_pending, cold.history_pending);
    let (mut first_check_secs, mut history_secs) = (cold_secs, cold_secs);
    while check_pending || history_pending {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let probe = prober.probe(&uri, &options).await?;
        if check_pending && !probe.damage_check_pending {
            (check_pending, first_check_secs) = (false, secs(t));
        }
        if history_pending && !probe.history_pending {
            (history_pending, history_secs) = (false, secs(t));
        }
    }
    if cold.files != files {
        anyhow::bail!(
            "the cold probe counted {} active files, the log holds {files}",
            cold.files
        );
    }

    for version in shape.commits + 1..=shape.commits + NEW_COMMITS {
        write_add_commit(&table_dir, version, shape, now_ms)?;
    }
    let t = Instant::now();
    let again = prober.probe(&uri, &options).await?;
    let incremental_secs = secs(t);
    let expected = files + NEW_COMMITS * FILES_PER_COMMIT;
    if again.files != expected {
        anyhow::bail!(
            "the re-probe counted {} active files, the log holds {expected}",
            again.files
        );
    }
    eprintln!(
        "object-store listing of {listed} objects {listing_secs:.2}s | reading {commit_lines} \
         log lines {read_commits_secs:.2}s"
    );
    eprintln!(
        "deltalake load {load_secs:.2}s | cold probe {cold_secs:.2}s (RSS {rss_before:.0} -> \
         {rss_after:.0} MB), its damage check ended at {first_check_secs:.2}s, its history \
         read at {history_secs:.2}s | re-probe after {NEW_COMMITS} commits \
         {incremental_secs:.3}s"
    );
    Ok(json!({
        "build_profile": crate::build_profile(),
        "table": uri,
        "files": files,
        "partitions": shape.partitions,
        "commits": shape.commits + 1,
        "checkpoint_version": shape.commits,
        "log_bytes": log_bytes,
        "version_before": cold.version,
        "version_after": again.version,
        "new_commits": NEW_COMMITS,
        "deltalake_load_seconds": load_secs,
        "object_store_listing_seconds": listing_secs,
        "objects_listed": listed,
        "read_all_json_commits_seconds": read_commits_secs,
        "cold_probe_seconds": cold_secs,
        "cold_probe_damage_check_pending": cold.damage_check_pending,
        "first_damage_check_ended_seconds": first_check_secs,
        "cold_probe_history_pending": cold.history_pending,
        "first_history_read_ended_seconds": history_secs,
        "incremental_probe_seconds": incremental_secs,
        "process_rss_mb_before_probe": rss_before,
        "process_rss_mb_after_probe": rss_after,
    }))
}

fn commit_path(table: &Path, version: u64) -> std::path::PathBuf {
    table.join("_delta_log").join(format!("{version:020}.json"))
}

fn write_commit(table: &Path, version: u64, actions: &[Value]) -> Result<()> {
    let path = commit_path(table, version);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut text = String::new();
    for action in actions {
        writeln!(text, "{action}")?;
    }
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

/// Commit 0: protocol and metadata of a table partitioned by `day`.
fn create_actions(now_ms: i64) -> Vec<Value> {
    let schema = json!({
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": true, "metadata": {}},
            {"name": "user_id", "type": "long", "nullable": true, "metadata": {}},
            {"name": "day", "type": "string", "nullable": true, "metadata": {}},
        ]
    });
    vec![
        json!({"commitInfo": {"timestamp": now_ms, "operation": "CREATE TABLE",
            "operationParameters": {}, "clientVersion": "tk-bench"}}),
        json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        json!({"metaData": {
            "id": uuid::Uuid::new_v4().to_string(),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema.to_string(),
            "partitionColumns": ["day"],
            "configuration": {},
            "createdTime": now_ms,
        }}),
    ]
}

/// A WRITE commit adding `FILES_PER_COMMIT` files (and their empty placeholders).
fn write_add_commit(table: &Path, version: u64, shape: Shape, now_ms: i64) -> Result<()> {
    let mut actions = vec![json!({"commitInfo": {
        "timestamp": now_ms, "operation": "WRITE",
        "operationParameters": {"mode": "Append"}, "clientVersion": "tk-bench"}})];
    for i in 0..FILES_PER_COMMIT {
        let n = version * FILES_PER_COMMIT + i;
        let day = format!("2026-{:03}", n % shape.partitions);
        let path = format!("day={day}/part-{n:07}-{version:05}.c000.snappy.parquet");
        let file = table.join(&path);
        if let Some(parent) = file.parent() {
            if !parent.exists() {
                std::fs::create_dir_all(parent)?;
            }
        }
        std::fs::File::create(&file).with_context(|| format!("creating {}", file.display()))?;
        let stats = json!({"numRecords": 1000, "minValues": {"id": n * 1000, "user_id": 0},
            "maxValues": {"id": n * 1000 + 999, "user_id": 9999},
            "nullCount": {"id": 0, "user_id": 0}});
        actions.push(json!({"add": {
            "path": path,
            "partitionValues": {"day": day},
            "size": 0,
            "modificationTime": now_ms,
            "dataChange": true,
            "stats": stats.to_string(),
        }}));
    }
    write_commit(table, version, &actions)
}

/// Objects under the table root, listed through deltalake's object store for the table.
async fn list_table_root(uri: &str) -> Result<u64> {
    use futures::TryStreamExt as _;
    let table = open_table(uri).await?;
    let count = table
        .object_store()
        .list(None)
        .try_fold(0u64, |n, _| async move { Ok(n + 1) })
        .await
        .with_context(|| format!("listing {uri}"))?;
    Ok(count)
}

/// Reads every JSON commit under `log_dir` and parses each line; returns the line count.
fn read_all_commits(log_dir: &Path) -> Result<u64> {
    let mut lines = 0;
    for entry in std::fs::read_dir(log_dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path)?;
            for line in text.lines() {
                let _: Value = serde_json::from_str(line)
                    .with_context(|| format!("parsing {}", path.display()))?;
                lines += 1;
            }
        }
    }
    Ok(lines)
}

fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let meta = entry?.metadata()?;
        if meta.is_file() {
            total += meta.len();
        }
    }
    Ok(total)
}
