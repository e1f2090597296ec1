//! Scoped rewrites shared by compaction, Z-order and purge.
//!
//! Owns turning a set of partitions into partition filters, running one rewrite per filter set
//! (cancellable: compaction's bins in [`crate::bins`], or deltalake's OPTIMIZE when no bin can
//! be copied; Z-order in [`crate::cluster`]; purge in [`crate::purge`]), and reading back what
//! each run committed: the commits carrying the run's
//! marker, each checked by the duplicate-rewrite guard before anything else happens. This module
//! never decides *which* partitions need work; compaction, Z-order and purge do.
//!
//! **The log records every bin.** An exact repair of a stale write ([`crate::stale`],
//! [`crate::repair`]) needs to know which inputs became which outputs. Z-order rewrites each
//! partition as one bin, so its single commit says it (grouped by partition). Compaction may
//! make several bins per partition and commits each on its own (a cancelled run also keeps the
//! bins it committed). The cost is one small commit per compaction bin instead of one per run.
//! Z-order keeps one commit per run, because the next Z-order is scoped by the version of the
//! last one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::num::NonZeroU64;
use std::time::Duration;

use deltalake::kernel::transaction::CommitProperties;
use deltalake::kernel::{EagerSnapshot, LogicalFileView};
use deltalake::operations::optimize::OptimizeType;
use deltalake::{DeltaTable, FilterLiteral, FilterOp, FilterValue};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::DeltaError;
use crate::guard::{check_commit, Rows, Verdict};
use crate::log::{partition_key, read_commits, Commit};
use crate::report::OpReport;
use crate::run::{cancellable, run_commits};
use crate::snapshot::{apply, ActiveSet};
use tablekeeper_vocab::Operation;

/// One partition to work on: its key and its raw values in partition-column order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PartitionScope {
    pub key: String,
    pub values: Vec<(String, Option<String>)>,
}

/// An owned partition filter literal (deltalake's literals borrow their strings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OwnedFilter {
    /// `col = value`; an empty value selects the null partition.
    Eq(String, String),
    /// `col IN (values)`, none of them null.
    In(String, Vec<String>),
}

/// Filter sets (each a conjunction) that together select exactly `scopes`.
///
/// - unpartitioned table: one empty set, the whole table;
/// - one partition column: one `IN` set for all non-null values (one commit), plus an `=` set
///   for the null partition (deltalake's `IN` never matches null);
/// - several columns: one `=` conjunction per partition.
pub(crate) fn filter_sets(
    partition_columns: &[String],
    scopes: &[PartitionScope],
) -> Vec<Vec<OwnedFilter>> {
    if partition_columns.is_empty() {
        return if scopes.is_empty() {
            Vec::new()
        } else {
            vec![Vec::new()]
        };
    }
    if let [column] = partition_columns {
        let mut values = BTreeSet::new();
        let mut null = false;
        for scope in scopes {
            match scope.values.first().and_then(|(_, v)| v.clone()) {
                Some(v) => {
                    values.insert(v);
                }
                None => null = true,
            }
        }
        let mut sets = Vec::new();
        if !values.is_empty() {
            sets.push(vec![OwnedFilter::In(
                column.clone(),
                values.into_iter().collect(),
            )]);
        }
        if null {
            sets.push(vec![OwnedFilter::Eq(column.clone(), String::new())]);
        }
        return sets;
    }
    scopes
        .iter()
        .map(|scope| {
            scope
                .values
                .iter()
                .map(|(col, v)| OwnedFilter::Eq(col.clone(), v.clone().unwrap_or_default()))
                .collect()
        })
        .collect()
}

/// The snapshot of `table` a rewrite plans and reads on.
pub(crate) fn planned_snapshot(uri: &str, table: &DeltaTable) -> Result<EagerSnapshot, DeltaError> {
    Ok(table
        .snapshot()
        .map_err(|e| DeltaError::delta(uri, "reading the snapshot", e))?
        .snapshot()
        .clone())
}

/// The active files of `snapshot` in the partitions `filters` select, as `choose` maps them
/// (`None` leaves a file out), grouped by partition key in key order. Every rewrite kind picks
/// its inputs here.
pub(crate) fn select_files<T>(
    uri: &str,
    snapshot: &EagerSnapshot,
    filters: &[OwnedFilter],
    mut choose: impl FnMut(&LogicalFileView, HashMap<String, Option<String>>) -> Option<T>,
) -> Result<BTreeMap<String, Vec<T>>, DeltaError> {
    let partition_columns = snapshot.metadata().partition_columns();
    let mut partitions: BTreeMap<String, Vec<T>> = BTreeMap::new();
    for file in snapshot
        .try_log_data()
        .map_err(|e| DeltaError::delta(uri, "reading the active files", e))?
    {
        let values = file.partition_values_map();
        if !matches(filters, &values) {
            continue;
        }
        let key = partition_key(partition_columns, &values);
        if let Some(chosen) = choose(&file, values) {
            partitions.entry(key).or_default().push(chosen);
        }
    }
    Ok(partitions)
}

