//! The API's and dashboard's picture of a table: health and its reasons, per-operation
//! staleness and planner decisions, drift. Pure: built from an inventory entry and the
//! replica's state of the table.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tablekeeper_delta::Probe;
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_vocab::ProbeFailureKind;

use super::drift::{drift, Drift};
use super::state::{last_success, staleness, TableState};
use crate::policy::erasure::{erasure, ErasureView};
use crate::policy::estimate::Estimate;
use crate::policy::planner::{self, Decision, Need, Probed};

/// Overall health of a table, worst first.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Health {
    Unreadable,
    Failing,
    Stale,
    Drifted,
    Paused,
    Unknown,
    Healthy,
}

impl Health {
    /// Every health, worst first.
    pub const ALL: [Health; 7] = [
        Health::Unreadable,
        Health::Failing,
        Health::Stale,
        Health::Drifted,
        Health::Paused,
        Health::Unknown,
        Health::Healthy,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Health::Unreadable => "unreadable",
            Health::Failing => "failing",
            Health::Stale => "stale",
            Health::Drifted => "drifted",
            Health::Paused => "paused",
            Health::Unknown => "unknown",
            Health::Healthy => "healthy",
        }
    }
}

/// Staleness is flagged on the dashboard when an operation has not succeeded for this
/// many schedule periods; the alert rules carry their own, operator-tuned thresholds.
const STALE_AFTER_PERIODS: i64 = 3;

/// Per-operation summary for the API and the dashboard.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct OperationView {
    pub operation: Operation,
    pub enabled: bool,
    /// Whether the operation can have work on this table (purge: only with deletion vectors).
    pub applies: bool,
    pub schedule: String,
    pub next_run: Option<DateTime<Utc>>,
    pub last_success: Option<DateTime<Utc>>,
    pub staleness_seconds: Option<i64>,
    /// The staleness past which the operation is `stale` (three schedule periods); `None`
    /// for a disabled operation, and in views that skip the schedules' next runs.
    pub stale_after_seconds: Option<i64>,
    pub stale: bool,
    pub consecutive_failures: i64,
    pub last_failure: Option<String>,
    pub last_failure_at: Option<DateTime<Utc>>,
    pub decision: Decision,
    /// What running it now would cost and buy (DESIGN.md "Budget"): the queued job's
    /// estimate, or one from the last probe when the operation is due; `None` otherwise.
    pub estimate: Option<Estimate>,
    /// In a budget's shadow mode: what `enforce` would do instead of running it now.
    pub would_defer: Option<String>,
}

/// Everything the API says about a table.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub(crate) struct TableView {
    pub name: String,
    pub path: String,
    pub owner: String,
    pub concurrency_key: String,
    pub paused: bool,
    /// Whether tablekeeper rewrites the table (`writers.rewrites`).
    pub rewrites_owned: bool,
    pub health: Health,
    pub health_reasons: Vec<String>,
    pub probe_error: Option<String>,
    /// `transient` (storage did not answer; the figures are the last good probe's) or
    /// `unreadable`.
    pub probe_error_kind: Option<ProbeFailureKind>,
    pub probed_at: Option<DateTime<Utc>>,
    pub probe: Option<std::sync::Arc<Probe>>,
    pub drift: Vec<Drift>,
    pub operations: Vec<OperationView>,
    /// Stale writes recorded for the table (job store, every replica), oldest first: read
    /// from the store by the views that show them (one table's API view and page), empty in
    /// views of the whole fleet.
    pub stale_writes: Vec<tablekeeper_store::StaleWriteRow>,
    /// Rewrites of the table by other engines (job store, every replica): how many, the newest.
    pub foreign_rewrites: Option<tablekeeper_store::ForeignRewriteRow>,
    /// Whether a repair is needed now, and why.
    pub repair: Decision,
    /// When the table's deleted rows are physically gone (from the last probe).
    pub erasure: Option<ErasureView>,
    /// Pins (inventory and API) past their `until`: reported, no longer honoured.
    pub expired_pins: Vec<String>,
}

/// What the dashboard's front page sorts and counts every table by. The same health as the
/// table's view, without what only a shown row needs (next runs cost a cron evaluation per
/// operation; the erasure and repair decisions are not ranked on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rank {
    pub health: Health,
    /// The largest staleness among operations due and not done; 0 when none is stale.
    pub worst_staleness: i64,
}

