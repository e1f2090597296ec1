//! When a table's deleted rows are physically gone: the erasure view the API, the dashboard,
//! `plan` and the metrics share. Pure: built from the probe (the log's facts, see
//! `tablekeeper_delta`'s erasure ledger) and the inventory's retention and deadline.
//!
//! A deletion is physically finished once every file holding its rows is deleted: files with a
//! deletion vector need a purge first, and every superseded file waits the
//! `deleted_file_retention` before VACUUM may delete it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tablekeeper_delta::Probe;
use tablekeeper_inventory::{Operation, TableSpec};

/// The erasure state of one table.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub(crate) struct ErasureView {
    /// Rows deletion vectors mark deleted inside active files (a purge removes them).
    pub deleted_rows: u64,
    /// The oldest deletion still on storage.
    pub pending_since: Option<DateTime<Utc>>,
    pub pending_version: Option<i64>,
    pub pending_seconds: i64,
    /// The earliest time every deleted row can be gone: the retention after the last
    /// superseded file left the table, or, while files still carry deletion vectors, the
    /// retention after a purge run now.
    pub earliest_erasure: Option<DateTime<Utc>>,
    /// `retention.erasure_deadline`, and when it falls for the oldest pending deletion.
    pub deadline_seconds: Option<u64>,
    pub due_at: Option<DateTime<Utc>>,
    pub overdue: bool,
    /// One sentence for people.
    pub summary: Option<String>,
}

/// How long the oldest deletion has been on storage; zero when none.
/// Whether the table uses deletion vectors (enabled in its protocol, or present in its
/// files): the tables where soft-deleted rows can wait in live files for a purge.
pub(crate) fn uses_deletion_vectors(probe: &Probe) -> bool {
    probe.deletion_vectors_enabled || probe.files_with_deletion_vectors > 0
}

/// Whether an operation applies to the table as last probed: purge only to tables that use
/// deletion vectors (on others it never has work, and a staleness since creation would only
/// be noise); every other operation always.
pub(crate) fn applies(op: Operation, probe: Option<&Probe>) -> bool {
    match op {
        Operation::Purge => probe.is_some_and(uses_deletion_vectors),
        _ => true,
    }
}

pub(crate) fn erasure_pending(probe: &Probe, now: DateTime<Utc>) -> Duration {
    probe
        .history
        .erasure_pending_since
        .and_then(|since| (now - since).to_std().ok())
        .unwrap_or_default()
}

pub(crate) fn erasure(spec: &TableSpec, probe: &Probe, now: DateTime<Utc>) -> ErasureView {
    let retention =
        chrono::Duration::from_std(spec.vacuum_window()).unwrap_or(chrono::Duration::MAX);
    let pending = erasure_pending(probe, now);
    let earliest_erasure = probe.history.erasure_pending_since.map(|_| {
        let after_removal = probe
            .history
            .erasure_last_removal_at
            .map(|at| (at + retention).max(now));
        if probe.deleted_rows > 0 || probe.files_with_deletion_vectors > 0 {
            // the purge has yet to run: at best now, then the retention
            after_removal.map_or(now + retention, |t| t.max(now + retention))
        } else {
            after_removal.unwrap_or(now)
        }
    });
    let deadline = spec.retention.erasure_deadline;
    let due_at = deadline
        .zip(probe.history.erasure_pending_since)
        .and_then(|(d, since)| chrono::Duration::from_std(d).ok().map(|d| since + d));
    let overdue = deadline.is_some_and(|d| pending > d);
    let summary = probe.history.erasure_pending_since.map(|since| {
        let at_version = probe
            .history.erasure_pending_version
            .map_or_else(String::new, |v| format!(" at version {v}"));
        let earliest = earliest_erasure.map_or_else(String::new, |t| {
            format!("; earliest erasure {}", t.format("%Y-%m-%d"))
        });
        let due = due_at.map_or_else(String::new, |t| {
            format!(
                "; deadline {}{}",
                t.format("%Y-%m-%d"),
                if overdue { " (overdue)" } else { "" }
            )
        });
        format!(
            "rows deleted{at_version} ({}) are physically present until purge and VACUUM{earliest}{due}",
            since.format("%Y-%m-%d")
        )
    });
    ErasureView {
        deleted_rows: probe.deleted_rows,
        pending_since: probe.history.erasure_pending_since,
        pending_version: probe.history.erasure_pending_version,
        pending_seconds: i64::try_from(pending.as_secs()).unwrap_or(i64::MAX),
        earliest_erasure,
        deadline_seconds: deadline.map(|d| d.as_secs()),
        due_at,
        overdue,
        summary,
    }
}

/// Whether the erasure deadline forces a purge now: the purge, then the retention, must both
/// fit before the oldest pending deletion's deadline, with one purge period (a day) to spare.
pub(crate) fn deadline_at_risk(spec: &TableSpec, probe: &Probe, now: DateTime<Utc>) -> bool {
    const MARGIN: Duration = Duration::from_secs(86_400);
    let Some(deadline) = spec.retention.erasure_deadline else {
        return false;
    };
    erasure_pending(probe, now) + spec.vacuum_window() + MARGIN >= deadline
}