/// Whether a file's partition values satisfy a conjunction of filters (see
/// [`crate::rewrite::filter_sets`]: an empty value stands for the null partition).
pub(crate) fn matches(filters: &[OwnedFilter], values: &HashMap<String, Option<String>>) -> bool {
    filters.iter().all(|filter| match filter {
        OwnedFilter::Eq(column, value) => {
            let actual = values.get(column).cloned().flatten().unwrap_or_default();
            actual == *value
        }
        OwnedFilter::In(column, set) => values
            .get(column)
            .cloned()
            .flatten()
            .is_some_and(|v| set.contains(&v)),
    })
}

fn literals(filters: &[OwnedFilter]) -> Vec<FilterLiteral<'_>> {
    filters
        .iter()
        .map(|f| match f {
            OwnedFilter::Eq(col, v) => {
                (col.as_str(), FilterOp::Eq, FilterValue::Scalar(v.as_str()))
            }
            OwnedFilter::In(col, vs) => (
                col.as_str(),
                FilterOp::In,
                FilterValue::Set(vs.iter().map(String::as_str).collect()),
            ),
        })
        .collect()
}

/// What kind of rewrite to run.
#[derive(Debug, Clone)]
pub(crate) enum Rewrite {
    /// Built by [`crate::bins`]: the files under `small_below` bytes, bin-packed.
    Compact {
        small_below: u64,
    },
    ZOrder(Vec<String>),
    /// Built by [`crate::purge`] from deltalake's parts, not by OPTIMIZE.
    Purge,
}

/// Everything one scoped OPTIMIZE needs besides the table and its filters.
#[derive(Debug, Clone)]
pub(crate) struct RewriteSpec {
    pub operation: Operation,
    pub rewrite: Rewrite,
    pub target_size: NonZeroU64,
    /// Commit metadata: the run marker, plus `operationParameters` for Z-order.
    pub marker: HashMap<String, Value>,
}

/// Runs one rewrite (compaction, Z-order or purge) over `filters` from `table`'s snapshot.
/// Returns the table deltalake hands back (refreshed to the latest version).
pub(crate) async fn optimize_once(
    uri: &str,
    table: &DeltaTable,
    spec: &RewriteSpec,
    filters: &[OwnedFilter],
    cancel: &CancellationToken,
) -> Result<DeltaTable, DeltaError> {
    match &spec.rewrite {
        Rewrite::Compact { small_below } => {
            if let Some(table) =
                crate::bins::compact(uri, table, spec, *small_below, filters, cancel).await?
            {
                return Ok(table);
            }
            // no bin can be copied: deltalake's OPTIMIZE decodes them all, as fast as it does
            // for any other caller and faster than a scan per bin
        }
        Rewrite::ZOrder(columns) => {
            return crate::cluster::rewrite(uri, table, spec, columns, filters, cancel).await
        }
        Rewrite::Purge => return crate::purge::rewrite(uri, table, spec, filters, cancel).await,
    }
    // deltalake's OPTIMIZE holds the decoding share of the replica's budget while it runs, so
    // compaction bins never add up past the budget beside it
    let _reserved = crate::budget::budget()
        .reserve(crate::decode::MEMORY_BYTES)
        .await;
    let literals = literals(filters);
    let builder = table
        .clone()
        .optimize()
        .with_type(OptimizeType::Compact)
        .with_filters(&literals)
        .with_target_size(spec.target_size)
        .with_commit_properties(CommitProperties::default().with_metadata(spec.marker.clone()))
        // commit every bin on its own: see the module docs
        .with_min_commit_interval(Duration::ZERO);
    let step = async {
        builder
            .await
            .map(|(table, _metrics)| table)
            .map_err(|err| DeltaError::delta(uri, "optimize", err))
    };
    cancellable(cancel, uri, spec.operation, step).await
}

/// The active files at a known version, carried from one scoped run to the next so the guard
/// does not reload the snapshot when nobody else committed in between.
pub(crate) type KnownActive = Option<(u64, ActiveSet)>;

