//! What a change of a table's retention would do, before anyone makes it (`plan --base`, the
//! review of an inventory pull request): from the table's log and one listing of its files,
//! the versions that stop (or start) being restorable, the files and bytes the next VACUUM
//! could then delete (or would keep), and the log commits the next cleanup could delete.
//!
//! Owns only the comparison. The windows are those VACUUM and log cleanup use
//! ([`crate::retention::window`], [`crate::retention::vacuum::window_files`],
//! `log::checkpoint`'s oldest version inside the window and its proven cleanup plan), and what
//! pins and declared clones keep stays kept whatever the window ([`crate::retention::keep`]).
//! It reads; it must never delete or write anything.

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::error::DeltaError;
use crate::features::protocol::TableProtocol;
use crate::log::checkpoint::oldest_in_window;
use crate::log::integrity::{plan_cleanup, CleanupBounds};
use crate::log::read::{last_checkpoint, list_log, read_commit, LogListing};
use crate::open::{loaded_version, open_table};
use crate::probe::presence::list_root;
use crate::retention::keep::{kept_files, Keep};
use crate::retention::vacuum::window_files;
use crate::retention::window::{
    effective_log_retention, effective_retention, DELETED_FILE_RETENTION_PROPERTY,
    LOG_RETENTION_PROPERTY,
};
use crate::snapshot::{active_files, needed_files};

/// One side of a retention change, as the inventory states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetentionSettings {
    /// The VACUUM window the inventory asks for (`TableSpec::vacuum_window`: the longest of
    /// `deleted_file_retention` and the readers' `max_query_duration`).
    pub vacuum_window: Duration,
    pub allow_short_retention: bool,
    /// `retention.log_retention`.
    pub log_retention: Duration,
}

/// The oldest version time travel reaches under one window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowStart {
    /// The window that applies (the table's own property may lengthen the inventory's).
    pub retention_secs: u64,
    /// The oldest version inside it: time travel to now − window lands here.
    pub version: u64,
    /// That version's commit time.
    pub committed_at: Option<DateTime<Utc>>,
}

/// Files, and the bytes they hold on storage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Footprint {
    pub files: u64,
    pub bytes: u64,
}

/// What changing the retention from `before` to `after` does to the table as it is now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetentionPreview {
    pub table: String,
    pub latest_version: u64,
    pub before: WindowStart,
    pub after: WindowStart,
    /// Files (data and deletion vectors) only versions inside the old window need and the new
    /// one does not, and which no pin or declared clone keeps: the next VACUUM may delete them
    /// once the change is in, and the versions they belong to stop restoring.
    pub vacuum_may_delete: Footprint,
    /// Files the new window keeps that the old one let go: what a longer window keeps on
    /// storage (and pays for) from now on.
    pub newly_retained: Footprint,
    /// JSON commits the next log cleanup may delete under the new log retention and could
    /// not under the old one (first and last version), with the oldest version that still
    /// loads afterwards.
    pub log_commits_deletable: Option<(u64, u64)>,
    pub oldest_loadable_after_cleanup: Option<u64>,
}