pub(crate) fn build_view(spec: &TableSpec, state: &TableState, now: DateTime<Utc>) -> TableView {
    let probed = probed(state);
    let operations = operation_views(spec, state, probed, now, NextRuns::Computed);
    let drift = table_drift(spec, state);
    let (health, health_reasons) = health(spec, state, &operations, &drift);
    let repair = match probed {
        Probed::Read(_) => planner::admit(
            spec,
            Operation::Repair,
            probed,
            Need::Check { last_success: None },
            now,
        ),
        Probed::Unreachable(e) | Probed::Unreadable(e) => {
            Decision::Skip(format!("not probed: {e}"))
        }
        Probed::NotYet => Decision::Skip("not probed yet".into()),
    };
    TableView {
        name: spec.name.clone(),
        path: spec.path.clone(),
        owner: spec.owner.clone(),
        concurrency_key: spec.concurrency_key.clone(),
        paused: spec.paused,
        rewrites_owned: spec.writers.rewrites == tablekeeper_inventory::RewriteOwner::Tablekeeper,
        health,
        health_reasons,
        probe_error: state.probe_error.clone(),
        probe_error_kind: state.probe_error_kind,
        probed_at: state.probed_at,
        probe: state.probe.clone(),
        drift,
        operations,
        stale_writes: Vec::new(),
        foreign_rewrites: state.foreign_rewrites.clone(),
        repair,
        erasure: state.probe.as_ref().map(|p| erasure(spec, p, now)),
        expired_pins: expired_pins(spec, state, now),
    }
}

/// Pins past their `until`, named as VACUUM names them, with where to remove them.
fn expired_pins(spec: &TableSpec, state: &TableState, now: DateTime<Utc>) -> Vec<String> {
    let mut expired: Vec<String> = spec
        .retention
        .pins
        .iter()
        .filter(|p| p.until <= now)
        .map(|p| {
            let at = match p.at {
                tablekeeper_inventory::PinAt::Version(v) => format!("version {v}"),
                tablekeeper_inventory::PinAt::Timestamp(t) => {
                    format!("timestamp {}", t.to_rfc3339())
                }
            };
            format!(
                "pin of {at} ({}) expired {}: remove it from `retention.pins`",
                p.reason,
                p.until.format("%Y-%m-%d %H:%M UTC")
            )
        })
        .collect();
    expired.extend(
        state
            .api_pins
            .iter()
            .flatten()
            .filter(|p| p.until <= now)
            .map(|p| {
                format!(
                    "pin of version {} ({}) expired {}: DELETE /api/v1/tables/{}/pins?version={}",
                    p.version,
                    p.reason,
                    p.until.format("%Y-%m-%d %H:%M UTC"),
                    spec.name,
                    p.version
                )
            }),
    );
    expired
}

/// The table's [`Rank`]: its view's health and staleness, at a fraction of the cost.
pub(crate) fn rank(spec: &TableSpec, state: &TableState, now: DateTime<Utc>) -> Rank {
    let operations = operation_views(spec, state, probed(state), now, NextRuns::Skipped);
    let drift = table_drift(spec, state);
    Rank {
        health: health(spec, state, &operations, &drift).0,
        worst_staleness: worst_staleness(&operations),
    }
}

/// The largest staleness among operations due and not done (0 when none is stale).
fn worst_staleness(operations: &[OperationView]) -> i64 {
    operations
        .iter()
        .filter(|o| o.stale)
        .filter_map(|o| o.staleness_seconds)
        .max()
        .unwrap_or(0)
}

/// How the live table disagrees with its inventory entry (nothing before the first probe).
fn table_drift(spec: &TableSpec, state: &TableState) -> Vec<Drift> {
    state
        .probe
        .as_ref()
        .map(|p| drift(spec, p))
        .unwrap_or_default()
}

fn probed(state: &TableState) -> Probed<'_> {
    match (&state.probe_error, &state.probe) {
        (Some(e), _) if state.probe_error_kind == Some(ProbeFailureKind::Transient) => {
            Probed::Unreachable(e.as_str())
        }
        (Some(e), _) => Probed::Unreadable(e.as_str()),
        (None, Some(p)) => Probed::Read(p),
        (None, None) => Probed::NotYet,
    }
}

/// Whether [`operation_views`] evaluates each schedule for its next run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NextRuns {
    Computed,
    Skipped,
}

fn operation_views(
    spec: &TableSpec,
    state: &TableState,
    probed: Probed<'_>,
    now: DateTime<Utc>,
    next_runs: NextRuns,
) -> Vec<OperationView> {
    Operation::SCHEDULED
        .into_iter()
        .map(|op| {
            let schedule = spec.schedule(op);
            let stale_secs = staleness(state, op, now).map(|d| d.num_seconds());
            let last_success = last_success(state, op);
            let decision = planner::admit(spec, op, probed, Need::Check { last_success }, now);
            // Stale on the dashboard means work is due and has not been done for several
            // schedule periods; a table with nothing to do is not stale however long ago
            // its last run was (the staleness metric still grows; alert rules decide).
            // (the schedule's period costs two cron evaluations: only asked when it matters)
            let enabled = spec.operation_enabled(op);
            let due = enabled && !spec.paused && decision.should_run();
            let stale_after = || {
                schedule_period(spec, op, now)
                    .map(|p| i64::try_from(p.as_secs()).unwrap_or(i64::MAX) * STALE_AFTER_PERIODS)
            };
            let stale_after_seconds = if enabled && next_runs == NextRuns::Computed {
                stale_after()
            } else {
                None
            };
            let stale = due
                && match (stale_secs, stale_after_seconds.or_else(stale_after)) {
                    (Some(s), Some(limit)) => s > limit,
                    _ => false,
                };
            let failure = state.last_failure.get(&op);
            OperationView {
                operation: op,
                enabled,
                applies: crate::policy::erasure::applies(op, state.probe.as_deref()),
                schedule: schedule.map(ToString::to_string).unwrap_or_default(),
                next_run: schedule
                    .filter(|_| enabled && next_runs == NextRuns::Computed)
                    .and_then(|s| s.next_after(now.with_timezone(&spec.timezone)))
                    .map(|t| t.with_timezone(&Utc)),
                last_success,
                staleness_seconds: stale_secs,
                stale_after_seconds,
                stale,
                consecutive_failures: state.consecutive_failures.get(&op).copied().unwrap_or(0),
                last_failure: failure.map(|(_, m)| m.clone()),
                last_failure_at: failure.map(|(t, _)| *t),
                decision,
                // the budget's overlay fills them (`fleet::budget`)
                estimate: None,
                would_defer: None,
            }
        })
        .collect()
}

