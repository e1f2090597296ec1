//! Checkpoints and log cleanup, each followed by proof that the table still loads.
//!
//! Owns writing a checkpoint once enough commits piled up since the last one (readers replay
//! every JSON commit after the newest checkpoint, so snapshot cost grows with that count), and
//! the only deletion of log files in tablekeeper (DESIGN.md, "Log retention and history"):
//! - the effective log retention is the longer of the inventory's and the table's
//!   `delta.logRetentionDuration`; a table that switched `delta.enableExpiredLogCleanup` off is
//!   left alone;
//! - a damaged log (a missing commit in the middle, a missing checkpoint part, a dangling
//!   `_last_checkpoint`) is refused before anything is written or deleted;
//! - only versions the caller has copied into durable history may be deleted
//!   ([`LogCleanup::Recorded`]), unless it explicitly gives that up ([`LogCleanup::Unrecorded`]);
//! - the deletion is planned and proven first ([`crate::log::integrity`]): every version from the
//!   oldest one inside the window to the latest keeps loading, the newest checkpoint stays;
//! - a pinned version ([`Pin`]) stays loadable until its pin expires, as if inside the window;
//! - checkpoint protection (`delta.requireCheckpointProtectionBeforeVersion`) keeps the log
//!   before its version whole; sidecars of v2 checkpoints are never deleted (the listing holds
//!   top-level log files only), so every retained checkpoint keeps its sidecars;
//! - afterwards a fresh reader loads the oldest retained and the latest version and must see the
//!   same files as before.
//!
//! This module never touches data files.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use chrono::Utc;
use deltalake::checkpoints::create_checkpoint;
use deltalake::logstore::object_store::ObjectStore;
use deltalake::{DeltaTable, ObjectStoreError, Path};
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use tokio_util::sync::CancellationToken;

use crate::error::DeltaError;
use crate::features::protocol::TableProtocol;
use crate::log::integrity::ensure_log_sound;
use crate::log::integrity::{plan_cleanup, CleanupBounds, CleanupPlan};
use crate::log::read::{commits_since, last_checkpoint, list_log, read_commit, LogListing};
use crate::open::{open_table, open_table_at, unguarded_log_store};
use crate::prepare::{prepare, Prepared};
use crate::report::OpReport;
use crate::retention::keep::{pinned_version, Pin};
use crate::retention::window::{
    effective_log_retention, EXPIRED_LOG_CLEANUP_PROPERTY, LOG_RETENTION_PROPERTY,
};
use crate::run::cancellable;
use crate::snapshot::{active_files, paths};
use tablekeeper_vocab::Operation;

const OP: Operation = Operation::Checkpoint;

/// Table property below whose version checkpoint protection guards the log.
const CHECKPOINT_PROTECTION_PROPERTY: &str = "delta.requireCheckpointProtectionBeforeVersion";

/// The version before which `checkpointProtection` forbids this writer to clean the log, when
/// the table supports the feature and sets one. The RFC lets only a writer that supports every
/// feature ever dropped truncate that part, in one go; tablekeeper leaves it alone.
fn checkpoint_protection(protocol: &TableProtocol) -> Option<u64> {
    protocol
        .supports_writer_feature("checkpointProtection")
        .then(|| protocol.properties.get(CHECKPOINT_PROTECTION_PROPERTY))
        .flatten()
        .and_then(|v| v.parse().ok())
}

/// Which log files a checkpoint run may delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogCleanup {
    /// Delete nothing: write the checkpoint only.
    Off,
    /// Delete expired commits only among these versions (inclusive): the ones the caller has
    /// copied into durable history (`table_commits`). `None`: nothing is recorded yet.
    Recorded(Option<(u64, u64)>),
    /// Delete expired commits whether or not their history was copied anywhere: their
    /// `commitInfo` (who changed the table, when, how) is gone with them.
    Unrecorded,
}

