//! Background loops of a replica besides the workers: the reaper that takes over jobs
//! whose lease expired (a crashed replica), the refresher that keeps table health,
//! staleness and job-count gauges current between schedule ticks, and the loop that shares
//! probes with the other replicas (`fleet::sharing`).
//!
//! Both loops survive any single failure: they log with fields, count, and go on.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use tablekeeper_store::AttemptOutcome;

use crate::fleet::Fleet;
use crate::runtime::Runtime;

/// Runs the reaper every reap grace (a quarter lease by default) until `stop` fires, so a
/// crashed replica's job is taken over within one grace of becoming reapable. Every replica
/// runs it; the store makes concurrent reaps safe.
pub async fn reaper(rt: Arc<Runtime>, stop: CancellationToken) {
    let lease = rt.config.lease;
    let grace = tablekeeper_store::default_reap_grace(lease);
    let mut interval = tokio::time::interval(grace);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = interval.tick() => {}
        }
        match rt.store.reap_expired(grace).await {
            Ok(reaped) => {
                for job in reaped {
                    info!(job_id = job.job_id.0, table = %job.table_name, operation = %job.operation, previous_worker = %job.worker_id, attempt = job.attempt, requeued = job.requeued, "reaper: lease expired, job taken over");
                    // Label values come from the inventory only: a hand-inserted job for
                    // an unknown table is logged but not counted.
                    if rt.fleet.spec(&job.table_name).is_some() {
                        rt.metrics.count_attempt(
                            &job.table_name,
                            job.operation,
                            AttemptOutcome::LostLease,
                        );
                    }
                }
            }
            Err(e) => warn!(error = %e, "reaper: cannot reach the job store"),
        }
        // tasks are reaped by the same rule: a worker that stopped renewing a task's lease
        // has abandoned it by now, so any replica may run it again
        if let Err(e) = rt.store.reap_tasks(grace).await {
            warn!(error = %e, "reaper: cannot reap tasks");
        }
    }
}

/// How often a replica beats in the job store and reads the probes the others stored:
/// well inside [`crate::fleet::REPLICA_TTL`], so one late beat does not hand its tables over.
const SHARE_EVERY: Duration = Duration::from_secs(5);

/// How far back each pass reads again, to catch a probe a slow transaction stored with an
/// earlier time than the newest already read (applying one twice changes nothing). Counted
/// back from the previous pass, not from the newest row: an idle fleet re-reads nothing.
const SHARE_OVERLAP: chrono::TimeDelta = chrono::TimeDelta::seconds(30);

/// Probes read from the store per query: a replica joining a fleet of thousands of tables
/// takes the others' probes in pages of this many (measured: one result set of ~6,700 probe
/// rows was 86 MB of a replica's peak heap).
const SHARE_PAGE: u32 = 500;

/// One replica's side of probe sharing (`fleet::sharing`): beats in the job store (the
/// live replicas split the tables between them) and takes in the probes other replicas
/// stored since its last pass. The first pass reads them all, its own included (those it
/// stored before a restart under the same `replica_id`), so a replica that starts shows every
/// table's figures and history at once, as they were, and probes only its own share when due.
#[derive(Debug, Default)]
pub struct Sharing {
    /// The newest update read so far.
    read_to: Option<chrono::DateTime<Utc>>,
    /// When the previous pass read (this replica's clock).
    last_pass: Option<chrono::DateTime<Utc>>,
    /// Whether a pass has read every stored probe to the end, this replica's own included;
    /// later passes read only the others'.
    caught_up: bool,
}

impl Sharing {
    /// Beats (unless the replica is a worker, which probes nothing and so takes no share of
    /// the tables) and reads the probes the others stored since the last pass.
    pub async fn pass(&mut self, rt: &Runtime) {
        if rt.config.role == crate::config::Role::All {
            self.beat(rt).await;
        }
        self.read(rt).await;
    }

    async fn beat(&self, rt: &Runtime) {
        let me = rt.config.replica_id.as_str();
        match rt.store.beat_replica(me, crate::fleet::REPLICA_TTL).await {
            Ok(live) => {
                let count = live.len();
                if rt.fleet.set_peers(me, live.clone()) {
                    info!(replicas = ?live, count, "replicas sharing the probes");
                }
            }
            Err(e) => {
                warn!(error = %e, "cannot beat in the job store; probing every table here until it answers")
            }
        }
    }

