//! VACUUM with the safety rules of DESIGN.md ("Retention and VACUUM safety").
//!
//! Owns the only code path in tablekeeper that deletes data files. In order:
//! 1. refuse tables this crate cannot vacuum safely (unknown features);
//! 2. compute the effective retention (longest wins, 168h floor unless allowed) and refuse a
//!    short one *before* calling deltalake, whose own refusal is a private `GenericError`;
//! 3. always run deltalake's dry run first and record its list and bytes in the report;
//! 4. cross-check the list against the log: every file referenced by any version inside the
//!    retention window (the version time travel to `now - retention` lands on, and every later
//!    one) must stay, deletion-vector files included; if one is listed, refuse and delete
//!    nothing;
//! 5. take off the list every file something else still needs ([`crate::retention::keep`]):
//!    the files of pinned versions and those other tables' logs reference (shallow clones),
//!    naming who keeps what; a pin that does not load or a referrer whose log cannot be read
//!    refuses the VACUUM;
//! 6. only then delete exactly what is left, between `VACUUM START` and `VACUUM END` commits
//!    as Delta's own VACUUM writes them, and count what was reclaimed from the files that
//!    existed before deletion (deltalake re-lists files it already deleted until a checkpoint
//!    drops their tombstones).
//!
//! `Lite` mode only considers tombstones from the log; `Full` also lists storage and removes
//! orphans (e.g. files of a failed or cancelled OPTIMIZE). Run `Full` periodically.
//! Cancellation stops the work, but files already deleted stay deleted (they passed step 4).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use deltalake::logstore::object_store::{GetOptions, ObjectStore};
use deltalake::operations::vacuum::{Clock, VacuumMode as DeltaVacuumMode};
use deltalake::{DeltaTable, ObjectStoreError, Path};
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::error::DeltaError;
use crate::features::protocol::TableProtocol;
use crate::log::commit::{write_commit, CommitRules, LogCommit};
use crate::log::path::decode_path;
use crate::log::read::{list_log, read_commit, LOG_READ_CONCURRENCY};
use crate::open::{open_table_at, table_url};
use crate::prepare::{prepare, Prepared};
use crate::report::OpReport;
use crate::retention::keep::{kept_files, Keep};
use crate::retention::window::{effective_retention, DELETED_FILE_RETENTION_PROPERTY};
use crate::run::{cancellable, run_commits, run_marker};
use crate::snapshot::{active_files, needed_files};
use crate::watch::stale::pending_stale_writes;
use tablekeeper_vocab::Operation;

const OP: Operation = Operation::Vacuum;

/// Concurrent HEAD requests while sizing the deletion list; bounded so a large list does not
/// trip object-store rate limits (S3 allows ~5,500 GET/HEAD per second per prefix).
const HEAD_CONCURRENCY: usize = 32;

/// Which files VACUUM considers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VacuumMode {
    /// Tombstones from the log only (cheap; misses orphans never referenced by the log).
    Lite,
    /// Also lists storage and deletes unreferenced files older than the retention.
    Full,
}

/// Options of one VACUUM run.
#[derive(Debug, Clone)]
pub struct VacuumOptions {
    /// The inventory's `retention.deleted_file_retention`.
    pub inventory_retention: Duration,
    /// The inventory's `retention.allow_short_retention`: permits retention under 168h.
    pub allow_short_retention: bool,
    pub mode: VacuumMode,
    /// Stop after the dry run and the cross-check.
    pub dry_run: bool,
    /// How far back stale writes waiting for a repair are looked for (see
    /// [`crate::DEFAULT_STALE_WATCH`]); VACUUM refuses while one waits.
    pub stale_watch: Duration,
    /// What else must stay: pins and the tables that may reference this one's files.
    pub keep: Keep,
}

/// The instant both vacuum plans are made at, so the real run deletes what the dry run listed.
#[derive(Debug)]
struct FixedClock(i64);

impl Clock for FixedClock {
    fn current_timestamp_millis(&self) -> i64 {
        self.0
    }
}

