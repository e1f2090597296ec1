//! Z-ordering: clustering files on chosen columns, only in partitions that received new data.
//!
//! Owns scoping (partitions with data-changing adds since the last Z-order's version, read from
//! the log) and running deltalake's `OptimizeType::ZOrder` on them. Z-order is not idempotent:
//! every run rewrites every file of a scoped partition, so unscoped runs are a standing bill.
//! deltalake 1.1.x records no Z-order columns in its commit; this module writes Spark's
//! `operationParameters.zOrderBy` itself so history shows (and the probe finds) Z-order runs.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU64;
use std::time::Instant;

use deltalake::DeltaTable;
use serde::Serialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::compact::validate_sizing;
use crate::error::DeltaError;
use crate::log::{ordered_partition_values, partition_key, read_commits};
use crate::maintainable::{check_maintainable, TableProtocol};
use crate::open::open_table;
use crate::presence::ensure_present;
use crate::report::{MaintenanceOp, OpReport};
use crate::rewrite::{
    filter_sets, optimize_once, record_commits, PartitionScope, Rewrite, RewriteSpec,
};
use crate::run::{cancellable, run_marker, ConflictRetry};
use crate::snapshot::{active_files, paths};

const OP: MaintenanceOp = MaintenanceOp::Zorder;

/// Options of one Z-order run.
#[derive(Debug, Clone)]
pub struct ZorderOptions {
    /// Columns to cluster on; must not be partition columns.
    pub columns: Vec<String>,
    /// Size of the files written, in bytes.
    pub target_file_size: u64,
    /// Version of the last Z-order: only partitions that received data after it are rewritten.
    /// `None` rewrites every partition.
    pub since_version: Option<i64>,
    /// Plan and report, change nothing.
    pub dry_run: bool,
    /// Commit conflicts to retry before giving up with [`DeltaError::Conflict`].
    pub max_conflict_retries: u32,
}

/// Data files added since a version, by partition.
#[derive(Debug, Clone, Serialize)]
pub struct FilesAddedSince {
    /// The version counted from (exclusive).
    pub since_version: i64,
    /// The version counted to (inclusive).
    pub to_version: i64,
    /// Data-changing adds (`dataChange=true`; rewrites by OPTIMIZE are not new data).
    pub files: u64,
    /// The same, by partition key (`""` for an unpartitioned table).
    pub by_partition: BTreeMap<String, u64>,
    /// False when commits after `since_version` are no longer on disk (log cleanup): callers
    /// must then assume every partition changed.
    pub complete: bool,
}

/// Counts data files added after `since_version` up to the table's loaded version.
pub async fn files_added_since(
    table: &DeltaTable,
    uri: &str,
    since_version: i64,
) -> Result<FilesAddedSince, DeltaError> {
    scopes_added_since(table, uri, since_version)
        .await
        .map(|(summary, _)| summary)
}

async fn scopes_added_since(
    table: &DeltaTable,
    uri: &str,
    since_version: i64,
) -> Result<(FilesAddedSince, Vec<PartitionScope>), DeltaError> {
    let current = table.version().unwrap_or(0);
    let partition_columns = TableProtocol::of(uri, table)?.partition_columns;
    let from = u64::try_from(since_version.saturating_add(1)).unwrap_or(0);
    let mut summary = FilesAddedSince {
        since_version,
        to_version: i64::try_from(current).unwrap_or(i64::MAX),
        files: 0,
        by_partition: BTreeMap::new(),
        complete: true,
    };
    let mut scopes = BTreeSet::new();
    if from > current {
        return Ok((summary, Vec::new()));
    }
    for (_, commit) in read_commits(table.log_store().as_ref(), uri, from..=current).await? {
        let Some(commit) = commit else {
            summary.complete = false;
            continue;
        };
        for add in commit.adds.iter().filter(|a| a.data_change) {
            let key = partition_key(&partition_columns, &add.partition_values);
            *summary.by_partition.entry(key.clone()).or_default() += 1;
            summary.files += 1;
            scopes.insert(PartitionScope {
                key,
                values: ordered_partition_values(&partition_columns, &add.partition_values),
            });
        }
    }
    Ok((summary, scopes.into_iter().collect()))
}

fn validate_columns(
    uri: &str,
    table: &DeltaTable,
    protocol: &TableProtocol,
    columns: &[String],
) -> Result<(), DeltaError> {
    let invalid = |reason: String| DeltaError::InvalidOptions {
        table: uri.to_owned(),
        operation: OP,
        reason,
    };
    if columns.is_empty() {
        return Err(invalid("`layout.zorder` names no column".into()));
    }
    let partition: Vec<&String> = columns
        .iter()
        .filter(|c| protocol.partition_columns.contains(c))
        .collect();
    if !partition.is_empty() {
        return Err(invalid(format!(
            "Z-order columns {partition:?} are partition columns; remove them from `layout.zorder`"
        )));
    }
    let schema = table
        .snapshot()
        .map_err(|err| DeltaError::delta(uri, "reading the schema", err))?
        .schema();
    for column in columns {
        let top = column.split('.').next().unwrap_or(column);
        if schema.field(top).is_none() {
            return Err(invalid(format!(
                "Z-order column `{column}` is not in the table schema"
            )));
        }
    }
    Ok(())
}