    async fn read(&mut self, rt: &Runtime) {
        let me = rt.config.replica_id.as_str();
        let after = match (self.read_to, self.last_pass) {
            (Some(read_to), Some(last_pass)) => Some(read_to.min(last_pass - SHARE_OVERLAP)),
            (read_to, _) => read_to,
        };
        self.last_pass = Some(Utc::now());
        let leave_out = self.caught_up.then_some(me);
        let mut page_after: Option<String> = None;
        let mut cursor = after;
        let mut applied = 0;
        loop {
            let rows = match rt
                .store
                .probes_since(cursor, page_after.as_deref(), leave_out, SHARE_PAGE)
                .await
            {
                Ok(rows) => rows,
                Err(e) => {
                    warn!(error = %e, "cannot read the probes other replicas stored");
                    break;
                }
            };
            let Some(last) = rows.last() else {
                self.caught_up = true;
                break;
            };
            self.read_to = Some(
                self.read_to
                    .map_or(last.updated_at, |t| t.max(last.updated_at)),
            );
            cursor = Some(last.updated_at);
            page_after = Some(last.table_name.clone());
            let full = rows.len() == SHARE_PAGE as usize;
            applied += rt.fleet.apply_shared(&rows, Utc::now());
            if !full {
                self.caught_up = true;
                break;
            }
        }
        if applied > 0 {
            crate::publish::all(&rt.metrics, &rt.fleet, Utc::now());
        }
    }
}

/// Runs a [`Sharing`] pass every [`SHARE_EVERY`] (every `probe_interval` if that is
/// shorter) until `stop` fires. Its own loop, so a long probe round never delays a beat.
pub async fn share_probes(rt: Arc<Runtime>, stop: CancellationToken, mut sharing: Sharing) {
    let every = SHARE_EVERY.min(rt.config.probe_interval.max(Duration::from_millis(100)));
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = interval.tick() => {}
        }
        sharing.pass(&rt).await;
    }
}

/// Probes the tables that are due (every `probe_interval` while their log moves, less and
/// less often up to `max_probe_interval` while it does not: `fleet::cadence`), and refreshes
/// the fleet gauges every few seconds (staleness grows with time, not with probes).
pub async fn refresher(rt: Arc<Runtime>, stop: CancellationToken) {
    // Staleness and job counts are cheap; refresh them often enough that a scrape every
    // 15 s (Prometheus's common interval) sees current values.
    let gauges_every = Duration::from_secs(5).min(rt.config.probe_interval);
    loop {
        probe_due(&rt).await;
        refresh_store_gauges(&rt).await;
        crate::publish::all(&rt.metrics, &rt.fleet, Utc::now());
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(gauges_every) => {}
        }
    }
}

/// Tables probed at once. Probes wait on storage round trips (object stores: tens of
/// milliseconds each), so one at a time would take minutes per round for a large fleet;
/// a small bound keeps a fleet of thousands from opening thousands of connections at once.
const PROBE_CONCURRENCY: usize = 8;

/// Probes every table whose probe is due, [`PROBE_CONCURRENCY`] at a time, and records what
/// the probes read ([`crate::recorder`]).
pub async fn probe_due(rt: &Runtime) {
    let (inventory, due) = rt.fleet.due_for_probe();
    futures::stream::iter(due.iter().filter_map(|&i| inventory.tables.get(i)))
        .for_each_concurrent(PROBE_CONCURRENCY, |spec| async move {
            // a round in progress at shutdown finishes the probes it started, no more
            if !rt.stopping() {
                let _ = crate::recorder::probe(rt, spec).await;
            }
        })
        .await;
}

/// Probes every table, [`PROBE_CONCURRENCY`] at a time, without recording anything (for
/// commands that run without a job store).
pub async fn probe_all_fleet(fleet: &Fleet) {
    let inventory = fleet.inventory();
    futures::stream::iter(&inventory.tables)
        .for_each_concurrent(PROBE_CONCURRENCY, |spec| async move {
            let _ = fleet.probe(spec).await;
        })
        .await;
}

/// Failed attempts since the last success, per (table, operation), from the job table: every
/// replica sees the same streak whichever replica ran the attempts, a success anywhere ends
/// it, and a restart neither clears nor repeats it.
pub async fn refresh_failure_streaks(rt: &Runtime) {
    let streaks = match rt.store.failure_streaks().await {
        Ok(streaks) => streaks,
        Err(e) => {
            warn!(error = %e, "cannot read failure streaks");
            return;
        }
    };
    let mut by_table: std::collections::BTreeMap<String, Vec<tablekeeper_store::FailureStreak>> =
        Default::default();
    for streak in streaks {
        by_table
            .entry(streak.table_name.clone())
            .or_default()
            .push(streak);
    }
    for spec in &rt.fleet.inventory().tables {
        let streaks = by_table.remove(&spec.name).unwrap_or_default();
        rt.fleet.update_state(&spec.name, |s| {
            s.consecutive_failures.clear();
            s.last_failure.clear();
            for streak in streaks {
                let op = streak.operation;
                s.consecutive_failures.insert(op, streak.failures);
                s.last_failure.insert(
                    op,
                    (streak.last_failed_at, streak.last_error.unwrap_or_default()),
                );
            }
        });
    }
}