/// Reads the commits of `run_id` after `after_version`, guards each, and adds them to `report`.
///
/// A commit that landed later than the version after the one it was planned on (the base, or
/// our previous commit) means another writer won that version and deltalake rebased ours: each
/// such commit counts as a conflict in the report.
///
/// Returns the active files after the last commit when they can be derived from `known`
/// (our commits followed each other directly), else `None`.
pub(crate) async fn record_commits(
    uri: &str,
    table: &DeltaTable,
    after_version: u64,
    run_id: &str,
    mut known: KnownActive,
    partition_columns: &[String],
    report: &mut OpReport,
) -> Result<KnownActive, DeltaError> {
    let log_store = table.log_store();
    let commits = run_commits(log_store.as_ref(), uri, after_version, run_id).await?;
    let mut previous = after_version;
    for commit in &commits {
        if commit.version > previous + 1 {
            report.conflicts += 1;
            tracing::info!(
                table = uri,
                planned_after = previous,
                committed_at = commit.version,
                "another writer committed first; deltalake rebased our commit"
            );
        }
        previous = commit.version;
        known = catch_up(uri, log_store.as_ref(), known, commit.version).await?;
        match check_commit(
            uri,
            commit,
            known.as_ref().map(|(v, set)| (*v, set)),
            Rows::Kept,
        )
        .await?
        {
            Verdict::Clean => {}
            Verdict::Unverified(reason) => report.warnings.push(reason),
        }
        add_commit(report, commit, partition_columns);
        known = match known {
            Some((version, mut set)) if version + 1 == commit.version => {
                apply(&mut set, &commit.removes, &commit.adds);
                Some((commit.version, set))
            }
            _ => None,
        };
    }
    Ok(known)
}

/// Advances a known active set to `version - 1` by applying the commits other writers made in
/// between, read from the log. Those are the newest commits before ours, so a log cleanup that
/// removed the version the set was taken at usually left them; `None` when one is gone.
async fn catch_up(
    uri: &str,
    log_store: &dyn deltalake::logstore::LogStore,
    known: KnownActive,
    version: u64,
) -> Result<KnownActive, DeltaError> {
    let Some((mut at, mut set)) = known else {
        return Ok(None);
    };
    if at + 1 >= version {
        return Ok(Some((at, set)));
    }
    for (v, commit) in read_commits(log_store, uri, at + 1..version).await? {
        let Some(commit) = commit else {
            return Ok(None);
        };
        apply(&mut set, &commit.removes, &commit.adds);
        at = v;
    }
    Ok(Some((at, set)))
}

fn add_commit(report: &mut OpReport, commit: &Commit, partition_columns: &[String]) {
    let version = i64::try_from(commit.version).unwrap_or(i64::MAX);
    report.commits.push(version);
    report.version_after = Some(version);
    report.files_removed += commit.removes.len() as u64;
    report.bytes_removed += commit.removes.iter().filter_map(|r| r.size).sum::<u64>();
    report.files_added += commit.adds.len() as u64;
    report.bytes_added += commit.adds.iter().filter_map(|a| a.size).sum::<u64>();
    let mut touched: BTreeSet<String> = report.partitions_touched.drain(..).collect();
    for action in commit.removes.iter().chain(commit.adds.iter()) {
        touched.insert(partition_key(partition_columns, &action.partition_values));
    }
    report.partitions_touched = touched.into_iter().collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(values: &[(&str, Option<&str>)]) -> PartitionScope {
        PartitionScope {
            key: String::new(),
            values: values
                .iter()
                .map(|(c, v)| ((*c).to_owned(), v.map(str::to_owned)))
                .collect(),
        }
    }

    #[test]
    fn unpartitioned_tables_use_no_filter() {
        assert_eq!(
            filter_sets(&[], &[scope(&[])]),
            vec![Vec::<OwnedFilter>::new()]
        );
        assert!(filter_sets(&[], &[]).is_empty());
    }

    #[test]
    fn one_partition_column_becomes_one_in_filter_plus_null() {
        let cols = vec!["d".to_owned()];
        let sets = filter_sets(
            &cols,
            &[
                scope(&[("d", Some("2"))]),
                scope(&[("d", None)]),
                scope(&[("d", Some("1"))]),
            ],
        );
        assert_eq!(
            sets,
            vec![
                vec![OwnedFilter::In("d".into(), vec!["1".into(), "2".into()])],
                vec![OwnedFilter::Eq("d".into(), String::new())],
            ]
        );
    }

    #[test]
    fn several_partition_columns_become_one_conjunction_each() {
        let cols = vec!["d".to_owned(), "k".to_owned()];
        let sets = filter_sets(&cols, &[scope(&[("d", Some("1")), ("k", None)])]);
        assert_eq!(
            sets,
            vec![vec![
                OwnedFilter::Eq("d".into(), "1".into()),
                OwnedFilter::Eq("k".into(), String::new())
            ]]
        );
    }

    fn values(pairs: &[(&str, Option<&str>)]) -> HashMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
            .collect()
    }

    #[test]
    fn filters_select_partitions_as_deltalake_would() {
        let d1 = values(&[("d", Some("1"))]);
        let null = values(&[("d", None)]);
        let in_set = [OwnedFilter::In("d".into(), vec!["1".into(), "2".into()])];
        assert!(matches(&in_set, &d1));
        assert!(!matches(&in_set, &null));
        let is_null = [OwnedFilter::Eq("d".into(), String::new())];
        assert!(matches(&is_null, &null));
        assert!(!matches(&is_null, &d1));
        assert!(matches(&[], &d1));
    }
}
