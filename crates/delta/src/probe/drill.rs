//! The restore drill ("practise restore before you need it"): proof, on a slow cadence, that
//! every version the table owes someone can still be restored, and what keeping them costs.
//!
//! Owns checking the versions owed — the oldest version inside the VACUUM window, each active
//! pin, and each known referrer's (shallow clone's) current version — against one listing of
//! the table root: a version is restorable when its log loads and every data and
//! deletion-vector file it needs is listed. No data file is read. The same listing sizes the
//! bytes kept on storage only because of the window, a pin or a clone (the guide's "price of
//! your current time-travel window"). The prober runs it at most once per
//! [`DrillOptions::every`] per table and carries the result in every probe after it.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use deltalake::DeltaTable;
use serde::{Deserialize, Serialize};

use crate::error::DeltaError;
use crate::log::references::{log_references, under_root};
use crate::probe::presence::list_root;
use crate::retention::keep::{pinned_version, version_files, Keep};
use crate::retention::vacuum::window_files;
use crate::retention::window::{effective_retention, RETENTION_FLOOR};
use crate::snapshot::{needed_files, ActiveFile};

/// Missing files named per version; the count says how many there are in all.
const NAMED_MISSING: usize = 10;

/// Default cadence: a table's files are checked at most once a day.
pub const DEFAULT_DRILL_EVERY: Duration = Duration::from_secs(86_400);

/// What the drill checks, beyond the table itself.
#[derive(Debug, Clone)]
pub struct DrillOptions {
    /// Pins and the referrers (only the `known` ones are drilled).
    pub keep: Keep,
    /// The inventory's VACUUM window (`TableSpec::vacuum_window`).
    pub window: Duration,
    pub allow_short_retention: bool,
    /// At most this often per table.
    pub every: Duration,
}

/// The last drill of a table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RestoreDrill {
    pub checked_at: DateTime<Utc>,
    /// Every version owed, oldest reason first (window, pins, clones).
    pub versions: Vec<OwedVersion>,
    /// Bytes on storage kept only because of the window, a pin or a clone.
    pub retained_bytes: RetainedBytes,
}

/// One version owed, and whether it can be restored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OwedVersion {
    /// `window`, `pin` or `clone`.
    pub reason: String,
    /// Who is owed: `the oldest version inside the 168h window`, the pin, the clone's name.
    pub owed_to: String,
    /// The version (for a clone: its own version; the files checked are this table's).
    pub version: Option<i64>,
    pub restorable: bool,
    /// Files it needs that storage does not hold, the first [`NAMED_MISSING`].
    pub missing_files: Vec<String>,
    pub missing_count: u64,
    /// Why it could not be checked or loaded, when that is the problem.
    pub error: Option<String>,
}

/// Bytes kept on storage beyond what the current version needs, by why.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct RetainedBytes {
    /// Needed only by versions inside the VACUUM window.
    pub window: u64,
    /// Needed only by pinned versions (beyond the window).
    pub pin: u64,
    /// Needed only by clones or other referrers (beyond the window and the pins).
    pub clone: u64,
}

impl RestoreDrill {
    /// Versions owed that cannot be restored.
    pub fn unrestorable(&self) -> usize {
        self.versions.iter().filter(|v| !v.restorable).count()
    }
}

/// Runs the drill on a loaded table whose current active files are `active`.
///
/// `append_only`: no commit of the log on disk removed a file, so every version's files are
/// among the current version's, which the damage check proves present: with no pin or clone
/// owed either, there is nothing more to check and the drill costs no request.
pub(crate) async fn drill(
    uri: &str,
    table: &DeltaTable,
    active: &[ActiveFile],
    properties_retention: Option<&str>,
    options: &DrillOptions,
    append_only: bool,
    now: DateTime<Utc>,
) -> Result<RestoreDrill, DeltaError> {
    let now_ms = now.timestamp_millis();
    let owed_beyond_window = options.keep.pins.iter().any(|p| p.active(now_ms))
        || options.keep.referrers.iter().any(|r| r.standing.known());
    if append_only && !owed_beyond_window {
        return Ok(nothing_removed(now));
    }
    let retention = effective_retention(
        uri,
        options.window,
        properties_retention,
        options.allow_short_retention,
    )
    .map(|(r, _)| r)
    .unwrap_or_else(|_| options.window.max(RETENTION_FLOOR));
    let current = needed_files(active);
    let listed = list_root(table, uri, active.len()).await?;
    let present = |file: &String| listed.data.contains_key(file);
    let size = |file: &String| listed.data.get(file).copied().unwrap_or(0);

    let mut versions = Vec::new();
    let window = window_files(uri, table, &current, retention, now_ms).await?;
    versions.push(check(
        "window",
        format!(
            "the oldest version inside the {}h window",
            retention.as_secs() / 3600
        ),
        Some(window.start),
        Ok(&window.at_start),
        &present,
    ));

    let pinned = drill_pins(uri, table, &options.keep, now_ms, &present, &mut versions).await?;
    let cloned = drill_clones(uri, &options.keep, now_ms, &present, &mut versions).await;

    let only = |files: &HashSet<String>, besides: &[&HashSet<String>]| -> u64 {
        files
            .iter()
            .filter(|f| !current.contains(*f) && besides.iter().all(|b| !b.contains(*f)))
            .map(size)
            .sum()
    };
    let retained_bytes = RetainedBytes {
        window: only(&window.protected, &[]),
        pin: only(&pinned, &[&window.protected]),
        clone: only(&cloned, &[&window.protected, &pinned]),
    };
    Ok(RestoreDrill {
        checked_at: now,
        versions,
        retained_bytes,
    })
}

