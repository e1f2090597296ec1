//! The replica's view of the fleet: the current inventory, the latest probe of every table,
//! what it knows of the budget (`budget.rs`), and the pure views built from them (`view.rs`:
//! health, staleness, decisions; `drift.rs`).
//!
//! It holds state only: it owns no metrics (the publisher turns its views into gauges), never
//! mutates a table and never talks to the job store (what other replicas probed arrives
//! through `sharing.rs`, from the background loop that reads it).

pub(crate) mod budget;
mod cadence;
mod costs;
mod drift;
mod sharing;
mod state;
mod view;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use backon::Retryable as _;
use chrono::{DateTime, SubsecRound as _, Utc};
use tablekeeper_delta::cost::scope::Metered;
use tablekeeper_delta::{HistoryBatch, Probe, ProbeOptions, Prober};
use tablekeeper_inventory::{Inventory, Operation, TableSpec};
use tablekeeper_store::ProbeRow;
use tablekeeper_vocab::{ProbeFailureKind, TableFigures};

use cadence::Seen;
use costs::ProbeMeters;

pub(crate) use costs::{figures as probe_figures, ProbeCost};

pub(crate) use cadence::{Clock, ProbeIntervals, DEFAULT_MAX_PROBE_INTERVAL};
pub(crate) use drift::drift;
pub(crate) use sharing::REPLICA_TTL;
pub(crate) use state::{last_success, staleness, TableState};
pub(crate) use view::{Health, OperationView, Rank, TableView};

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

/// What a new inventory changed: tables added and removed.
#[derive(Debug, Default)]
pub(crate) struct InventoryChange {
    pub added: Vec<String>,
    pub removed: Vec<TableSpec>,
}

/// The inventory with its tables indexed by name (looked up per job, tick and request).
#[derive(Debug, Default)]
struct Indexed {
    inventory: Arc<Inventory>,
    by_name: HashMap<String, usize>,
}

impl Indexed {
    fn new(inventory: Inventory) -> Self {
        let by_name = inventory
            .tables
            .iter()
            .enumerate()
            .map(|(i, spec)| (spec.name.clone(), i))
            .collect();
        Indexed {
            inventory: Arc::new(inventory),
            by_name,
        }
    }

    fn table(&self, name: &str) -> Option<&TableSpec> {
        self.by_name
            .get(name)
            .and_then(|&i| self.inventory.tables.get(i))
    }
}

/// The shared fleet state of one replica.
#[derive(Debug)]
pub(crate) struct Fleet {
    inventory: RwLock<Arc<Indexed>>,
    tables: RwLock<BTreeMap<String, TableState>>,
    /// Shared with the probes running on the Delta runtime.
    prober: Arc<Prober>,
    intervals: ProbeIntervals,
    /// Who else probes (`sharing.rs`); unknown until the job store confirms it.
    peers: RwLock<sharing::Peers>,
    clock: Clock,
    /// How often each table's restore drill runs.
    restore_drill_every: Duration,
    /// Whether a table's first damage check and first history read run beside its first probe.
    first_sight_beside: bool,
    /// What each table's probes cost (`costs.rs`).
    probe_meters: ProbeMeters,
    /// The estimates' throughputs and the latest budget verdicts (`budget.rs`).
    pub budget: budget::BudgetKnowledge,
}

/// How a fleet probes: its intervals and how many tables stay loaded between probes.
#[derive(Debug, Clone)]
pub(crate) struct FleetOptions {
    pub intervals: ProbeIntervals,
    pub loaded_snapshots: usize,
    /// What probe timing reads (tests move it forward).
    pub clock: Clock,
    /// How often each table's restore drill runs (`restore_drill_every`).
    pub restore_drill_every: Duration,
    /// Run each table's first damage check and first history read beside its first probe
    /// (`ProbeOptions::first_sight_beside`): a daemon does; a command that probes once does not.
    pub first_sight_beside: bool,
}

