//! Running one scoped rewrite and reading back what it committed.
//!
//! Owns running one rewrite per filter set (cancellable: compaction's bins in
//! [`crate::rewrite::bins`]; Z-order in [`crate::rewrite::cluster`]; purge in
//! [`crate::rewrite::purge`]), and reading back what each
//! run committed: the commits carrying the run's marker, each checked by the duplicate-rewrite
//! guard before anything else happens. This module never decides *which* partitions need work
//! (compaction, Z-order and purge do) nor which files a filter selects ([`crate::rewrite::select`]).
//!
//! **The log records every bin.** An exact repair of a stale write ([`crate::watch::stale`],
//! [`crate::watch::repair`]) needs to know which inputs became which outputs. Z-order rewrites
//! each partition as one bin, so its single commit says it (grouped by partition). Compaction may
//! make several bins per partition and commits each on its own (a cancelled run also keeps the
//! bins it committed). The cost is one small commit per compaction bin instead of one per run.
//! Z-order keeps one commit per run, because the next Z-order is scoped by the version of the
//! last one.

use std::collections::BTreeSet;

use deltalake::DeltaTable;
use tokio_util::sync::CancellationToken;

use crate::error::DeltaError;
use crate::log::read::{partition_key, read_commits, Commit};
use crate::report::OpReport;
use crate::rewrite::guard::{check_commit, Rows, Verdict};
use crate::rewrite::plan::{Rewrite, RewriteSpec};
use crate::rewrite::select::OwnedFilter;
use crate::run::run_commits;
use crate::snapshot::{apply, ActiveSet};

/// Runs one rewrite (compaction, Z-order or purge) over `filters` from `table`'s snapshot.
/// Returns the table refreshed to the latest version.
pub(crate) async fn optimize_once(
    uri: &str,
    table: &DeltaTable,
    spec: &RewriteSpec,
    filters: &[OwnedFilter],
    cancel: &CancellationToken,
) -> Result<DeltaTable, DeltaError> {
    match &spec.rewrite {
        Rewrite::Compact { .. } => {
            crate::rewrite::bins::compact(uri, table, spec, filters, cancel).await
        }
        Rewrite::ZOrder {
            columns,
            clustering,
        } => {
            crate::rewrite::cluster::rewrite(
                uri,
                table,
                spec,
                columns,
                *clustering,
                filters,
                cancel,
            )
            .await
        }
        Rewrite::Purge => crate::rewrite::purge::rewrite(uri, table, spec, filters, cancel).await,
    }
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