/// Options of one checkpoint run.
#[derive(Debug, Clone)]
pub struct CheckpointOptions {
    /// Write a checkpoint once this many commits followed the last one.
    pub max_commits_since_checkpoint: u64,
    /// The inventory's `retention.log_retention`.
    pub log_retention: Duration,
    /// Write a checkpoint even below the threshold (an operator asked for one).
    pub force: bool,
    /// What log cleanup may delete.
    pub log_cleanup: LogCleanup,
    /// Versions others rely on: log cleanup keeps every pinned version loadable until its pin
    /// expires, as it keeps the log retention window.
    pub pins: Vec<Pin>,
}

/// Checkpoints `table_uri` when due (or forced), cleans up expired log files as `options` allow
/// once the deletion is proven safe, then reloads the table from storage and fails loudly if it
/// does not read back the same.
///
/// The future is boxed here, once, so callers can spawn it without proving `Send` themselves.
pub fn checkpoint<'a>(
    table_uri: &'a str,
    options: &'a CheckpointOptions,
    cancel: &'a CancellationToken,
) -> BoxFuture<'a, Result<OpReport, DeltaError>> {
    Box::pin(crate::run::unwound(
        table_uri,
        OP,
        run(table_uri, options, cancel),
    ))
}

async fn run(
    table_uri: &str,
    options: &CheckpointOptions,
    cancel: &CancellationToken,
) -> Result<OpReport, DeltaError> {
    let started = Instant::now();
    let uri = table_uri;
    let Prepared {
        table,
        version,
        protocol,
        files,
    } = prepare(uri, OP, cancel).await?;
    let mut report = OpReport::new(OP, uri, i64::try_from(version).unwrap_or(i64::MAX), false);
    let expected = paths(&files);
    drop(files);
    let store = table.object_store();

    let previous = last_checkpoint(store.as_ref(), uri).await?;
    let listing = cancellable(cancel, uri, OP, list_log(store.as_ref(), uri)).await?;
    ensure_log_sound(uri, &listing, version, previous.map(|cp| cp.version))?;

    let pending = commits_since(version, previous);
    report.checkpoint_version = previous.map(|cp| i64::try_from(cp.version).unwrap_or(i64::MAX));
    let due =
        pending > 0 && (options.force || pending >= options.max_commits_since_checkpoint.max(1));
    let mut skipped = Vec::new();
    if due {
        tracing::info!(table = uri, version, pending, "writing checkpoint");
        cancellable(cancel, uri, OP, async {
            create_checkpoint(&table, None)
                .await
                .map_err(|err| DeltaError::delta(uri, "writing the checkpoint", err))
        })
        .await?;
        report.checkpoint_version = Some(i64::try_from(version).unwrap_or(i64::MAX));
    } else if pending == 0 {
        skipped.push(format!("version {version} already has a checkpoint"));
    } else {
        skipped.push(format!(
            "{pending} commit(s) since the last checkpoint, threshold {}",
            options.max_commits_since_checkpoint
        ));
    }

    let oldest_retained = clean_log(
        &table,
        uri,
        version,
        &protocol,
        options,
        cancel,
        &mut report,
        &mut skipped,
    )
    .await?;

    cancellable(
        cancel,
        uri,
        OP,
        canary(uri, version, oldest_retained, &expected),
    )
    .await?;
    if !due && report.log_files_deleted.unwrap_or(0) == 0 {
        report.skipped = Some(skipped.join("; "));
    }
    Ok(report.finish(started))
}