/// Vacuums `table_uri`: dry run, cross-check, then delete (unless `dry_run`).
///
/// The future is boxed here, once, so callers can spawn it without proving `Send` themselves.
pub fn vacuum<'a>(
    table_uri: &'a str,
    options: &'a VacuumOptions,
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
    options: &VacuumOptions,
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
    let mut report = OpReport::new(
        OP,
        uri,
        i64::try_from(version).unwrap_or(i64::MAX),
        options.dry_run,
    );
    let retention = retention_of(uri, options, &protocol, &mut report)?;
    let now_ms = Utc::now().timestamp_millis();
    let listed = cancellable(
        cancel,
        uri,
        OP,
        unreferenced(&table, uri, options.mode, retention, now_ms),
    )
    .await?;
    let store = table.object_store();
    let mut existing = cancellable(
        cancel,
        uri,
        OP,
        existing_sizes(store.as_ref(), uri, &listed),
    )
    .await?;
    let active = needed_files(&files);
    drop(files);
    let roots = root_prefixes(uri);
    cancellable(
        cancel,
        uri,
        OP,
        refuse_window_files(uri, &table, &active, &listed, &roots, retention, now_ms),
    )
    .await?;
    let kept = cancellable(
        cancel,
        uri,
        OP,
        kept_files(uri, &table, &options.keep, now_ms),
    )
    .await?;
    leave_kept(uri, &kept, &mut existing, &mut report);
    let existing_paths: Vec<String> = existing.keys().cloned().collect();
    report.set_would_delete(&existing_paths, existing.values().sum());

    if existing.is_empty() {
        report.skipped = Some(format!(
            "no unreferenced files older than {}h to delete",
            retention.as_secs() / 3600
        ));
        return Ok(report.finish(started));
    }
    // a stale write's repair may need files this VACUUM would delete
    let pending = pending_stale_writes(&table, uri, options.stale_watch, now_ms);
    let pending = cancellable(cancel, uri, OP, pending).await?;
    if !pending.is_empty() {
        let versions = pending;
        return Err(DeltaError::RepairPending {
            table: uri.to_owned(),
            versions,
        });
    }
    if options.dry_run {
        return Ok(report.finish(started));
    }

    let deletion = Deletion {
        raw_paths: &existing
            .keys()
            .filter_map(|path| listed.get(path).cloned())
            .collect::<Vec<_>>(),
        bytes: existing.values().sum(),
        retention,
        run_id: &Uuid::new_v4().to_string(),
    };
    tracing::info!(
        table = uri,
        version,
        files = existing.len(),
        retention_secs = retention.as_secs(),
        "vacuuming"
    );
    let ict = protocol.in_commit_timestamps();
    let (deleted, races_lost) = cancellable(
        cancel,
        uri,
        OP,
        delete_files(&table, uri, version, ict, &deletion),
    )
    .await?;
    // each version another writer took first is a commit race lost, as deltalake's rebases
    // are counted for the other operations
    report.conflicts += races_lost;
    for path in deleted.iter().map(|raw| relative_to_root(raw, &roots)) {
        if let Some(size) = existing.get(&path) {
            report.files_removed += 1;
            report.bytes_removed += size;
        }
    }
    let commits = run_commits(table.log_store().as_ref(), uri, version, deletion.run_id).await?;
    report.commits = commits
        .iter()
        .map(|c| i64::try_from(c.version).unwrap_or(i64::MAX))
        .collect();
    report.version_after = report.commits.last().copied();
    Ok(report.finish(started))
}

/// The deleted-file retention VACUUM uses (the inventory's, checked against the table's own
/// property and the safety floor), recorded in `report` with any drift between the two.
fn retention_of(
    uri: &str,
    options: &VacuumOptions,
    protocol: &TableProtocol,
    report: &mut OpReport,
) -> Result<Duration, DeltaError> {
    let (retention, drift) = effective_retention(
        uri,
        options.inventory_retention,
        protocol
            .properties
            .get(DELETED_FILE_RETENTION_PROPERTY)
            .map(String::as_str),
        options.allow_short_retention,
    )?;
    report.retention_used_secs = Some(retention.as_secs());
    report.retention_drift = drift;
    Ok(retention)
}