/// The table's health, worst reason first, and every reason for it.
fn health(
    spec: &TableSpec,
    state: &TableState,
    operations: &[OperationView],
    drift: &[Drift],
) -> (Health, Vec<String>) {
    let pending_stale: Vec<i64> = state
        .probe
        .as_ref()
        .map(|p| p.pending_stale_writes().map(|w| w.version).collect())
        .unwrap_or_default();
    let mut reasons = Vec::new();
    let health = if let (Some(e), Some(ProbeFailureKind::Unreadable)) =
        (&state.probe_error, state.probe_error_kind)
    {
        reasons.push(format!("unreadable: {e}"));
        Health::Unreadable
    } else if let Some(e) = &state.probe_error {
        reasons.push(format!(
            "storage did not answer the last probe (figures are from the one before): {e}"
        ));
        Health::Unknown
    } else if !pending_stale.is_empty() {
        reasons.push(format!(
            "stale write(s) at version(s) {pending_stale:?}: rows their writer removed are visible until repaired"
        ));
        Health::Failing
    } else if operations
        .iter()
        .any(|o| o.enabled && o.consecutive_failures > 0)
    {
        for o in operations.iter().filter(|o| o.consecutive_failures > 0) {
            reasons.push(format!(
                "{} failed {} time(s) in a row",
                o.operation, o.consecutive_failures
            ));
        }
        Health::Failing
    } else if operations.iter().any(|o| o.stale) {
        for o in operations.iter().filter(|o| o.stale) {
            reasons.push(format!("{} is stale", o.operation));
        }
        Health::Stale
    } else if !drift.is_empty() {
        reasons.extend(drift.iter().map(|d| format!("{} drift", d.kind.as_str())));
        Health::Drifted
    } else if spec.paused {
        Health::Paused
    } else if state.probe.is_none() {
        Health::Unknown
    } else {
        Health::Healthy
    };
    (health, reasons)
}

/// The gap between the next two runs of an operation's schedule.
fn schedule_period(spec: &TableSpec, op: Operation, now: DateTime<Utc>) -> Option<Duration> {
    let s = spec.schedule(op)?;
    let first = s.next_after(now.with_timezone(&spec.timezone))?;
    let second = s.next_after(first)?;
    (second - first).to_std().ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::policy::planner::tests::{now, probe, spec};

    /// The front page sorts on ranks and shows views: they must agree.
    #[test]
    fn a_rank_is_its_views_health_and_staleness() {
        let probed = TableState {
            probe: Some(Arc::new(probe(serde_json::json!({})))),
            ..TableState::default()
        };
        let mut failing = probed.clone();
        failing.consecutive_failures.insert(Operation::Compact, 2);
        let unreadable = TableState {
            probe_error: Some("missing file".into()),
            probe_error_kind: Some(ProbeFailureKind::Unreadable),
            ..probed.clone()
        };
        let drifted = TableState {
            probe: Some(Arc::new(probe(
                serde_json::json!({"partition_columns": []}),
            ))),
            ..TableState::default()
        };
        let cases = [
            ("not probed", spec(""), TableState::default()),
            ("stale", spec(""), probed.clone()),
            ("failing", spec(""), failing),
            ("unreadable", spec(""), unreadable),
            ("drifted", spec(""), drifted),
            (
                "paused",
                spec("    maintenance:\n      paused: true\n"),
                probed,
            ),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for (case, spec, state) in cases {
            let view = build_view(&spec, &state, now());
            let rank = rank(&spec, &state, now());
            assert_eq!(rank.health, view.health, "{case}");
            assert_eq!(
                rank.worst_staleness,
                worst_staleness(&view.operations),
                "{case}"
            );
            seen.insert(view.health);
        }
        assert!(seen.len() >= 5, "the cases cover the healths: {seen:?}");
    }
}