/// Z-orders `table_uri` on `options.columns`, scoped to partitions with new data.
///
/// Cancellation drops the running OPTIMIZE before it commits; see the crate docs.
pub async fn zorder(
    table_uri: &str,
    options: &ZorderOptions,
    cancel: &CancellationToken,
) -> Result<OpReport, DeltaError> {
    let started = Instant::now();
    let target = validate_sizing(table_uri, OP, options.target_file_size, 1.0)?;
    let run_id = Uuid::new_v4().to_string();
    let mut retry = ConflictRetry::new(options.max_conflict_retries);
    let mut report: Option<OpReport> = None;
    loop {
        match attempt(table_uri, options, target, &run_id, &mut report, cancel).await {
            Ok(()) => break,
            Err(err) => retry.after_failure(err, cancel, table_uri, OP).await?,
        }
    }
    let mut report = report.ok_or_else(|| DeltaError::IncompleteLog {
        table: table_uri.to_owned(),
        reason: "z-order finished without reading the table".into(),
    })?;
    report.conflicts += retry.conflicts;
    Ok(report.finish(started))
}

async fn attempt(
    uri: &str,
    options: &ZorderOptions,
    target: NonZeroU64,
    run_id: &str,
    report: &mut Option<OpReport>,
    cancel: &CancellationToken,
) -> Result<(), DeltaError> {
    let table = cancellable(cancel, uri, OP, open_table(uri)).await?;
    let version = table.version().unwrap_or(0);
    let report = report.get_or_insert_with(|| {
        OpReport::new(
            OP,
            uri,
            i64::try_from(version).unwrap_or(i64::MAX),
            options.dry_run,
        )
    });
    let protocol = TableProtocol::of(uri, &table)?;
    check_maintainable(&protocol, OP)?;
    validate_columns(uri, &table, &protocol, &options.columns)?;

    let files = active_files(&table, uri).await?;
    cancellable(cancel, uri, OP, ensure_present(&table, uri, &files)).await?;
    let all_scopes: BTreeSet<PartitionScope> = files
        .iter()
        .map(|f| PartitionScope {
            key: partition_key(&protocol.partition_columns, &f.partition_values),
            values: ordered_partition_values(&protocol.partition_columns, &f.partition_values),
        })
        .collect();
    // after a retry, our own earlier commits are newer than `since_version` but hold no new data
    let scopes: Vec<PartitionScope> = match options.since_version {
        None => all_scopes.into_iter().collect(),
        Some(since) => {
            let (added, scopes) =
                cancellable(cancel, uri, OP, scopes_added_since(&table, uri, since)).await?;
            if added.complete {
                // a partition that received files and lost them all since has nothing to order
                scopes
                    .into_iter()
                    .filter(|s| all_scopes.contains(s))
                    .collect()
            } else {
                tracing::info!(
                    table = uri,
                    since,
                    "commits since the last z-order were cleaned up, z-ordering every partition"
                );
                all_scopes.into_iter().collect()
            }
        }
    };
    if scopes.is_empty() {
        if report.commits.is_empty() {
            report.skipped = Some(match options.since_version {
                Some(since) => format!("no data files were added since version {since}"),
                None => "the table holds no data files".into(),
            });
        }
        return Ok(());
    }
    if options.dry_run {
        let keys: BTreeSet<&str> = scopes.iter().map(|s| s.key.as_str()).collect();
        let in_scope = files.iter().filter(|f| {
            keys.contains(partition_key(&protocol.partition_columns, &f.partition_values).as_str())
        });
        let (count, bytes) = in_scope.fold((0u64, 0u64), |(c, b), f| (c + 1, b + f.size));
        report.files_removed = count;
        report.bytes_removed = bytes;
        report.partitions_touched = keys.into_iter().map(str::to_owned).collect();
        return Ok(());
    }

    tracing::info!(table = uri, version, partitions = scopes.len(), columns = ?options.columns, "z-ordering");
    let mut marker = run_marker(run_id, OP);
    marker.insert(
        "operationParameters".to_owned(),
        json!({ "zOrderBy": options.columns }),
    );
    let mut known = Some((version, paths(&files)));
    drop(files);
    let spec = RewriteSpec {
        operation: OP,
        rewrite: Rewrite::ZOrder(options.columns.clone()),
        target_size: target,
        marker,
    };
    let mut current = table;
    for filters in filter_sets(&protocol.partition_columns, &scopes) {
        let base_version = current.version().unwrap_or(0);
        let known_at_base = known.take().filter(|(v, _)| *v == base_version);
        current = optimize_once(uri, &current, &spec, &filters, cancel).await?;
        known = record_commits(
            uri,
            &current,
            base_version,
            run_id,
            known_at_base,
            &protocol.partition_columns,
            report,
        )
        .await?;
    }
    report.skipped = if report.commits.is_empty() {
        Some("deltalake wrote no z-order commit".into())
    } else {
        None
    };
    Ok(())
}
