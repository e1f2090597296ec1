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
    Ok((enqueued.job.id, enqueued.created))
}
