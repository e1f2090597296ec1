//! Cron schedules: one tokio-cron-scheduler job per enabled (table, operation), read in
//! the table's timezone. A tick probes the table's log, asks the planner whether the
//! operation is needed, and enqueues a job when it is; every tick logs its decision.
//!
//! Every replica runs the same schedules. That is deliberate: the job table keeps one
//! queued job per (table, operation), so ticks from all replicas coalesce into one job
//! and no leader election is needed. Reloads diff the schedule set: unchanged entries
//! keep their scheduler job, changed ones are replaced, removed ones are dropped.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::Utc;
use tablekeeper_inventory::{Inventory, Operation, TableSpec};
use tablekeeper_store::{JobId, NewJob, Trigger};
use tablekeeper_vocab::ProbeFailureKind;
use tokio_cron_scheduler::{Job, JobScheduler};
use tracing::{info, warn};
use uuid::Uuid;

use crate::planner::{self, Decision, Need, Probed};
use crate::runtime::Runtime;

/// Identity of one schedule entry: changing any part replaces the scheduler job.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct EntryKey {
    table: String,
    operation: Operation,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct EntrySpec {
    expression: String,
    timezone: chrono_tz::Tz,
}

/// The cron scheduler and the entries it currently runs.
pub struct Scheduler {
    inner: JobScheduler,
    entries: BTreeMap<EntryKey, (EntrySpec, Uuid)>,
    rt: Arc<Runtime>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("entries", &self.entries.len())
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("scheduler: {0}")]
pub struct SchedulerError(String);

impl Scheduler {
    pub async fn start(rt: Arc<Runtime>) -> Result<Self, SchedulerError> {
        let inner = JobScheduler::new()
            .await
            .map_err(|e| SchedulerError(e.to_string()))?;
        inner
            .start()
            .await
            .map_err(|e| SchedulerError(e.to_string()))?;
        Ok(Self {
            inner,
            entries: BTreeMap::new(),
            rt,
        })
    }

    /// Makes the running schedules match `inventory`. Returns (added, removed) counts.
    pub async fn sync(&mut self, inventory: &Inventory) -> (usize, usize) {
        let mut wanted: BTreeMap<EntryKey, EntrySpec> = BTreeMap::new();
        for spec in &inventory.tables {
            for op in Operation::SCHEDULED {
                if spec.operation_enabled(op) {
                    wanted.insert(
                        EntryKey {
                            table: spec.name.clone(),
                            operation: op,
                        },
                        EntrySpec {
                            expression: spec
                                .schedule(op)
                                .map(|s| s.scheduler_expression())
                                .unwrap_or_default(),
                            timezone: spec.timezone,
                        },
                    );
                }
            }
        }
        let mut removed = 0;
        let stale: Vec<EntryKey> = self
            .entries
            .iter()
            .filter(|(k, (s, _))| wanted.get(*k) != Some(s))
            .map(|(k, _)| k.clone())
            .collect();
        for key in stale {
            if let Some((_, id)) = self.entries.remove(&key) {
                if let Err(e) = self.inner.remove(&id).await {
                    warn!(table = %key.table, operation = %key.operation, error = %e, "could not remove schedule");
                }
                removed += 1;
            }
        }
        let mut added = 0;
        for (key, spec) in wanted {
            if self.entries.contains_key(&key) {
                continue;
            }
            match self.add(&key, &spec).await {
                Ok(id) => {
                    self.entries.insert(key, (spec, id));
                    added += 1;
                }
                Err(e) => {
                    warn!(table = %key.table, operation = %key.operation, schedule = %spec.expression, error = %e, "could not schedule")
                }
            }
        }
        (added, removed)
    }

    async fn add(&self, key: &EntryKey, spec: &EntrySpec) -> Result<Uuid, SchedulerError> {
        let rt = Arc::clone(&self.rt);
        let table = key.table.clone();
        let op = key.operation;
        let job = Job::new_async_tz(
            spec.expression.as_str(),
            spec.timezone,
            move |_id, _sched| {
                let rt = Arc::clone(&rt);
                let table = table.clone();
                Box::pin(async move {
                    // tracked, so shutdown waits for a tick's probe instead of cutting it off
                    let tracked = rt.tasks.track_future(tick(&rt, &table, op));
                    tracked.await;
                })
            },
        )
        .map_err(|e| SchedulerError(format!("bad schedule `{}`: {e}", spec.expression)))?;
        self.inner
            .add(job)
            .await
            .map_err(|e| SchedulerError(e.to_string()))
    }

    pub async fn shutdown(mut self) {
        if let Err(e) = self.inner.shutdown().await {
            warn!(error = %e, "scheduler shutdown");
        }
    }
}

/// One schedule tick: probe, decide, enqueue when needed. Never panics, never blocks
/// other tables: every failure is logged and counted.
pub async fn tick(rt: &Runtime, table: &str, op: Operation) {
    if rt.stopping() {
        return;
    }
    let Some(spec) = rt.fleet.spec(table) else {
        return; // removed by a reload since the tick was scheduled
    };
    let fired = Utc::now();
    // Every replica fires the same tick: they all name it by its scheduled time, and the job
    // table keeps one job per tick.
    let tick = spec
        .schedule(op)
        .and_then(|s| s.tick_at_or_before(fired.with_timezone(&spec.timezone)))
        .map(|t| t.with_timezone(&Utc));
    let probe = crate::recorder::probe(rt, &spec).await;
    let last_success = rt.fleet.last_success(table, op);
    let probed = match &probe {
        Ok(p) => Probed::Read(p),
        Err(f) if f.kind == ProbeFailureKind::Transient => Probed::Unreachable(&f.message),
        Err(f) => Probed::Unreadable(&f.message),
    };
    let decision = planner::admit(&spec, op, probed, Need::Check { last_success }, Utc::now());
    match &decision {
        Decision::Run(reason) => match enqueue(rt, &spec, op, Trigger::Schedule, tick).await {
            Ok((job_id, created)) => {
                info!(table = %table, operation = %op, job_id = job_id.0, created, reason = %reason, "scheduled tick: maintenance needed")
            }
            Err(e) => {
                warn!(table = %table, operation = %op, error = %e, "scheduled tick: could not enqueue")
            }
        },
        Decision::Skip(reason) => {
            info!(table = %table, operation = %op, reason = %reason, "scheduled tick: nothing to do")
        }
        Decision::Refuse(reason) => {
            warn!(table = %table, operation = %op, reason = %reason, "scheduled tick: refused")
        }
    }
}

/// Enqueues (or joins) the job for (table, operation); `tick` is the cron tick a scheduled
/// job is for. Returns the job id and whether a new row was created.
pub async fn enqueue(
    rt: &Runtime,
    spec: &TableSpec,
    op: Operation,
    trigger: Trigger,
    tick: Option<chrono::DateTime<Utc>>,
) -> Result<(JobId, bool), tablekeeper_store::StoreError> {
    let enqueued = rt
        .store
        .enqueue(NewJob {
            table_name: spec.name.clone(),
            operation: op,
            concurrency_key: spec.concurrency_key.clone(),
            trigger,
            priority: match (op, trigger) {
                // a repair first: the table shows rows its writer removed until it runs
                (Operation::Repair, _) => 20,
                (_, Trigger::Manual) => 10,
                (_, Trigger::Schedule) => 0,
            },
            run_at: planner::not_before(spec, op, Utc::now()),
            max_attempts: spec.max_attempts as i32,
            scheduled_for: tick,
        })
        .await?;
    Ok((enqueued.job.id, enqueued.created))
}
