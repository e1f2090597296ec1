//! What VACUUM keeps beyond the retention window: every file of a pinned version until its pin
//! expires, every file under the table's root that another table's log references (shallow
//! clones, tables built over another's files), per DESIGN.md ("Retention and VACUUM safety"),
//! and a UniForm table's Iceberg metadata with every file its snapshots reference
//! ([`crate::log::iceberg`]), whatever the Delta log says of them.
//!
//! Owns resolving pins to versions (a `timestamp` pin is the version time travel to it lands
//! on) and the files each needs, and reading each referrer's log ([`crate::log::references`])
//! for the paths under this table's root. A pinned version that no longer loads, or a referrer
//! whose log cannot be read, is an error: VACUUM then refuses rather than guess. This module
//! decides what to keep; it never deletes anything.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use deltalake::DeltaTable;
use serde::Serialize;

use crate::error::DeltaError;
use crate::log::iceberg::iceberg_files;
use crate::log::read::{list_log, read_commit, LogListing};
use crate::log::references::{log_references, under_root};
use crate::open::open_table_at;
use crate::report::KeptFiles;
use crate::snapshot::{active_files, needed_files};

/// A version someone relies on (a model registry's training set, an audit): its data and
/// deletion-vector files, and the log that loads it, are kept until `until_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pin {
    pub target: PinTarget,
    /// Unix milliseconds after which the pin no longer holds.
    pub until_ms: i64,
    /// Why it exists, as its owner wrote it.
    pub reason: String,
    /// Where it was declared: `inventory`, or who added it through the API.
    pub source: String,
}

/// The version a pin holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PinTarget {
    Version(u64),
    /// Unix milliseconds: the newest version committed at or before it.
    Timestamp(i64),
}

/// Another table whose log may reference files under this table's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referrer {
    /// Its inventory name, or its path for a clone declared in `retention.clones`.
    pub name: String,
    pub uri: String,
    /// Its own VACUUM window: every version inside it keeps its files.
    pub window: Duration,
    /// What is known of it, which decides what its unreadable log does to the VACUUM.
    pub standing: Standing,
}

/// What is known of a table that may reference another's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Declared in the source's `retention.clones`: a log that cannot be read, or is not
    /// there, refuses the VACUUM.
    Declared,
    /// Seen referencing other tables' files (its probe found absolute paths), or assumed to
    /// (`maintain` without a job store, where no probe tells): a log that cannot be read
    /// refuses the VACUUM; a path holding no Delta log at all is skipped with a warning, as it
    /// can reference nothing.
    Seen,
    /// Not probed yet: read to find out; a log that cannot be read is a warning.
    Unknown,
}

impl Standing {
    /// Whether the table is known (or assumed) to reference other tables' files.
    pub fn known(self) -> bool {
        self != Standing::Unknown
    }
}

/// Everything VACUUM must keep besides the retention window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keep {
    pub pins: Vec<Pin>,
    pub referrers: Vec<Referrer>,
}

/// The files to keep, by relative path, with who needs them; and what each pin or referrer
/// needs in all.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    pub files: BTreeMap<String, Vec<usize>>,
    pub by: Vec<KeptFiles>,
    /// Pins past their `until` (reported and no longer honoured), and tables not known to
    /// reference this one whose logs could not be read.
    pub warnings: Vec<String>,
}

impl Pin {
    /// How the pin is named in reports and errors.
    pub fn label(&self) -> String {
        let at = match self.target {
            PinTarget::Version(v) => format!("version {v}"),
            PinTarget::Timestamp(ms) => format!(
                "timestamp {}",
                chrono::DateTime::from_timestamp_millis(ms)
                    .map_or_else(|| ms.to_string(), |t| t.to_rfc3339())
            ),
        };
        if self.reason.is_empty() {
            at
        } else {
            format!("{at} ({})", self.reason)
        }
    }

    pub fn active(&self, now_ms: i64) -> bool {
        self.until_ms > now_ms
    }
}