/// The files deltalake's VACUUM dry run lists as unreferenced and older than `retention`
/// (tablekeeper's clock, `now_ms`), by decoded path, each with the path as deltalake wrote it.
async fn unreferenced(
    table: &DeltaTable,
    uri: &str,
    mode: VacuumMode,
    retention: Duration,
    now_ms: i64,
) -> Result<BTreeMap<String, String>, DeltaError> {
    let chrono_retention =
        chrono::Duration::from_std(retention).map_err(|_| DeltaError::InvalidOptions {
            table: uri.to_owned(),
            operation: OP,
            reason: format!("retention of {}s is out of range", retention.as_secs()),
        })?;
    let mode = match mode {
        VacuumMode::Lite => DeltaVacuumMode::Lite,
        VacuumMode::Full => DeltaVacuumMode::Full,
    };
    let dry = table
        .clone()
        .vacuum()
        .with_retention_period(chrono_retention)
        // tablekeeper enforced its own floor above; deltalake's check is redundant and its
        // refusal is an opaque error
        .with_enforce_retention_duration(false)
        .with_mode(mode)
        .with_dry_run(true)
        .with_clock(Arc::new(FixedClock(now_ms)))
        .await
        .map(|(_, metrics)| metrics.files_deleted)
        .map_err(|err| DeltaError::delta(uri, "vacuum dry run", err))?;
    Ok(dry
        .into_iter()
        .map(|raw| (decode_path(&raw), raw))
        .collect())
}

/// Refuses the whole VACUUM when deltalake listed a file that a version inside the retention
/// window (or the current one) still references: the library's listing is checked against
/// tablekeeper's own reading of the log, never trusted.
async fn refuse_window_files(
    uri: &str,
    table: &DeltaTable,
    active: &HashSet<String>,
    listed: &BTreeMap<String, String>,
    roots: &[String],
    retention: Duration,
    now_ms: i64,
) -> Result<(), DeltaError> {
    let protected: HashSet<String> = window_files(uri, table, active, retention, now_ms)
        .await?
        .protected
        .iter()
        .map(|p| relative_to_root(p, roots))
        .collect();
    let unsafe_files: Vec<String> = listed
        .keys()
        .filter(|p| protected.contains(*p))
        .cloned()
        .collect();
    if unsafe_files.is_empty() {
        return Ok(());
    }
    tracing::error!(
        table = uri,
        files = unsafe_files.len(),
        "vacuum refused: listed files are still referenced"
    );
    Err(DeltaError::UnsafeVacuum {
        table: uri.to_owned(),
        files: unsafe_files,
    })
}

/// Takes the files pins, clones and other tables keep out of `existing`, and records who kept
/// what in `report`.
fn leave_kept(
    uri: &str,
    kept: &crate::retention::keep::Kept,
    existing: &mut BTreeMap<String, u64>,
    report: &mut OpReport,
) {
    report.warnings.extend(kept.warnings.iter().cloned());
    let mut kept_listed = 0u64;
    existing.retain(|path, _| {
        let keep = kept.files.contains_key(path);
        kept_listed += u64::from(keep);
        !keep
    });
    report.kept = kept.by.clone();
    report.kept_listed_files = kept_listed;
    if kept_listed > 0 {
        tracing::info!(
            table = uri,
            files = kept_listed,
            keepers = ?report.kept.iter().map(|k| k.by.as_str()).collect::<Vec<_>>(),
            "vacuum keeps files that pins or other tables still need"
        );
    }
}

/// What one VACUUM deletes, as its commits record it.
#[derive(Clone, Copy)]
struct Deletion<'a> {
    /// The paths as deltalake's dry run listed them.
    raw_paths: &'a [String],
    /// Their sizes, summed.
    bytes: u64,
    retention: Duration,
    run_id: &'a str,
}