/// Deletes the expired log files `options.log_cleanup` allows, keeping the retention window,
/// every active pin's version and what checkpoint protection keeps; returns the oldest version
/// still in the log when it deleted anything. Why it did not is pushed to `skipped`.
#[allow(clippy::too_many_arguments)] // one step of `run`, over `run`'s own state
async fn clean_log(
    table: &DeltaTable,
    uri: &str,
    version: u64,
    protocol: &TableProtocol,
    options: &CheckpointOptions,
    cancel: &CancellationToken,
    report: &mut OpReport,
    skipped: &mut Vec<String>,
) -> Result<Option<u64>, DeltaError> {
    let cleanup_disabled = protocol
        .properties
        .get(EXPIRED_LOG_CLEANUP_PROPERTY)
        .is_some_and(|v| v.eq_ignore_ascii_case("false"));
    if options.log_cleanup == LogCleanup::Off {
        skipped.push("log cleanup was not asked for".into());
        return Ok(None);
    }
    if cleanup_disabled {
        skipped.push(format!(
            "log cleanup is disabled by `{EXPIRED_LOG_CLEANUP_PROPERTY}`"
        ));
        return Ok(None);
    }
    let (log_retention, drift) = effective_log_retention(
        uri,
        options.log_retention,
        protocol
            .properties
            .get(LOG_RETENTION_PROPERTY)
            .map(String::as_str),
    )?;
    report.retention_used_secs = Some(log_retention.as_secs());
    report.retention_drift = drift;
    let cutoff_ms = Utc::now()
        .timestamp_millis()
        .saturating_sub(i64::try_from(log_retention.as_millis()).unwrap_or(i64::MAX));
    let store = table.object_store();
    // the listing again: the checkpoint just written belongs in it
    let listing = cancellable(cancel, uri, OP, list_log(store.as_ref(), uri)).await?;
    let hint = last_checkpoint(store.as_ref(), uri)
        .await?
        .map(|cp| cp.version);
    let in_window = oldest_in_window(table, uri, &listing, version, cutoff_ms).await?;
    let keep_from =
        keep_log_from(table, uri, protocol, options, &listing, in_window, report).await?;
    let bounds = CleanupBounds {
        latest: version,
        keep_from,
        cutoff_ms,
        deletable: match options.log_cleanup {
            LogCleanup::Recorded(range) => Some(range.unwrap_or((1, 0))),
            LogCleanup::Unrecorded | LogCleanup::Off => None,
        },
        hint,
    };
    let plan = plan_cleanup(&listing, &bounds).map_err(|reason| DeltaError::UnsafeLogCleanup {
        table: uri.to_owned(),
        reason,
    })?;
    let Some(plan) = plan else {
        report.log_files_deleted = Some(0);
        skipped.push(no_cleanup_reason(&options.log_cleanup, keep_from));
        return Ok(None);
    };
    let deleted = cancellable(cancel, uri, OP, delete_log_files(uri, &plan)).await?;
    report.log_files_deleted = Some(deleted);
    tracing::info!(
        table = uri,
        deleted,
        commits = plan.commits.len(),
        oldest_retained = plan.oldest_retained,
        "log cleanup deleted expired log files"
    );
    Ok(Some(plan.oldest_retained))
}

/// The oldest version log cleanup must keep: the window's oldest (`in_window`), or earlier for
/// an active pin or checkpoint protection (each said in `report`'s warnings or the log).
async fn keep_log_from(
    table: &DeltaTable,
    uri: &str,
    protocol: &TableProtocol,
    options: &CheckpointOptions,
    listing: &LogListing,
    in_window: u64,
    report: &mut OpReport,
) -> Result<u64, DeltaError> {
    let mut keep_from = in_window;
    let now_ms = Utc::now().timestamp_millis();
    for pin in &options.pins {
        if !pin.active(now_ms) {
            report.warnings.push(format!(
                "pin {} expired and no longer keeps the log",
                pin.label()
            ));
            continue;
        }
        let pinned = pinned_version(uri, table, listing, pin).await?;
        if pinned < keep_from {
            tracing::info!(table = uri, pin = %pin.label(), version = pinned, "log cleanup keeps a pinned version");
            keep_from = pinned;
        }
    }
    if let Some(protected) = checkpoint_protection(protocol) {
        let earliest = listing.files.iter().map(|f| f.version).min();
        if let Some(earliest) = earliest.filter(|e| *e < protected && *e < keep_from) {
            report.warnings.push(format!(
                "checkpoint protection (`{CHECKPOINT_PROTECTION_PROPERTY}` = {protected}) keeps \
                 the log before version {protected}: only a writer that supports every feature \
                 the table ever had may truncate it, all at once"
            ));
            keep_from = earliest;
        }
    }
    Ok(keep_from)
}