/// The drill of a table no commit ever removed a file from: every version needs only the files
/// of the current one, so there is nothing to list.
fn nothing_removed(now: DateTime<Utc>) -> RestoreDrill {
    RestoreDrill {
        checked_at: now,
        versions: vec![OwedVersion {
            reason: "window".into(),
            owed_to: "every version in the log: no commit removed a file, so each needs only \
                      files of the current version"
                .into(),
            version: None,
            restorable: true,
            missing_files: Vec::new(),
            missing_count: 0,
            error: None,
        }],
        retained_bytes: RetainedBytes::default(),
    }
}

/// Checks each active pin's version (into `versions`); returns the files they need together.
async fn drill_pins(
    uri: &str,
    table: &DeltaTable,
    keep: &Keep,
    now_ms: i64,
    present: &impl Fn(&String) -> bool,
    versions: &mut Vec<OwedVersion>,
) -> Result<HashSet<String>, DeltaError> {
    let mut pinned: HashSet<String> = HashSet::new();
    let active_pins: Vec<_> = keep.pins.iter().filter(|p| p.active(now_ms)).collect();
    if active_pins.is_empty() {
        return Ok(pinned);
    }
    let log = crate::log::read::list_log(table.object_store().as_ref(), uri).await?;
    for pin in active_pins {
        let (version, files) = match pinned_version(uri, table, &log, pin).await {
            Ok(v) => (Some(v), version_files(uri, v).await),
            Err(err) => (None, Err(err)),
        };
        versions.push(check("pin", pin.label(), version, files.as_ref(), present));
        if let Ok(files) = files {
            pinned.extend(files);
        }
    }
    Ok(pinned)
}

/// Checks each known referrer's (shallow clone's) current version against this table's files
/// (into `versions`); returns the files of this table their windows reference, which VACUUM
/// keeps for them.
async fn drill_clones(
    uri: &str,
    keep: &Keep,
    now_ms: i64,
    present: &impl Fn(&String) -> bool,
    versions: &mut Vec<OwedVersion>,
) -> HashSet<String> {
    let mut cloned: HashSet<String> = HashSet::new();
    for referrer in keep.referrers.iter().filter(|r| r.standing.known()) {
        // the clone's current version: what it needs of this table now
        let latest = log_references(&referrer.uri, Duration::ZERO, now_ms)
            .await
            .map(|r| {
                let mine: HashSet<String> =
                    r.files.iter().filter_map(|f| under_root(f, uri)).collect();
                (r.latest, mine)
            });
        let (version, files) = match latest {
            Ok((v, files)) => (Some(v), Ok(files)),
            Err(err) => (None, Err(err)),
        };
        if matches!(&files, Ok(f) if f.is_empty()) {
            continue;
        }
        versions.push(check(
            "clone",
            referrer.name.clone(),
            version,
            files.as_ref(),
            present,
        ));
        // everything its window references stays: that is what VACUUM keeps for it
        if let Ok(window) = log_references(&referrer.uri, referrer.window, now_ms).await {
            cloned.extend(window.files.iter().filter_map(|f| under_root(f, uri)));
        }
    }
    cloned
}

fn check(
    reason: &str,
    owed_to: String,
    version: Option<u64>,
    files: Result<&HashSet<String>, &DeltaError>,
    present: &impl Fn(&String) -> bool,
) -> OwedVersion {
    let version = version.and_then(|v| i64::try_from(v).ok());
    match files {
        Ok(files) => {
            let missing: BTreeSet<&String> = files
                .iter()
                .filter(|f| !crate::log::references::is_absolute(f) && !present(f))
                .collect();
            OwedVersion {
                reason: reason.to_owned(),
                owed_to,
                version,
                restorable: missing.is_empty(),
                missing_files: missing
                    .iter()
                    .take(NAMED_MISSING)
                    .map(|f| (*f).clone())
                    .collect(),
                missing_count: missing.len() as u64,
                error: None,
            }
        }
        Err(err) => OwedVersion {
            reason: reason.to_owned(),
            owed_to,
            version,
            restorable: false,
            missing_files: Vec::new(),
            missing_count: 0,
            error: Some(err.to_string()),
        },
    }
}
