//! The replica's view of the fleet: the current inventory, the latest probe of every
//! table, and what follows from them (health, drift, staleness, planner decisions).
//!
//! It owns the table-level gauges: every probe refresh writes them, so `/metrics`, the
//! JSON API and the dashboard read one consistent picture. It never mutates a table and
//! never talks to the job store except to read last successes.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tablekeeper_delta::{HistoryBatch, Probe, ProbeOptions, Prober};
use tablekeeper_inventory::{Inventory, Operation, TableSpec};

use crate::metrics::Metrics;
use backon::Retryable as _;

use crate::planner::{self, Decision, Probed};

/// Kinds of drift between the inventory and the live table (the `kind` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftKind {
    Retention,
    Protocol,
    Partitioning,
}

impl DriftKind {
    pub const ALL: [DriftKind; 3] = [
        DriftKind::Retention,
        DriftKind::Protocol,
        DriftKind::Partitioning,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            DriftKind::Retention => "retention",
            DriftKind::Protocol => "protocol",
            DriftKind::Partitioning => "partitioning",
        }
    }
}

/// One detected disagreement, explained.
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    pub kind: DriftKind,
    pub detail: String,
}

/// Why the last probe of a table failed: storage trouble that passes, or a table that cannot
/// be read until someone acts (the `kind` label of `tablekeeper_table_probe_failures_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeFailureKind {
    /// Timeouts, connection errors, 5xx and throttling.
    Transient,
    /// Missing log or data files, a damaged log, an unsupported protocol, denied access.
    Unreadable,
}

impl ProbeFailureKind {
    pub const ALL: [ProbeFailureKind; 2] =
        [ProbeFailureKind::Transient, ProbeFailureKind::Unreadable];

    pub fn as_str(self) -> &'static str {
        match self {
            ProbeFailureKind::Transient => "transient",
            ProbeFailureKind::Unreadable => "unreadable",
        }
    }

    fn of(err: &tablekeeper_delta::DeltaError) -> Self {
        match err.class() {
            tablekeeper_delta::ErrorClass::Permanent => ProbeFailureKind::Unreadable,
            tablekeeper_delta::ErrorClass::Transient | tablekeeper_delta::ErrorClass::Conflict => {
                ProbeFailureKind::Transient
            }
        }
    }
}

/// Overall health of a table, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    Unreadable,
    Failing,
    Stale,
    Drifted,
    Paused,
    Unknown,
    Healthy,
}

