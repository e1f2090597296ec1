//! The one way a job enters the job table: a schedule tick, an API trigger, a stale write
//! waiting for its repair and an erasure deadline all enqueue here, so every job of one
//! (table, operation) gets the same priority and not-before time whoever asked for it. The
//! caller has already asked the planner whether the job may run; this module only writes it.

use chrono::{DateTime, Utc};
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_store::{JobId, NewJob, Trigger};

use crate::policy::planner;
use crate::shared::Shared;

/// Enqueues (or joins) the job for (table, operation); `tick` is the cron tick a scheduled
/// job is for. Returns the job id and whether a new row was created.
pub(crate) async fn enqueue(
    rt: &Shared,
    spec: &TableSpec,
    op: Operation,
    trigger: Trigger,
    tick: Option<DateTime<Utc>>,
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
    // the estimate a budget round ranks the job by, from the table's latest probe (a tick
    // joining the queued job refreshes it, as the table grew meanwhile)
    if enqueued.job.state == tablekeeper_store::JobState::Queued {
        let probe = rt
            .fleet
            .with_state(&spec.name, |s| s.probe.clone())
            .flatten();
        let now = Utc::now();
        if let Some(estimate) = crate::jobs::budget::estimate_job(
            spec,
            op,
            probe.as_deref(),
            &rt.fleet.budget.rates(),
            now,
        ) {
            match serde_json::to_value(&estimate) {
                Ok(json) => {
                    if let Err(e) = rt.store.set_estimate(enqueued.job.id, json).await {
                        tracing::warn!(table = %spec.name, operation = %op, error = %e, "cannot record the job's estimate");
                    }
                }
                Err(e) => {
                    tracing::warn!(table = %spec.name, operation = %op, error = %e, "cannot encode the job's estimate")
                }
            }
        }
    }
    Ok((enqueued.job.id, enqueued.created))
}
