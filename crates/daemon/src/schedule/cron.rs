//! Cron schedules: one tokio-cron-scheduler job per distinct (cron expression, timezone),
//! firing the ticks of every enabled (table, operation) on that schedule. A tick probes the
//! table's log, asks the planner whether the operation is needed, and enqueues a job when it
//! is; every tick logs its decision. An inventory where thousands of tables share the
//! default schedules holds a handful of scheduler jobs, not one per table and operation, and
//! their ticks run [`TICK_CONCURRENCY`] at a time instead of all at once.
//!
//! Every replica runs the same schedules. That is deliberate: the job table keeps one
//! queued job per (table, operation), so ticks from all replicas coalesce into one job
//! and no leader election is needed. Reloads diff the schedule set: a schedule still in use
//! keeps its scheduler job (its members are swapped in place), new ones are added, unused
//! ones dropped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};

use chrono::Utc;
use futures::StreamExt;
use tablekeeper_inventory::{Inventory, Operation};
use tokio_cron_scheduler::{Job, JobScheduler};
use tracing::warn;
use uuid::Uuid;

use crate::shared::Shared;

/// Ticks of one schedule run at once (each probes its table first).
const TICK_CONCURRENCY: usize = 8;

/// One distinct schedule: changing either part is another schedule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ScheduleKey {
    expression: String,
    timezone: String,
}

/// The (table, operation) pairs a schedule fires, shared with its scheduler job.
type Members = Arc<RwLock<Vec<(String, Operation)>>>;

/// The cron scheduler and the schedules it currently runs.
pub struct Scheduler {
    inner: JobScheduler,
    schedules: BTreeMap<ScheduleKey, (Uuid, Members)>,
    rt: Arc<Shared>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("schedules", &self.schedules.len())
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("scheduler: {0}")]
pub struct SchedulerError(String);

impl Scheduler {
    pub async fn start(rt: Arc<Shared>) -> Result<Self, SchedulerError> {
        let inner = JobScheduler::new()
            .await
            .map_err(|e| SchedulerError(e.to_string()))?;
        inner
            .start()
            .await
            .map_err(|e| SchedulerError(e.to_string()))?;
        Ok(Self {
            inner,
            schedules: BTreeMap::new(),
            rt,
        })
    }

    /// Makes the running schedules match `inventory`. Returns the (table, operation) pairs
    /// now scheduled and the distinct schedules removed.
    pub async fn sync(&mut self, inventory: &Inventory) -> (usize, usize) {
        let mut wanted: BTreeMap<ScheduleKey, (chrono_tz::Tz, BTreeSet<(String, Operation)>)> =
            BTreeMap::new();
        for spec in &inventory.tables {
            for op in Operation::SCHEDULED {
                let Some(schedule) = spec.schedule(op).filter(|_| spec.operation_enabled(op))
                else {
                    continue;
                };
                let key = ScheduleKey {
                    expression: schedule.scheduler_expression(),
                    timezone: spec.timezone.name().to_owned(),
                };
                wanted
                    .entry(key)
                    .or_insert_with(|| (spec.timezone, BTreeSet::new()))
                    .1
                    .insert((spec.name.clone(), op));
            }
        }
        let scheduled = wanted.values().map(|(_, members)| members.len()).sum();
        let unused: Vec<ScheduleKey> = self
            .schedules
            .keys()
            .filter(|k| !wanted.contains_key(*k))
            .cloned()
            .collect();
        let removed = unused.len();
        for key in unused {
            if let Some((id, _)) = self.schedules.remove(&key) {
                if let Err(e) = self.inner.remove(&id).await {
                    warn!(schedule = %key.expression, timezone = %key.timezone, error = %e, "could not remove schedule");
                }
            }
        }
        for (key, (timezone, members)) in wanted {
            let members: Vec<(String, Operation)> = members.into_iter().collect();
            if let Some((_, current)) = self.schedules.get(&key) {
                *current.write().unwrap_or_else(|e| e.into_inner()) = members;
                continue;
            }
            let shared: Members = Arc::new(RwLock::new(members));
            match self.add(&key, timezone, Arc::clone(&shared)).await {
                Ok(id) => {
                    self.schedules.insert(key, (id, shared));
                }
                Err(e) => {
                    let tables = shared.read().map(|m| m.len()).unwrap_or(0);
                    warn!(schedule = %key.expression, timezone = %key.timezone, tables, error = %e, "could not schedule")
                }
            }
        }
        (scheduled, removed)
    }

    async fn add(
        &self,
        key: &ScheduleKey,
        timezone: chrono_tz::Tz,
        members: Members,
    ) -> Result<Uuid, SchedulerError> {
        let rt = Arc::clone(&self.rt);
        let job = Job::new_async_tz(key.expression.as_str(), timezone, move |_id, _sched| {
            let rt = Arc::clone(&rt);
            let members = members.read().map(|m| m.clone()).unwrap_or_default();
            Box::pin(async move {
                let fired = Utc::now();
                // tracked, so shutdown waits for a tick's probes instead of cutting them off
                let ticks = futures::stream::iter(members).for_each_concurrent(
                    TICK_CONCURRENCY,
                    |(table, op)| {
                        let rt = &rt;
                        async move { crate::schedule::tick::tick(rt, &table, op, fired).await }
                    },
                );
                rt.tasks.track_future(ticks).await;
            })
        })
        .map_err(|e| SchedulerError(format!("bad schedule `{}`: {e}", key.expression)))?;
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