impl Health {
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

/// Retries of a probe that met storage trouble: three more tries over about two seconds
/// (0.25 s, 0.5 s, 1 s), enough to ride out a blip without holding up the probe round.
const PROBE_RETRY: backon::ExponentialBuilder = backon::ExponentialBuilder::new()
    .with_min_delay(Duration::from_millis(250))
    .with_max_times(3);

/// Staleness is flagged on the dashboard when an operation has not succeeded for this
/// many schedule periods; the alert rules carry their own, operator-tuned thresholds.
const STALE_AFTER_PERIODS: i64 = 3;

/// What the replica knows about one table.
#[derive(Debug, Clone, Default)]
pub struct TableState {
    /// The last good probe (kept while storage is unreachable).
    pub probe: Option<Probe>,
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
    /// Stale writes recorded in the job store by any replica.
    pub stale_writes: Vec<tablekeeper_store::StaleWriteRow>,
}

/// Per-operation summary for the API and the dashboard.
#[derive(Debug, Clone, Serialize)]
pub struct OperationView {
    pub operation: Operation,
    pub enabled: bool,
    pub schedule: String,
    pub next_run: Option<DateTime<Utc>>,
    pub last_success: Option<DateTime<Utc>>,
    pub staleness_seconds: Option<i64>,
    pub stale: bool,
    pub consecutive_failures: i64,
    pub last_failure: Option<String>,
    pub last_failure_at: Option<DateTime<Utc>>,
    pub decision: Decision,
}

/// Everything the API says about a table.
#[derive(Debug, Clone, Serialize)]
pub struct TableView {
    pub name: String,
    pub path: String,
    pub owner: String,
    pub concurrency_key: String,
    pub paused: bool,
    pub health: Health,
    pub health_reasons: Vec<String>,
    pub probe_error: Option<String>,
    /// `transient` (storage did not answer; the figures are the last good probe's) or
    /// `unreadable`.
    pub probe_error_kind: Option<ProbeFailureKind>,
    pub probed_at: Option<DateTime<Utc>>,
    pub probe: Option<Probe>,
    pub drift: Vec<Drift>,
    pub operations: Vec<OperationView>,
    /// Stale writes recorded for the table (job store, every replica), oldest first.
    pub stale_writes: Vec<tablekeeper_store::StaleWriteRow>,
    /// Whether a repair is needed now, and why.
    pub repair: Decision,
}

/// The shared fleet state of one replica.
#[derive(Debug)]
pub struct Fleet {
    inventory: RwLock<Arc<Inventory>>,
    tables: RwLock<BTreeMap<String, TableState>>,
    prober: Prober,
    metrics: Metrics,
}

impl Fleet {
    pub fn new(inventory: Inventory, metrics: Metrics) -> Self {
        let fleet = Self {
            inventory: RwLock::new(Arc::new(Inventory {
                tables: Vec::new(),
                sources: Vec::new(),
            })),
            tables: RwLock::new(BTreeMap::new()),
            prober: Prober::new(),
            metrics,
        };
        fleet.replace_inventory(inventory);
        fleet
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    pub fn inventory(&self) -> Arc<Inventory> {
        Arc::clone(&self.inventory.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The effective spec of a table: the inventory entry with an API pause applied.
    pub fn spec(&self, name: &str) -> Option<TableSpec> {
        let inv = self.inventory();
        let mut spec = inv.table(name)?.clone();
        if let Some(paused) = self.with_state(name, |s| s.paused_by_api).flatten() {
            spec.paused = paused;
        }
        Some(spec)
    }

    /// Swaps in a new validated inventory: tables that left it lose their state and
    /// series, new ones start unknown. Returns (added, removed) table names.
    pub fn replace_inventory(&self, inventory: Inventory) -> (Vec<String>, Vec<String>) {
        let old = self.inventory();
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        let mut removed = Vec::new();
        for spec in &old.tables {
            if inventory.table(&spec.name).is_none() {
                tables.remove(&spec.name);
                self.metrics.forget_table(&spec.name, &spec.owner);
                self.prober.forget(&spec.path);
                removed.push(spec.name.clone());
            } else if let Some(new) = inventory.table(&spec.name) {
                if new.owner != spec.owner {
                    let _ = self
                        .metrics
                        .table_info
                        .remove_label_values(&[&spec.name, &spec.owner]);
                }
            }
        }
        let mut added = Vec::new();
        for spec in &inventory.tables {
            if !tables.contains_key(&spec.name) {
                tables.insert(spec.name.clone(), TableState::default());
                added.push(spec.name.clone());
            }
            self.init_table_series(spec);
        }
        self.metrics
            .inventory_tables
            .set(inventory.tables.len() as i64);
        drop(tables);
        *self.inventory.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(inventory);
        (added, removed)
    }

    /// Creates a table's series at their starting values so `increase()` in alert rules
    /// sees the first event, and drops series of operations the inventory disabled so a
    /// disabled operation never looks stale.
    fn init_table_series(&self, spec: &TableSpec) {
        let m = &self.metrics;
        let name = spec.name.as_str();
        m.table_info
            .with_label_values(&[name, spec.owner.as_str()])
            .set(1);
        for kind in ProbeFailureKind::ALL {
            m.table_probe_failures_total
                .with_label_values(&[name, kind.as_str()])
                .inc_by(0);
        }
        m.bytes_rewritten_total.with_label_values(&[name]).inc_by(0);
        m.bytes_reclaimed_total.with_label_values(&[name]).inc_by(0);
        for op in Operation::SCHEDULED {
            let labels = [name, op.as_str()];
            if spec.operation_enabled(op) {
                m.commit_conflicts_total
                    .with_label_values(&labels)
                    .inc_by(0);
                m.concurrency_key_waits_total
                    .with_label_values(&labels)
                    .inc_by(0);
                m.consecutive_failures.with_label_values(&labels).add(0);
            } else {
                let _ = m.staleness_seconds.remove_label_values(&labels);
                let _ = m
                    .last_success_timestamp_seconds
                    .remove_label_values(&labels);
                let _ = m.consecutive_failures.remove_label_values(&labels);
            }
        }
    }

    /// Last success of `op` on a table, from the log and the job table combined.
    pub fn last_success(&self, name: &str, op: Operation) -> Option<DateTime<Utc>> {
        self.with_state(name, |s| last_success(s, op)).flatten()
    }

    pub fn with_state<T>(&self, name: &str, f: impl FnOnce(&TableState) -> T) -> Option<T> {
        let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
        tables.get(name).map(f)
    }

    pub fn update_state(&self, name: &str, f: impl FnOnce(&mut TableState)) {
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = tables.get_mut(name) {
            f(state);
        }
    }

    /// Probes one table's log and refreshes its gauges. Storage trouble (timeouts, 5xx,
    /// throttling) is retried a few times with backoff; if it persists the table keeps its
    /// last good figures and shows health `unknown`. Either failure is counted in
    /// `tablekeeper_table_probe_failures_total` with its kind.
    pub async fn probe(&self, spec: &TableSpec) -> Result<Probe, String> {
        let options = ProbeOptions {
            stale_watch: crate::executor::stale_watch(spec),
            ..ProbeOptions::for_target(spec.compaction.target_file_size)
        };
        let result = (|| self.prober.probe(&spec.path, &options))
            .retry(PROBE_RETRY)
            .when(|e| ProbeFailureKind::of(e) == ProbeFailureKind::Transient)
            .await;
        let now = Utc::now();
        match result {
            Ok(probe) => {
                self.update_state(&spec.name, |s| {
                    s.probe = Some(probe.clone());
                    s.probe_error = None;
                    s.probe_error_kind = None;
                    s.probed_at = Some(now);
                });
                self.refresh_table_metrics(spec, now);
                Ok(probe)
            }
            Err(e) => {
                let kind = ProbeFailureKind::of(&e);
                let message = e.to_string();
                tracing::warn!(table = %spec.name, kind = kind.as_str(), error = %message, "table probe failed");
                self.metrics
                    .table_probe_failures_total
                    .with_label_values(&[&spec.name, kind.as_str()])
                    .inc();
                self.update_state(&spec.name, |s| {
                    s.probe_error = Some(message.clone());
                    s.probe_error_kind = Some(kind);
                    s.probed_at = Some(now);
                });
                Err(message)
            }
        }
    }

    /// Commit records the prober read since the last call, for `table_commits`.
    pub async fn take_history(&self, spec: &TableSpec) -> HistoryBatch {
        self.prober.take_history(&spec.path).await
    }

    /// Gives back records [`Fleet::take_history`] handed out that could not be stored.
    pub async fn return_history(&self, spec: &TableSpec, batch: HistoryBatch) {
        self.prober.return_history(&spec.path, batch).await;
    }

    /// Records last successes read from the job table (all tables at once).
    pub fn set_store_successes(
        &self,
        rows: impl IntoIterator<Item = (String, Operation, DateTime<Utc>)>,
    ) {
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        for (table, op, at) in rows {
            if let Some(state) = tables.get_mut(&table) {
                let entry = state.store_success.entry(op).or_insert(at);
                if at > *entry {
                    *entry = at;
                }
            }
        }
    }

    /// Recomputes staleness, last success, size and drift gauges of one table.
    pub fn refresh_table_metrics(&self, spec: &TableSpec, now: DateTime<Utc>) {
        let Some(state) = self.with_state(&spec.name, Clone::clone) else {
            return;
        };
        let m = &self.metrics;
        let name = spec.name.as_str();
        if let Some(p) = &state.probe {
            m.table_files.with_label_values(&[name]).set(p.files as i64);
            m.table_size_bytes
                .with_label_values(&[name])
                .set(p.size_bytes as i64);
            m.table_small_files
                .with_label_values(&[name])
                .set(p.small_files as i64);
            m.table_version.with_label_values(&[name]).set(p.version);
            m.table_commits_since_checkpoint
                .with_label_values(&[name])
                .set(p.commits_since_checkpoint as i64);
            m.table_commits_per_hour
                .with_label_values(&[name])
                .set(p.commits_per_hour as f64);
            let drift = drift(spec, p);
            for kind in DriftKind::ALL {
                let on = drift.iter().any(|d| d.kind == kind);
                m.drift
                    .with_label_values(&[name, kind.as_str()])
                    .set(i64::from(on));
            }
        }
        for op in Operation::SCHEDULED {
            if !spec.operation_enabled(op) {
                continue;
            }
            let labels = [name, op.as_str()];
            let last = last_success(&state, op);
            if let Some(at) = last {
                m.last_success_timestamp_seconds
                    .with_label_values(&labels)
                    .set(at.timestamp() as f64);
            }
            if let Some(stale) = staleness(&state, op, now) {
                m.staleness_seconds
                    .with_label_values(&labels)
                    .set(stale.num_seconds() as f64);
            }
            m.consecutive_failures
                .with_label_values(&labels)
                .set(state.consecutive_failures.get(&op).copied().unwrap_or(0));
        }
    }

    /// Recomputes staleness for every table (staleness grows with time, not with probes).
    pub fn refresh_all_metrics(&self, now: DateTime<Utc>) {
        let inv = self.inventory();
        for spec in &inv.tables {
            self.refresh_table_metrics(spec, now);
        }
    }

    /// The API/dashboard view of one table.
    pub fn view(&self, name: &str, now: DateTime<Utc>) -> Option<TableView> {
        let spec = self.spec(name)?;
        let state = self.with_state(name, Clone::clone).unwrap_or_default();
        Some(build_view(&spec, &state, now))
    }

    pub fn views(&self, now: DateTime<Utc>) -> Vec<TableView> {
        let inv = self.inventory();
        inv.tables
            .iter()
            .filter_map(|t| self.view(&t.name, now))
            .collect()
    }
}

fn last_success(state: &TableState, op: Operation) -> Option<DateTime<Utc>> {
    let from_log = state
        .probe
        .as_ref()
        .and_then(|p| planner::last_success_from_log(p, op));
    let from_store = state.store_success.get(&op).copied();
    from_log.max(from_store)
}

/// now − last success; since table creation if never (DESIGN.md metrics contract).
fn staleness(state: &TableState, op: Operation, now: DateTime<Utc>) -> Option<chrono::Duration> {
    let since =
        last_success(state, op).or_else(|| state.probe.as_ref().and_then(|p| p.created_at))?;
    Some((now - since).max(chrono::Duration::zero()))
}

/// Delta's `delta.logRetentionDuration` when a table does not set it.
const DELTA_DEFAULT_LOG_RETENTION: Duration = Duration::from_secs(30 * 86_400);

/// Compares the inventory with the live table.
pub fn drift(spec: &TableSpec, probe: &Probe) -> Vec<Drift> {
    let mut out = Vec::new();
    if let Some(live) = probe
        .properties
        .get("delta.deletedFileRetentionDuration")
        .and_then(|v| tablekeeper_delta::parse_delta_interval(v).ok())
    {
        if live != spec.retention.deleted_file_retention {
            out.push(Drift {
                kind: DriftKind::Retention,
                detail: format!(
                    "inventory says deleted_file_retention {}, table property delta.deletedFileRetentionDuration says {}; VACUUM uses the longer",
                    humantime::format_duration(spec.retention.deleted_file_retention),
                    humantime::format_duration(live)
                ),
            });
        }
    }
    match probe
        .properties
        .get("delta.logRetentionDuration")
        .and_then(|v| tablekeeper_delta::parse_delta_interval(v).ok())
    {
        Some(live) if live != spec.retention.log_retention => out.push(Drift {
            kind: DriftKind::Retention,
            detail: format!(
                "inventory says log_retention {}, table property delta.logRetentionDuration says {}; log cleanup uses the longer",
                humantime::format_duration(spec.retention.log_retention),
                humantime::format_duration(live)
            ),
        }),
        Some(_) => {}
        // Other writers clean the log up after every commit with the table's retention, Delta's
        // 30 days when the property is absent: a longer inventory retention is not what they do.
        None if spec.retention.log_retention > DELTA_DEFAULT_LOG_RETENTION => out.push(Drift {
            kind: DriftKind::Retention,
            detail: format!(
                "inventory says log_retention {}, but the table sets no delta.logRetentionDuration, so \
                 other writers delete log files after Delta's default 30 days (tablekeeper keeps their \
                 history in table_commits); set the property to match",
                humantime::format_duration(spec.retention.log_retention)
            ),
        }),
        None => {}
    }
    let live_features: std::collections::BTreeSet<&str> = probe
        .reader_features
        .iter()
        .chain(probe.writer_features.iter())
        .map(String::as_str)
        .collect();
    let missing: Vec<&str> = spec
        .protocol
        .features
        .iter()
        .map(String::as_str)
        .filter(|f| !live_features.contains(f) && !feature_enabled_by_property(probe, f))
        .collect();
    // Features that writer version 7 lists explicitly but older protocols implied.
    const IMPLICIT: &[&str] = &["appendOnly", "invariants"];
    let undeclared: Vec<&str> = live_features
        .iter()
        .copied()
        .filter(|f| !IMPLICIT.contains(f) && !spec.protocol.features.iter().any(|d| d == f))
        .collect();
    if !missing.is_empty() || !undeclared.is_empty() {
        let mut parts = Vec::new();
        if !missing.is_empty() {
            parts.push(format!(
                "declared but not on the table: [{}]",
                missing.join(", ")
            ));
        }
        if !undeclared.is_empty() {
            parts.push(format!(
                "on the table but not declared in `protocol.features`: [{}]",
                undeclared.join(", ")
            ));
        }
        out.push(Drift {
            kind: DriftKind::Protocol,
            detail: parts.join("; "),
        });
    }
    if spec.layout.partition_by != probe.partition_columns {
        out.push(Drift {
            kind: DriftKind::Partitioning,
            detail: format!(
                "inventory `layout.partition_by` is [{}], the table is partitioned by [{}]",
                spec.layout.partition_by.join(", "),
                probe.partition_columns.join(", ")
            ),
        });
    }
    out
}

/// Legacy (pre-table-features) protocols turn some features on by table property.
fn feature_enabled_by_property(probe: &Probe, feature: &str) -> bool {
    let key = match feature {
        "changeDataFeed" => "delta.enableChangeDataFeed",
        "deletionVectors" => "delta.enableDeletionVectors",
        "appendOnly" => "delta.appendOnly",
        _ => return false,
    };
    probe
        .properties
        .get(key)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

fn build_view(spec: &TableSpec, state: &TableState, now: DateTime<Utc>) -> TableView {
    let probe_result: Probed<'_> = match (&state.probe_error, &state.probe) {
        (Some(e), _) if state.probe_error_kind == Some(ProbeFailureKind::Transient) => {
            Probed::Unreachable(e.as_str())
        }
        (Some(e), _) => Probed::Unreadable(e.as_str()),
        (None, Some(p)) => Probed::Read(p),
        (None, None) => Probed::Unreachable("not probed yet"),
    };
    let operations: Vec<OperationView> = Operation::SCHEDULED
        .into_iter()
        .map(|op| {
            let schedule = spec.schedule(op);
            let stale_secs = staleness(state, op, now).map(|d| d.num_seconds());
            let period = schedule_period(spec, op, now);
            let decision = if state.probe.is_none() && state.probe_error.is_none() {
                Decision::Skip("not probed yet".into())
            } else {
                planner::decide(spec, op, probe_result, last_success(state, op), now)
            };
            // Stale on the dashboard means work is due and has not been done for several
            // schedule periods; a table with nothing to do is not stale however long ago
            // its last run was (the staleness metric still grows; alert rules decide).
            let stale = spec.operation_enabled(op)
                && !spec.paused
                && decision.should_run()
                && match (stale_secs, period) {
                    (Some(s), Some(p)) => s > p.as_secs() as i64 * STALE_AFTER_PERIODS,
                    _ => false,
                };
            let failure = state.last_failure.get(&op);
            OperationView {
                operation: op,
                enabled: spec.operation_enabled(op),
                schedule: schedule.map(ToString::to_string).unwrap_or_default(),
                next_run: schedule
                    .and_then(|s| s.next_after(now.with_timezone(&spec.timezone)))
                    .map(|t| t.with_timezone(&Utc)),
                last_success: last_success(state, op),
                staleness_seconds: stale_secs,
                stale,
                consecutive_failures: state.consecutive_failures.get(&op).copied().unwrap_or(0),
                last_failure: failure.map(|(_, m)| m.clone()),
                last_failure_at: failure.map(|(t, _)| *t),
                decision,
            }
        })
        .collect();
    let drift = state
        .probe
        .as_ref()
        .map(|p| drift(spec, p))
        .unwrap_or_default();
    let repair = match probe_result {
        Probed::Read(_) => planner::decide(spec, Operation::Repair, probe_result, None, now),
        Probed::Unreachable(e) | Probed::Unreadable(e) => {
            Decision::Skip(format!("not probed: {e}"))
        }
    };
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
    TableView {
        name: spec.name.clone(),
        path: spec.path.clone(),
        owner: spec.owner.clone(),
        concurrency_key: spec.concurrency_key.clone(),
        paused: spec.paused,
        health,
        health_reasons: reasons,
        probe_error: state.probe_error.clone(),
        probe_error_kind: state.probe_error_kind,
        probed_at: state.probed_at,
        probe: state.probe.clone(),
        drift,
        operations,
        stale_writes: state.stale_writes.clone(),
        repair,
    }
}

/// The gap between the next two runs of an operation's schedule.
fn schedule_period(spec: &TableSpec, op: Operation, now: DateTime<Utc>) -> Option<Duration> {
    let s = spec.schedule(op)?;
    let first = s.next_after(now.with_timezone(&spec.timezone))?;
    let second = s.next_after(first)?;
    (second - first).to_std().ok()
}