/// A `role: worker` replica's refresher: only the fleet-wide job and task counts, so every
/// replica exports the same `tablekeeper_jobs` and `tablekeeper_tasks` (a worker probes and
/// publishes no table).
pub async fn count_refresher(rt: Arc<Runtime>, stop: CancellationToken) {
    loop {
        refresh_counts(&rt).await;
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

/// Jobs and tasks per state, fleet-wide from the job table.
async fn refresh_counts(rt: &Runtime) {
    match rt.store.counts_by_state().await {
        Ok(counts) => rt.metrics.set_job_counts(&counts),
        Err(e) => warn!(error = %e, "cannot read job counts"),
    }
    match rt.store.task_counts().await {
        Ok(counts) => rt.metrics.set_task_counts(&counts),
        Err(e) => warn!(error = %e, "cannot read task counts"),
    }
}

async fn refresh_store_gauges(rt: &Runtime) {
    refresh_counts(rt).await;
    refresh_failure_streaks(rt).await;
    match rt.store.last_success().await {
        Ok(rows) => rt.fleet.set_store_successes(
            rows.into_iter()
                .map(|r| (r.table_name, r.operation, r.finished_at)),
        ),
        Err(e) => warn!(error = %e, "cannot read last successes"),
    }
    // Stale writes any replica recorded: the counter follows the store's count, so every
    // replica exports the same value and a restart neither loses nor repeats one.
    match rt.store.stale_writes(None).await {
        Ok(rows) => {
            let mut by_table: std::collections::BTreeMap<
                String,
                Vec<tablekeeper_store::StaleWriteRow>,
            > = Default::default();
            for row in rows {
                by_table
                    .entry(row.table_name.clone())
                    .or_default()
                    .push(row);
            }
            for spec in &rt.fleet.inventory().tables {
                let rows = by_table.remove(&spec.name).unwrap_or_default();
                let last_detected = rows.iter().filter_map(|r| r.detected_at).max();
                rt.metrics
                    .set_stale_writes(&spec.name, rows.len() as u64, last_detected);
                rt.fleet.update_state(&spec.name, |s| s.stale_writes = rows);
            }
        }
        Err(e) => warn!(error = %e, "cannot read stale writes"),
    }
    // Rewrites by other engines, from the history every replica records: the same count on
    // every replica, the alert's time only where tablekeeper owns the table's rewrites.
    match rt.store.foreign_rewrites().await {
        Ok(rows) => {
            let mut by_table: std::collections::BTreeMap<String, _> = rows
                .into_iter()
                .map(|r| (r.table_name.clone(), r))
                .collect();
            for spec in &rt.fleet.inventory().tables {
                let row = by_table.remove(&spec.name);
                if let Some(r) = &row {
                    let owned =
                        spec.writers.rewrites == tablekeeper_inventory::RewriteOwner::Tablekeeper;
                    rt.metrics.set_foreign_rewrites(
                        &spec.name,
                        u64::try_from(r.rewrites).unwrap_or(0),
                        Some(r.last_timestamp),
                        owned,
                    );
                }
                rt.fleet
                    .update_state(&spec.name, |s| s.foreign_rewrites = row);
            }
        }
        Err(e) => warn!(error = %e, "cannot read other engines' rewrites"),
    }
    // Pins added through the API on any replica: the restore drill checks them.
    match rt.store.pins(None).await {
        Ok(pins) => {
            let mut by_table: std::collections::BTreeMap<String, Vec<tablekeeper_store::TablePin>> =
                Default::default();
            for pin in pins {
                by_table
                    .entry(pin.table_name.clone())
                    .or_default()
                    .push(pin);
            }
            for spec in &rt.fleet.inventory().tables {
                let pins = by_table.remove(&spec.name).unwrap_or_default();
                rt.fleet
                    .update_state(&spec.name, |s| s.api_pins = Some(pins));
            }
        }
        Err(e) => warn!(error = %e, "cannot read pins"),
    }
    // Pauses set through the API on any replica.
    match rt.store.paused_overrides().await {
        Ok(overrides) => {
            for spec in &rt.fleet.inventory().tables {
                let value = overrides.get(&spec.name).copied();
                rt.fleet
                    .update_state(&spec.name, |s| s.paused_by_api = value);
            }
        }
        Err(e) => warn!(error = %e, "cannot read pause overrides"),
    }
}