/// Deletes `raw_paths` between a `VACUUM START` and a `VACUUM END` commit, as Delta's VACUUM
/// records itself (other engines' audits look for these operations); returns what storage
/// reported deleted, files already gone included, and how many versions other writers took
/// first. The commits carry no file action, so they
/// are written by [`write_commit`] on tables with writer features deltalake does not know
/// too (identity columns, row tracking, clustering, in-commit timestamps).
async fn delete_files(
    table: &DeltaTable,
    uri: &str,
    version: u64,
    in_commit_timestamps: bool,
    deletion: &Deletion<'_>,
) -> Result<(Vec<String>, u32), DeltaError> {
    let Deletion {
        raw_paths,
        bytes,
        retention,
        run_id,
    } = *deletion;
    let log_store = table.log_store();
    let commit = |operation, parameters: serde_json::Value, metrics: serde_json::Value| {
        let object = |v: serde_json::Value| match v {
            serde_json::Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        LogCommit::info_only(
            operation,
            object(parameters),
            object(metrics),
            run_marker(run_id, OP),
        )
    };
    // the commits add no file, so row tracking asks nothing of them
    let rules = CommitRules {
        in_commit_timestamps,
        ..CommitRules::default()
    };
    let retention_ms = retention.as_millis().to_string();
    let start = write_commit(
        log_store.as_ref(),
        uri,
        OP,
        version,
        &commit(
            "VACUUM START",
            serde_json::json!({
                "retentionCheckEnabled": "true",
                "specifiedRetentionMillis": retention_ms,
                "defaultRetentionMillis": retention_ms,
            }),
            serde_json::json!({
                "numFilesToDelete": raw_paths.len().to_string(),
                "sizeOfDataToDelete": bytes.to_string(),
            }),
        ),
        &rules,
    )
    .await?;
    let store = table.object_store();
    let locations = futures::stream::iter(
        raw_paths
            .iter()
            .map(|raw| Ok(Path::parse(raw).unwrap_or_else(|_| Path::from(raw.as_str()))))
            .collect::<Vec<_>>(),
    )
    .boxed();
    let deleted: Vec<String> = store
        .delete_stream(locations)
        .map(|res| match res {
            Ok(path) => Ok(path.to_string()),
            Err(ObjectStoreError::NotFound { path, .. }) => Ok(path),
            Err(err) => Err(err),
        })
        .try_collect()
        .await
        .map_err(|err| DeltaError::store(uri, "deleting vacuumed files", err))?;
    let end = write_commit(
        log_store.as_ref(),
        uri,
        OP,
        start.version,
        &commit(
            "VACUUM END",
            serde_json::json!({ "status": "COMPLETED" }),
            serde_json::json!({
                "numDeletedFiles": deleted.len().to_string(),
                "numVacuumedDirectories": "0",
            }),
        ),
        &rules,
    )
    .await?;
    Ok((deleted, start.races_lost + end.races_lost))
}

/// The forms in which deltalake may report a path under the table root: as a URL and, for
/// local tables, as an absolute file path (deltalake 1.1 reports a file that was already
/// gone that way), each with a trailing slash.
fn root_prefixes(uri: &str) -> Vec<String> {
    let mut roots = Vec::new();
    if let Ok(url) = table_url(uri) {
        let text = url.as_str();
        roots.push(format!("{}/", text.trim_end_matches('/')));
        if let Ok(path) = url.to_file_path() {
            roots.push(format!(
                "{}/",
                path.display().to_string().trim_end_matches('/')
            ));
        }
    }
    roots
}

/// A path deltalake reported for a deletion, relative to the table root and decoded.
fn relative_to_root(raw: &str, roots: &[String]) -> String {
    let relative = roots
        .iter()
        .find_map(|root| raw.strip_prefix(root.as_str()))
        .unwrap_or(raw);
    decode_path(relative)
}

/// Sizes of the listed files that still exist; files already gone are left out.
async fn existing_sizes(
    store: &dyn ObjectStore,
    uri: &str,
    listed: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, u64>, DeltaError> {
    // Owned items and no borrowed `uri` inside the per-item futures: a stream closure
    // whose futures borrow their argument cannot be proven `Send` for every lifetime,
    // which the daemon needs to run this on a spawned task.
    let items: Vec<(String, String)> = listed
        .iter()
        .map(|(decoded, raw)| (decoded.clone(), raw.clone()))
        .collect();
    let sizes: Vec<Option<(String, u64)>> = futures::stream::iter(items)
        .map(|(decoded, raw)| async move {
            let path = Path::parse(&raw).unwrap_or_else(|_| Path::from(raw.as_str()));
            match store
                .get_opts(&path, GetOptions::new().with_head(true))
                .await
            {
                Ok(result) => Ok(Some((decoded, result.meta.size))),
                Err(ObjectStoreError::NotFound { .. }) => Ok(None),
                Err(err) => Err(DeltaError::store(uri, "sizing the vacuum list", err)),
            }
        })
        .buffer_unordered(HEAD_CONCURRENCY)
        .try_collect()
        .await?;
    Ok(sizes.into_iter().flatten().collect())
}

/// Every file referenced by a version inside the retention window ending now: data files and
/// the files holding their deletion vectors.
///
/// The window starts at the version time travel to `now - retention` resolves to (the newest
/// commit at or before that instant; the oldest reconstructable version if all are newer) and
/// runs to the loaded version. Its files are the files active at that first version plus every
/// file added after it. Commit times are the later of the commit's own timestamp and its log
/// file's modification time, so a disagreement between the two widens the window, never shrinks it.
pub(crate) async fn window_files(
    uri: &str,
    table: &DeltaTable,
    current_needed: &HashSet<String>,
    retention: Duration,
    now_ms: i64,
) -> Result<WindowFiles, DeltaError> {
    let latest = crate::open::loaded_version(uri, table)?;
    let listing = list_log(table.object_store().as_ref(), uri).await?;
    let cutoff = now_ms.saturating_sub(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX));
    let log_store = table.log_store();
    let newest_first: Vec<u64> = listing
        .commits
        .range(..=latest)
        .rev()
        .map(|(v, _)| *v)
        .collect();
    let mut commits = futures::stream::iter(newest_first)
        .map(|v| {
            let log_store = log_store.clone();
            let uri = uri.to_owned();
            async move { read_commit(log_store.as_ref(), &uri, v).await }
        })
        .buffered(LOG_READ_CONCURRENCY);
    let mut at_cutoff = None;
    let mut window_adds: Vec<(u64, Vec<String>)> = Vec::new();
    while let Some(next) = commits.next().await {
        let Some(commit) = next? else {
            // cleaned up between listing and reading: older versions cannot be rebuilt anyway
            break;
        };
        if commit.window_time_ms() <= cutoff {
            at_cutoff = Some(commit.version);
            break;
        }
        let mut needed = Vec::with_capacity(commit.adds.len());
        for add in commit.adds {
            needed.extend(add.deletion_vector.and_then(|dv| dv.file));
            needed.push(add.path);
        }
        window_adds.push((commit.version, needed));
    }
    drop(commits);
    let earliest = listing.earliest_reconstructable(latest);
    let start =
        match (at_cutoff, earliest) {
            (Some(t), Some(e)) => t.max(e),
            (None, Some(e)) => e,
            (_, None) => return Err(DeltaError::IncompleteLog {
                table: uri.to_owned(),
                reason:
                    "no checkpoint or complete commit history to rebuild the versions inside the \
                         retention window, so vacuum cannot prove its list is safe"
                        .into(),
            }),
        };
    let at_start = if start >= latest {
        current_needed.clone()
    } else {
        let old = open_table_at(uri, start).await?;
        needed_files(&active_files(&old, uri).await?)
    };
    let mut protected = at_start.clone();
    protected.extend(current_needed.iter().cloned());
    for (version, adds) in window_adds {
        if version > start {
            protected.extend(adds);
        }
    }
    Ok(WindowFiles {
        start,
        at_start,
        protected,
    })
}

/// The versions inside a retention window and what they reference.
#[derive(Debug)]
pub(crate) struct WindowFiles {
    /// The window's oldest version: time travel to its start lands here.
    pub start: u64,
    /// Every file that version needs.
    pub at_start: HashSet<String>,
    /// Every file a version inside the window needs, the current one's included.
    pub protected: HashSet<String>,
}
