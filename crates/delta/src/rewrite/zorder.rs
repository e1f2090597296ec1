//! Z-ordering: clustering files on chosen columns, only in partitions that received new data.
//!
//! Owns scoping (partitions with data-changing adds since the last Z-order's version, read from
//! the log) and the checks of the columns; the rewrite itself is `cluster.rs`'s. Z-order is not
//! idempotent: every run rewrites every file of a scoped partition, so unscoped runs are a
//! standing bill.

use std::collections::{BTreeMap, BTreeSet};

use deltalake::DeltaTable;
use serde::Serialize;
use tablekeeper_vocab::{Compression, Operation};
use tokio_util::sync::CancellationToken;

use crate::error::DeltaError;
use crate::features::protocol::TableProtocol;
use crate::log::read::{ordered_partition_values, partition_key, read_commits};
use crate::prepare::Prepared;
use crate::rewrite::plan::PartitionScope;
use crate::rewrite::plan::Plan;
use crate::run::cancellable;

const OP: Operation = Operation::Zorder;

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
    /// The encoding of the files written (`layout.compression`).
    pub compression: Compression,
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
    let current = crate::open::loaded_version(uri, table)?;
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
    if columns.len() > crate::rewrite::zkey::MAX_COLUMNS {
        return Err(invalid(format!(
            "`layout.zorder` names {} columns; Z-order clusters on at most {}",
            columns.len(),
            crate::rewrite::zkey::MAX_COLUMNS
        )));
    }
    let mut paths = Vec::with_capacity(columns.len());
    for column in columns {
        paths.push(
            tablekeeper_vocab::column_path(column)
                .map_err(|e| invalid(format!("`layout.zorder`: {e}")))?,
        );
    }
    let partition: Vec<&String> = columns
        .iter()
        .zip(&paths)
        .filter(|(_, path)| {
            matches!(path.as_slice(), [name] if protocol.partition_columns.contains(name))
        })
        .map(|(column, _)| column)
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
    let names: Vec<&String> = schema.fields().map(|f| f.name()).collect();
    for (column, path) in columns.iter().zip(&paths) {
        if schema.field(&path[0]).is_none() {
            return Err(invalid(format!(
                "Z-order column `{column}` is not in the table schema{}",
                did_you_mean(column, &path[0], &names)
            )));
        }
    }
    Ok(())
}

/// A hint at the column `column` (whose top-level name parsed as `top`) may have meant: the
/// same name quoted when the schema has a column named as written with its dots, else a
/// column whose name is a few edits away.
fn did_you_mean(column: &str, top: &str, names: &[&String]) -> String {
    // a name as a column list spells it, in backticks for the message when it has none
    let quoted = |name: &str| {
        let spelled = tablekeeper_vocab::quote_path(&[name.to_owned()]);
        if spelled.starts_with('`') {
            spelled
        } else {
            format!("`{spelled}`")
        }
    };
    if names.iter().any(|n| n.as_str() == column) {
        return format!(
            " (did you mean {}? a name holding a dot is quoted in backticks)",
            quoted(column)
        );
    }
    names
        .iter()
        .map(|n| (strsim::levenshtein(n, top), n.as_str()))
        .filter(|(distance, _)| *distance <= 3)
        .min()
        .map(|(_, n)| format!(" (did you mean {}?)", quoted(n)))
        .unwrap_or_default()
}

/// The partitions that received data since the last Z-order (every partition when that is
/// unknown), and what rewriting them would read.
pub(crate) async fn plan(
    uri: &str,
    prepared: &Prepared,
    options: &ZorderOptions,
    cancel: &CancellationToken,
) -> Result<Plan, DeltaError> {
    let Prepared {
        table,
        protocol,
        files,
        ..
    } = prepared;
    validate_columns(uri, table, protocol, &options.columns)?;
    if let Some(clustering) = crate::rewrite::liquid::clustering_columns(uri, table).await? {
        return Err(DeltaError::InvalidOptions {
            table: uri.to_owned(),
            operation: OP,
            reason: format!(
                "the table uses liquid clustering by {clustering:?} (its `delta.clustering` \
                 domain): its layout is its clustering columns, so remove `layout.zorder`; \
                 compaction clusters its new files by them"
            ),
        });
    }
    let scope_of = |f: &crate::snapshot::ActiveFile| PartitionScope {
        key: partition_key(&protocol.partition_columns, &f.partition_values),
        values: ordered_partition_values(&protocol.partition_columns, &f.partition_values),
    };
    let all_scopes: BTreeSet<PartitionScope> = files.iter().map(scope_of).collect();
    // after a retry, our own earlier commits are newer than `since_version` but hold no new data
    let scopes: Vec<PartitionScope> = match options.since_version {
        None => all_scopes.into_iter().collect(),
        Some(since) => {
            let (added, scopes) =
                cancellable(cancel, uri, OP, scopes_added_since(table, uri, since)).await?;
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
        return Ok(Plan::Nothing(match options.since_version {
            Some(since) => format!("no data files were added since version {since}"),
            None => "the table holds no data files".into(),
        }));
    }
    let keys: BTreeSet<&str> = scopes.iter().map(|s| s.key.as_str()).collect();
    let (count, bytes) = files
        .iter()
        .filter(|f| keys.contains(scope_of(f).key.as_str()))
        .fold((0u64, 0u64), |(c, b), f| (c + 1, b + f.size));
    Ok(Plan::Rewrite {
        scopes,
        files: count,
        bytes,
    })
}
