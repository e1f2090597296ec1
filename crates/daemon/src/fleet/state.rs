//! What a replica knows about one table, and the facts derived from it alone: the last
//! success of an operation (log or job table, whichever is newer) and its staleness.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use tablekeeper_delta::Probe;
use tablekeeper_inventory::Operation;
use tablekeeper_vocab::ProbeFailureKind;

use crate::policy::planner;

/// What the replica knows about one table.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableState {
    /// The last good probe (kept while storage is unreachable); shared with the views
    /// built from it, which the API and the dashboard build per request.
    pub probe: Option<std::sync::Arc<Probe>>,
    pub probe_error: Option<String>,
    pub probe_error_kind: Option<ProbeFailureKind>,
    pub probed_at: Option<DateTime<Utc>>,
    /// Last success per operation recorded in the job table.
    pub store_success: BTreeMap<Operation, DateTime<Utc>>,
    /// Failed attempts per operation since its last success, fleet-wide (job table).
    pub consecutive_failures: BTreeMap<Operation, i64>,
    /// The newest of those failures: when, and its error (job table).
    pub last_failure: BTreeMap<Operation, (DateTime<Utc>, String)>,
    /// Pause set through the API (overrides the inventory until resumed or reloaded).
    pub paused_by_api: Option<bool>,
    /// Rewrites of the table by other engines recorded in the job store (any replica).
    pub foreign_rewrites: Option<tablekeeper_store::ForeignRewriteRow>,
    /// Pins added through the API (job store, every replica); `None` until first read.
    pub api_pins: Option<Vec<tablekeeper_store::TablePin>>,
    /// When the table is probed next.
    pub cadence: super::cadence::Cadence,
}

pub(crate) fn last_success(state: &TableState, op: Operation) -> Option<DateTime<Utc>> {
    let from_log = state
        .probe
        .as_ref()
        .and_then(|p| planner::last_success_from_log(p, op));
    let from_store = state.store_success.get(&op).copied();
    from_log.max(from_store)
}

/// now − last success; since table creation if never (DESIGN.md metrics contract).
pub(crate) fn staleness(
    state: &TableState,
    op: Operation,
    now: DateTime<Utc>,
) -> Option<chrono::Duration> {
    let since = last_success(state, op)
        .or_else(|| state.probe.as_ref().and_then(|p| p.history.created_at))?;
    Some((now - since).max(chrono::Duration::zero()))
}