impl FleetOptions {
    /// For commands that probe each table once (`plan`): nothing stays loaded.
    pub(crate) fn probe_once() -> Self {
        FleetOptions {
            // never consulted: nothing asks which table is due
            intervals: ProbeIntervals {
                active: Duration::from_secs(86_400),
                max: Duration::from_secs(86_400),
            },
            loaded_snapshots: 1,
            clock: Clock::default(),
            restore_drill_every: tablekeeper_delta::DEFAULT_DRILL_EVERY,
            first_sight_beside: false,
        }
    }
}

impl Fleet {
    /// A fleet with `inventory` loaded; every table starts unknown and due for a probe.
    pub(crate) fn new(inventory: Inventory, options: FleetOptions) -> Self {
        let fleet = Self {
            inventory: RwLock::default(),
            tables: RwLock::new(BTreeMap::new()),
            prober: Arc::new(Prober::with_loaded_snapshots(options.loaded_snapshots)),
            intervals: options.intervals,
            peers: RwLock::default(),
            clock: options.clock,
            restore_drill_every: options.restore_drill_every,
            first_sight_beside: options.first_sight_beside,
            probe_meters: ProbeMeters::default(),
            budget: budget::BudgetKnowledge::default(),
        };
        fleet.replace_inventory(inventory);
        fleet
    }

    pub(crate) fn inventory(&self) -> Arc<Inventory> {
        Arc::clone(&self.indexed().inventory)
    }