/// Resolves `pins` (those still active at `now_ms`) to versions and collects their files, then
/// reads every referrer's log for references under `uri`.
pub(crate) async fn kept_files(
    uri: &str,
    table: &DeltaTable,
    keep: &Keep,
    now_ms: i64,
) -> Result<Kept, DeltaError> {
    let mut kept = Kept::default();
    let active: Vec<&Pin> = keep.pins.iter().filter(|p| p.active(now_ms)).collect();
    kept.warnings = keep
        .pins
        .iter()
        .filter(|p| !p.active(now_ms))
        .map(|p| format!("pin {} expired and no longer keeps its files", p.label()))
        .collect();
    if !active.is_empty() {
        let listing = list_log(table.object_store().as_ref(), uri).await?;
        for pin in active {
            let version = pinned_version(uri, table, &listing, pin).await?;
            let files =
                version_files(uri, version)
                    .await
                    .map_err(|err| DeltaError::PinUnloadable {
                        table: uri.to_owned(),
                        pin: pin.label(),
                        reason: err.to_string(),
                    })?;
            record(&mut kept, "pin", pin.label(), (version, version), files);
        }
    }
    let iceberg = iceberg_files(table.object_store().as_ref(), uri).await?;
    if !iceberg.metadata.is_empty() {
        let files: HashSet<String> = iceberg
            .metadata
            .iter()
            .cloned()
            .chain(iceberg.data.iter().cloned())
            .collect();
        tracing::debug!(
            table = uri,
            metadata_files = iceberg.metadata_files,
            data_files = iceberg.data.len(),
            "the Iceberg metadata keeps its files"
        );
        record(
            &mut kept,
            "iceberg",
            format!(
                "Iceberg metadata ({} metadata files)",
                iceberg.metadata_files
            ),
            (0, 0),
            files,
        );
    }
    for referrer in &keep.referrers {
        let references = match log_references(&referrer.uri, referrer.window, now_ms).await {
            Ok(references) => references,
            Err(err @ DeltaError::NotADeltaTable { .. })
                if referrer.standing != Standing::Declared =>
            {
                tracing::warn!(table = uri, referrer = %referrer.name, error = %err, "a table that may reference this one has no Delta log: nothing to keep for it");
                kept.warnings.push(format!(
                    "`{}` holds no Delta log, so it references none of this table's files: {err}",
                    referrer.name
                ));
                continue;
            }
            Err(err) if referrer.standing.known() => {
                return Err(DeltaError::ReferrerUnreadable {
                    table: uri.to_owned(),
                    referrer: referrer.name.clone(),
                    source: Box::new(err),
                })
            }
            Err(err) => {
                tracing::warn!(table = uri, referrer = %referrer.name, error = %err, "cannot read a table that may reference this one");
                kept.warnings.push(format!(
                    "`{}` could not be read to see whether it references this table's files: {err}",
                    referrer.name
                ));
                continue;
            }
        };
        let files: HashSet<String> = references
            .files
            .iter()
            .filter_map(|file| under_root(file, uri))
            .collect();
        record(
            &mut kept,
            "clone",
            referrer.name.clone(),
            (references.from_version, references.latest),
            files,
        );
    }
    Ok(kept)
}

fn record(
    kept: &mut Kept,
    reason: &'static str,
    by: String,
    versions: (u64, u64),
    files: HashSet<String>,
) {
    let index = kept.by.len();
    kept.by.push(KeptFiles {
        reason,
        by,
        versions,
        files: files.len() as u64,
    });
    for file in files {
        kept.files.entry(file).or_default().push(index);
    }
}

/// The version a pin holds: its version, or the version time travel to its timestamp lands on.
pub(crate) async fn pinned_version(
    uri: &str,
    table: &DeltaTable,
    listing: &LogListing,
    pin: &Pin,
) -> Result<u64, DeltaError> {
    match pin.target {
        PinTarget::Version(v) => Ok(v),
        PinTarget::Timestamp(ms) => {
            version_at(uri, table, listing, ms)
                .await?
                .ok_or_else(|| DeltaError::PinUnloadable {
                    table: uri.to_owned(),
                    pin: pin.label(),
                    reason:
                        "no version of the table still in its log was committed at or before it"
                            .into(),
                })
        }
    }
}

/// The newest version committed at or before `at_ms` by its commit time (the in-commit
/// timestamp or `commitInfo.timestamp`, else the file time); `None` when every listed commit
/// is newer.
pub(crate) async fn version_at(
    uri: &str,
    table: &DeltaTable,
    listing: &LogListing,
    at_ms: i64,
) -> Result<Option<u64>, DeltaError> {
    let log_store = table.log_store();
    for (&version, &modified) in listing.commits.iter().rev() {
        let Some(commit) = read_commit(log_store.as_ref(), uri, version).await? else {
            continue;
        };
        if commit.info_timestamp_ms().unwrap_or(modified) <= at_ms {
            return Ok(Some(version));
        }
    }
    Ok(None)
}

/// Every data and deletion-vector file of `version`, loading it fresh.
pub(crate) async fn version_files(uri: &str, version: u64) -> Result<HashSet<String>, DeltaError> {
    let old = open_table_at(uri, version).await?;
    Ok(needed_files(&active_files(&old, uri).await?))
}
