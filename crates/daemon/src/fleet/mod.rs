//! The replica's view of the fleet: the current inventory, the latest probe of every table,
//! and the pure views built from them (`view.rs`: health, staleness, decisions; `drift.rs`).
//!
//! It holds state only: it owns no metrics (the publisher turns its views into gauges), never
//! mutates a table and never talks to the job store.

mod drift;
mod erasure;
mod state;
mod view;

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use backon::Retryable as _;
use chrono::{DateTime, Utc};
use tablekeeper_delta::{HistoryBatch, Probe, ProbeOptions, Prober};
use tablekeeper_inventory::{Inventory, Operation, TableSpec};
use tablekeeper_vocab::ProbeFailureKind;

pub(crate) use drift::drift;
pub(crate) use erasure::{deadline_at_risk, erasure_pending};
pub(crate) use state::{last_success, staleness, TableState};
pub(crate) use view::{Health, TableView};

/// Retries of a probe that met storage trouble: three more tries over about two seconds
/// (0.25 s, 0.5 s, 1 s), enough to ride out a blip without holding up the probe round.
const PROBE_RETRY: backon::ExponentialBuilder = backon::ExponentialBuilder::new()
    .with_min_delay(Duration::from_millis(250))
    .with_max_times(3);

/// Why a probe failed, classified: storage trouble that passes, or a table nobody can read
/// until someone acts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeFailure {
    pub kind: ProbeFailureKind,
    pub message: String,
}

impl std::fmt::Display for ProbeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The classification of a probe error.
fn failure_kind(err: &tablekeeper_delta::DeltaError) -> ProbeFailureKind {
    match err.class() {
        tablekeeper_delta::ErrorClass::Permanent => ProbeFailureKind::Unreadable,
        tablekeeper_delta::ErrorClass::Transient | tablekeeper_delta::ErrorClass::Conflict => {
            ProbeFailureKind::Transient
        }
    }
}

/// What a new inventory changed: tables added and removed, owners changed.
#[derive(Debug, Default)]
pub(crate) struct InventoryChange {
    pub added: Vec<String>,
    pub removed: Vec<TableSpec>,
    /// (table, previous owner).
    pub owner_changed: Vec<(String, String)>,
}

/// The shared fleet state of one replica.
#[derive(Debug)]
pub(crate) struct Fleet {
    inventory: RwLock<Arc<Inventory>>,
    tables: RwLock<BTreeMap<String, TableState>>,
    prober: Prober,
}

impl Fleet {
    /// A fleet with `inventory` loaded; every table starts unknown.
    pub(crate) fn new(inventory: Inventory) -> Self {
        let fleet = Self {
            inventory: RwLock::new(Arc::new(Inventory {
                tables: Vec::new(),
                sources: Vec::new(),
            })),
            tables: RwLock::new(BTreeMap::new()),
            prober: Prober::new(),
        };
        fleet.replace_inventory(inventory);
        fleet
    }

    pub(crate) fn inventory(&self) -> Arc<Inventory> {
        Arc::clone(&self.inventory.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The effective spec of a table: the inventory entry with an API pause applied.
    pub(crate) fn spec(&self, name: &str) -> Option<TableSpec> {
        let inv = self.inventory();
        let mut spec = inv.table(name)?.clone();
        if let Some(paused) = self.with_state(name, |s| s.paused_by_api).flatten() {
            spec.paused = paused;
        }
        Some(spec)
    }

    /// Swaps in a new validated inventory: tables that left it lose their state and
    /// everything the prober held for them, new ones start unknown.
    pub(crate) fn replace_inventory(&self, inventory: Inventory) -> InventoryChange {
        let old = self.inventory();
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        let mut change = InventoryChange::default();
        for spec in &old.tables {
            match inventory.table(&spec.name) {
                None => {
                    tables.remove(&spec.name);
                    self.prober.forget(&spec.path);
                    change.removed.push(spec.clone());
                }
                Some(new) if new.owner != spec.owner => change
                    .owner_changed
                    .push((spec.name.clone(), spec.owner.clone())),
                Some(_) => {}
            }
        }
        for spec in &inventory.tables {
            if !tables.contains_key(&spec.name) {
                tables.insert(spec.name.clone(), TableState::default());
                change.added.push(spec.name.clone());
            }
        }
        drop(tables);
        *self.inventory.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(inventory);
        change
    }

    /// Last success of `op` on a table, from the log and the job table combined.
    pub(crate) fn last_success(&self, name: &str, op: Operation) -> Option<DateTime<Utc>> {
        self.with_state(name, |s| last_success(s, op)).flatten()
    }

    pub(crate) fn with_state<T>(&self, name: &str, f: impl FnOnce(&TableState) -> T) -> Option<T> {
        let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
        tables.get(name).map(f)
    }

    pub(crate) fn update_state(&self, name: &str, f: impl FnOnce(&mut TableState)) {
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        if let Some(state) = tables.get_mut(name) {
            f(state);
        }
    }

    /// Probes one table's log. Storage trouble (timeouts, 5xx, throttling) is retried a
    /// few times with backoff; if it persists the table keeps its last good figures and
    /// shows health `unknown`.
    pub(crate) async fn probe(&self, spec: &TableSpec) -> Result<Probe, ProbeFailure> {
        let options = ProbeOptions {
            stale_watch: crate::executor::stale_watch(spec),
            ..ProbeOptions::for_target(spec.compaction.target_file_size)
        };
        let result = (|| self.prober.probe(&spec.path, &options))
            .retry(PROBE_RETRY)
            .when(|e| failure_kind(e) == ProbeFailureKind::Transient)
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
                Ok(probe)
            }
            Err(e) => {
                let failure = ProbeFailure {
                    kind: failure_kind(&e),
                    message: e.to_string(),
                };
                tracing::warn!(table = %spec.name, kind = failure.kind.as_str(), error = %failure.message, "table probe failed");
                self.update_state(&spec.name, |s| {
                    s.probe_error = Some(failure.message.clone());
                    s.probe_error_kind = Some(failure.kind);
                    s.probed_at = Some(now);
                });
                Err(failure)
            }
        }
    }

    /// Commit records the prober read since the last call, for `table_commits`.
    pub(crate) async fn take_history(&self, spec: &TableSpec) -> HistoryBatch {
        self.prober.take_history(&spec.path).await
    }

    /// Gives back records [`Fleet::take_history`] handed out that could not be stored.
    pub(crate) async fn return_history(&self, spec: &TableSpec, batch: HistoryBatch) {
        self.prober.return_history(&spec.path, batch).await;
    }

    /// Records last successes read from the job table (all tables at once).
    pub(crate) fn set_store_successes(
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

    /// The API/dashboard view of one table.
    pub(crate) fn view(&self, name: &str, now: DateTime<Utc>) -> Option<TableView> {
        let spec = self.spec(name)?;
        let state = self.with_state(name, Clone::clone).unwrap_or_default();
        Some(view::build_view(&spec, &state, now))
    }

    pub(crate) fn views(&self, now: DateTime<Utc>) -> Vec<TableView> {
        let inv = self.inventory();
        inv.tables
            .iter()
            .filter_map(|t| self.view(&t.name, now))
            .collect()
    }
}