fn no_cleanup_reason(cleanup: &LogCleanup, keep_from: u64) -> String {
    match cleanup {
        LogCleanup::Recorded(None) => {
            "no log file deleted: the table's history is not yet copied into the job store".into()
        }
        _ => format!(
            "no log files past the log retention before a checkpoint at or before version {keep_from}"
        ),
    }
}

/// The oldest version inside the window: the newest version committed at or before the cutoff
/// (time travel to the cutoff lands on it), by the later of its commit time and its file time,
/// so a disagreement between the two keeps more, never less. The oldest listed version when all
/// are newer.
pub(crate) async fn oldest_in_window(
    table: &deltalake::DeltaTable,
    uri: &str,
    listing: &LogListing,
    latest: u64,
    cutoff_ms: i64,
) -> Result<u64, DeltaError> {
    let log_store = table.log_store();
    let candidates: Vec<u64> = listing
        .commits
        .range(..=latest)
        .rev()
        .filter(|(_, modified)| **modified <= cutoff_ms)
        .map(|(v, _)| *v)
        .collect();
    for version in candidates {
        let Some(commit) = read_commit(log_store.as_ref(), uri, version).await? else {
            continue;
        };
        if commit.window_time_ms() <= cutoff_ms {
            return Ok(version);
        }
    }
    Ok(listing.commits.keys().next().copied().unwrap_or(latest))
}

/// Deletes the planned files through the unguarded store, oldest version first (an interrupted
/// deletion leaves a shorter, still sound log). Returns how many existed and were deleted.
async fn delete_log_files(uri: &str, plan: &CleanupPlan) -> Result<u64, DeltaError> {
    let store = unguarded_log_store(uri)?.object_store(None);
    let locations = futures::stream::iter(plan.files.clone().into_iter().map(Ok)).boxed();
    let deleted: Vec<Path> = store
        .delete_stream(locations)
        .or_else(|err| async move {
            match err {
                ObjectStoreError::NotFound { path, .. } => Ok(Path::from(path)),
                other => Err(other),
            }
        })
        .try_collect()
        .await
        .map_err(|err| DeltaError::store(uri, "deleting expired log files", err))?;
    Ok(deleted.len() as u64)
}

/// Loads the table fresh from storage at `version` (through the new checkpoint), at the oldest
/// retained version after a cleanup, and at its latest version, and compares the file set at
/// `version` with what the writer saw.
async fn canary(
    uri: &str,
    version: u64,
    oldest_retained: Option<u64>,
    expected: &HashSet<String>,
) -> Result<(), DeltaError> {
    let fail = |reason: String| DeltaError::CheckpointCanary {
        table: uri.to_owned(),
        version: i64::try_from(version).unwrap_or(i64::MAX),
        reason,
    };
    let fresh = open_table_at(uri, version).await.map_err(|err| {
        fail(format!(
            "the table does not load at version {version}: {err}"
        ))
    })?;
    let found = paths(
        &active_files(&fresh, uri)
            .await
            .map_err(|err| fail(err.to_string()))?,
    );
    if &found != expected {
        let missing = expected.difference(&found).count();
        let extra = found.difference(expected).count();
        return Err(fail(format!(
            "a fresh load sees {} files where the writer saw {} ({missing} missing, {extra} unexpected)",
            found.len(),
            expected.len()
        )));
    }
    if let Some(oldest) = oldest_retained {
        open_table_at(uri, oldest).await.map_err(|err| {
            fail(format!(
                "after log cleanup the oldest retained version {oldest} does not load: {err}"
            ))
        })?;
    }
    open_table(uri)
        .await
        .map_err(|err| fail(format!("the latest version does not load: {err}")))?;
    Ok(())
}