/// Compares the table's versions, files and log under `before` and `after`, at `now`.
/// `keep` holds the pins and declared clones, whose files stay whatever the window.
pub async fn preview_retention(
    uri: &str,
    before: &RetentionSettings,
    after: &RetentionSettings,
    keep: &Keep,
    now: DateTime<Utc>,
) -> Result<RetentionPreview, DeltaError> {
    let table = open_table(uri).await?;
    let latest = loaded_version(uri, &table)?;
    let active = active_files(&table, uri).await?;
    let current = needed_files(&active);
    let properties = TableProtocol::of(uri, &table)?.properties;
    let property = |key: &str| properties.get(key).map(String::as_str);
    let vacuum_window = |s: &RetentionSettings| {
        effective_retention(
            uri,
            s.vacuum_window,
            property(DELETED_FILE_RETENTION_PROPERTY),
            s.allow_short_retention,
        )
        .map(|(window, _)| window)
    };
    let now_ms = now.timestamp_millis();
    let old = window_files(uri, &table, &current, vacuum_window(before)?, now_ms).await?;
    let new = window_files(uri, &table, &current, vacuum_window(after)?, now_ms).await?;
    let kept = kept_files(uri, &table, keep, now_ms).await?;
    let listed = list_root(&table, uri, active.len()).await?;
    let sized = |files: &HashSet<&String>| Footprint {
        files: files.len() as u64,
        bytes: files
            .iter()
            .map(|f| listed.data.get(*f).copied().unwrap_or(0))
            .sum(),
    };
    // files one window keeps and the other does not, that are on storage and that nothing else
    // (the current version, a pin, a declared clone) keeps anyway
    let only_in = |from: &HashSet<String>, not_in: &HashSet<String>| -> Footprint {
        let files: HashSet<&String> = from
            .iter()
            .filter(|f| !not_in.contains(*f) && !current.contains(*f))
            .filter(|f| !kept.files.contains_key(*f) && listed.data.contains_key(*f))
            .collect();
        sized(&files)
    };
    let log_retention = |s: &RetentionSettings| {
        effective_log_retention(uri, s.log_retention, property(LOG_RETENTION_PROPERTY))
            .map(|(retention, _)| retention)
    };
    let cleanup_before = log_cleanup(
        &table,
        uri,
        &listed.log,
        latest,
        log_retention(before)?,
        now_ms,
    )
    .await?;
    let cleanup_after = log_cleanup(
        &table,
        uri,
        &listed.log,
        latest,
        log_retention(after)?,
        now_ms,
    )
    .await?;
    let newly_deletable = cleanup_after
        .as_ref()
        .map(|(commits, _)| {
            let before: HashSet<u64> = cleanup_before
                .as_ref()
                .map(|(c, _)| c.iter().copied().collect())
                .unwrap_or_default();
            commits
                .iter()
                .copied()
                .filter(|v| !before.contains(v))
                .collect::<Vec<u64>>()
        })
        .unwrap_or_default();
    Ok(RetentionPreview {
        table: uri.to_owned(),
        latest_version: latest,
        before: start(&table, uri, vacuum_window(before)?, old.start).await?,
        after: start(&table, uri, vacuum_window(after)?, new.start).await?,
        vacuum_may_delete: only_in(&old.protected, &new.protected),
        newly_retained: only_in(&new.protected, &old.protected),
        log_commits_deletable: newly_deletable
            .first()
            .copied()
            .zip(newly_deletable.last().copied()),
        oldest_loadable_after_cleanup: cleanup_after.map(|(_, oldest)| oldest),
    })
}

async fn start(
    table: &deltalake::DeltaTable,
    uri: &str,
    window: Duration,
    version: u64,
) -> Result<WindowStart, DeltaError> {
    let commit = read_commit(table.log_store().as_ref(), uri, version).await?;
    Ok(WindowStart {
        retention_secs: window.as_secs(),
        version,
        committed_at: commit
            .and_then(|c| c.info_timestamp_ms())
            .and_then(DateTime::from_timestamp_millis),
    })
}

/// The commits log cleanup would delete under `retention` (the same proven plan the checkpoint
/// operation deletes by, every commit allowed), and the oldest version loadable afterwards;
/// `None` when it would delete nothing. A plan that would not keep the log sound deletes
/// nothing, so it counts as none.
async fn log_cleanup(
    table: &deltalake::DeltaTable,
    uri: &str,
    listing: &LogListing,
    latest: u64,
    retention: Duration,
    now_ms: i64,
) -> Result<Option<(Vec<u64>, u64)>, DeltaError> {
    let cutoff_ms = now_ms.saturating_sub(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX));
    let keep_from = oldest_in_window(table, uri, listing, latest, cutoff_ms).await?;
    let store = table.object_store();
    let hint = last_checkpoint(store.as_ref(), uri)
        .await?
        .map(|cp| cp.version);
    // the listing of the whole root holds the log too; read it again only if it held none
    let fresh;
    let listing = if listing.commits.is_empty() {
        fresh = list_log(store.as_ref(), uri).await?;
        &fresh
    } else {
        listing
    };
    let bounds = CleanupBounds {
        latest,
        keep_from,
        cutoff_ms,
        deletable: None,
        hint,
    };
    Ok(plan_cleanup(listing, &bounds)
        .ok()
        .flatten()
        .map(|plan| (plan.commits, plan.oldest_retained)))
}