    fn indexed(&self) -> Arc<Indexed> {
        Arc::clone(&self.inventory.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// The effective spec of a table: the inventory entry with an API pause applied.
    pub(crate) fn spec(&self, name: &str) -> Option<TableSpec> {
        let mut spec = self.indexed().table(name)?.clone();
        if let Some(paused) = self.with_state(name, |s| s.paused_by_api).flatten() {
            spec.paused = paused;
        }
        Some(spec)
    }

    /// Swaps in a new validated inventory: tables that left it lose their state and
    /// everything the prober held for them, new ones start unknown.
    pub(crate) fn replace_inventory(&self, inventory: Inventory) -> InventoryChange {
        let old = self.inventory();
        let new = Indexed::new(inventory);
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        let mut change = InventoryChange::default();
        for spec in &old.tables {
            if new.table(&spec.name).is_none() {
                tables.remove(&spec.name);
                self.prober.forget(&spec.path);
                change.removed.push(spec.clone());
            }
        }
        for spec in &new.inventory.tables {
            if !tables.contains_key(&spec.name) {
                tables.insert(spec.name.clone(), TableState::default());
                change.added.push(spec.name.clone());
            }
        }
        drop(tables);
        *self.inventory.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(new);
        change
    }

    /// The table's figures from its last probe, what a job's outcome starts from.
    pub(crate) fn figures(&self, name: &str) -> Option<TableFigures> {
        self.with_state(name, |s| s.probe.as_deref().map(probe_figures))
            .flatten()
    }

    /// What each table's probes cost since the last call; tables that left the inventory
    /// are counted one last time.
    pub(crate) fn take_probe_costs(&self) -> Vec<ProbeCost> {
        let indexed = self.indexed();
        self.probe_meters
            .take(|table| indexed.table(table).is_some())
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

    /// What `spec`'s VACUUM, log cleanup and restore drill keep for others: the inventory's
    /// pins and clones, the API pins `pins`, and the inventoried tables whose last probe (any
    /// replica's) saw files outside their root, or that were not probed yet.
    pub(crate) fn keep_for(
        &self,
        spec: &TableSpec,
        pins: &[tablekeeper_store::TablePin],
    ) -> tablekeeper_delta::Keep {
        use crate::policy::keep::References;
        let inventory = self.inventory();
        crate::policy::keep::keep_for(&inventory, spec, pins, |other| {
            self.with_state(&other.name, |state| match &state.probe {
                Some(probe) if probe.references_others(other.vacuum_window(), Utc::now()) => {
                    References::External
                }
                Some(_) => References::OwnOnly,
                None => References::Unknown,
            })
            .unwrap_or(References::Unknown)
        })
    }

    /// Probes one table's log. Storage trouble (timeouts, 5xx, throttling) is retried a
    /// few times with backoff; if it persists the table keeps its last good figures and
    /// shows health `unknown`.
    pub(crate) async fn probe(&self, spec: &TableSpec) -> Result<Probe, ProbeFailure> {
        let api_pins = self
            .with_state(&spec.name, |s| s.api_pins.clone())
            .flatten()
            .unwrap_or_default();
        let options = ProbeOptions {
            stale_watch: tablekeeper_delta::stale_watch_for(spec.vacuum_window()),
            now: Some(self.clock.now().into_std()),
            drill: Some(tablekeeper_delta::DrillOptions {
                keep: self.keep_for(spec, &api_pins),
                window: spec.vacuum_window(),
                allow_short_retention: spec.retention.allow_short_retention,
                every: self.restore_drill_every,
            }),
            first_sight_beside: self.first_sight_beside,
            ..ProbeOptions::for_target(spec.compaction.target_file_size)
        };
        // on the Delta runtime: a log replay computes without yielding for as long as the
        // log is big, and must not hold the threads that renew leases and answer HTTP
        // under the table's probe meter: what it costs counts as the table's `probe`
        let meter = self.probe_meters.of(&spec.name, &spec.owner);
        let loaded = crate::delta_runtime::spawn({
            let (prober, uri) = (Arc::clone(&self.prober), spec.path.clone());
            Metered::new(meter, async move {
                (|| prober.probe(&uri, &options))
                    .retry(PROBE_RETRY)
                    .when(|e| failure_kind(e) == ProbeFailureKind::Transient)
                    .await
            })
        })
        .await;
        let result = match loaded {
            Ok(result) => result.map_err(|e| ProbeFailure {
                kind: failure_kind(&e),
                message: e.to_string(),
            }),
            Err(crashed) => Err(ProbeFailure {
                kind: ProbeFailureKind::Transient,
                message: format!("the probe {crashed}"),
            }),
        };
        // whole milliseconds: what both job stores keep, so every replica that reads this
        // probe back shows the very same time
        let now = Utc::now().trunc_subsecs(3);
        let probed = self.clock.now();
        match result {
            Ok(mut probe) => {
                self.update_state(&spec.name, |s| {
                    let seen = match &s.probe {
                        _ if probe.damage_check_pending || probe.history_pending => {
                            Seen::CheckPending
                        }
                        Some(previous) if previous.version == probe.version => Seen::Unchanged,
                        _ => Seen::Moved,
                    };
                    // while the first history read runs, the last complete probe's history
                    // (this replica's, or the one another replica stored) stands
                    if let Some(known) = &s.probe {
                        probe.fill_history_from(known);
                    }
                    s.cadence = s.cadence.after_probe(seen, probed, self.intervals);
                    s.probe = Some(Arc::new(probe.clone()));
                    s.probe_error = None;
                    s.probe_error_kind = None;
                    s.probed_at = Some(now);
                });
                Ok(probe)
            }
            Err(failure) => {
                tracing::warn!(table = %spec.name, kind = failure.kind.as_str(), error = %failure.message, "table probe failed");
                self.update_state(&spec.name, |s| {
                    s.cadence = s.cadence.after_probe(Seen::Moved, probed, self.intervals);
                    s.probe_error = Some(failure.message.clone());
                    s.probe_error_kind = Some(failure.kind);
                    s.probed_at = Some(now);
                });
                Err(failure)
            }
        }
    }

    /// Records the live replicas the job store just confirmed; says whether the set changed.
    pub(crate) fn set_peers(&self, me: &str, live: Vec<String>) -> bool {
        let mut peers = self.peers.write().unwrap_or_else(|e| e.into_inner());
        peers.confirm(me, live, self.clock.now() + REPLICA_TTL)
    }

    /// Takes in the probes other replicas stored (`sharing::apply_shared`); returns how many
    /// were applied.
    pub(crate) fn apply_shared(&self, rows: &[ProbeRow], now: DateTime<Utc>) -> usize {
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        sharing::apply_shared(&mut tables, rows, now, self.clock.now(), self.intervals)
    }

    /// The tables this replica probes whose next probe is due (every table before its
    /// first probe): the inventory and their positions in it, in inventory order. Nothing
    /// is copied (the first round of a large fleet has every table due).
    pub(crate) fn due_for_probe(&self) -> (Arc<Inventory>, Vec<usize>) {
        let now = self.clock.now();
        let inventory = self.inventory();
        let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
        let peers = self.peers.read().unwrap_or_else(|e| e.into_inner());
        let due = inventory
            .tables
            .iter()
            .enumerate()
            .filter(|(_, spec)| tables.get(&spec.name).is_none_or(|s| s.cadence.due(now)))
            .filter(|(_, spec)| peers.probes_here(&spec.name, now))
            .map(|(i, _)| i)
            .collect();
        drop((tables, peers));
        (inventory, due)
    }

    /// The next probe reads everything again, even if the version did not move (after
    /// maintenance that changes the log without a new version, such as a checkpoint).
    pub(crate) async fn expire_cached_reads(&self, spec: &TableSpec) {
        self.prober.expire_cached_reads(&spec.path).await;
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
        let inventory = self.indexed();
        let spec = inventory.table(name)?;
        let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
        let mode = inventory.inventory.budget.as_ref().map(|b| b.mode);
        Some(with_api_pause(spec, tables.get(name), |spec, state| {
            let mut view = view::build_view(spec, state, now);
            self.budget.overlay(spec, mode, &mut view);
            view
        }))
    }

    /// Every table's view, in inventory order: one pass under one read lock, nothing
    /// cloned but what the views keep (the API list and `plan` call it).
    pub(crate) fn views(&self, now: DateTime<Utc>) -> Vec<TableView> {
        let inventory = self.inventory();
        let mode = inventory.budget.as_ref().map(|b| b.mode);
        let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
        inventory
            .tables
            .iter()
            .map(|spec| {
                with_api_pause(spec, tables.get(&spec.name), |spec, state| {
                    let mut view = view::build_view(spec, state, now);
                    self.budget.overlay(spec, mode, &mut view);
                    view
                })
            })
            .collect()
    }

    /// Every table's rank, in the order of the inventory returned with them (the dashboard's
    /// front page sorts, filters and counts on them, then builds views for one page only).
    pub(crate) fn ranks(&self, now: DateTime<Utc>) -> (Arc<Inventory>, Vec<Rank>) {
        let inventory = self.inventory();
        let tables = self.tables.read().unwrap_or_else(|e| e.into_inner());
        let ranks = inventory
            .tables
            .iter()
            .map(|spec| {
                with_api_pause(spec, tables.get(&spec.name), |spec, state| {
                    view::rank(spec, state, now)
                })
            })
            .collect();
        drop(tables);
        (inventory, ranks)
    }
}

/// Runs `f` on the table's inventory entry with an API pause applied, and its state.
fn with_api_pause<T>(
    spec: &TableSpec,
    state: Option<&TableState>,
    f: impl FnOnce(&TableSpec, &TableState) -> T,
) -> T {
    let empty = TableState::default();
    let state = state.unwrap_or(&empty);
    match state.paused_by_api {
        Some(paused) if paused != spec.paused => {
            let spec = TableSpec {
                paused,
                ..spec.clone()
            };
            f(&spec, state)
        }
        _ => f(spec, state),
    }
}
