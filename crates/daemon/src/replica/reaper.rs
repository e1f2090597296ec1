//! The reaper: takes over jobs (and tasks) whose lease expired, the jobs of a crashed
//! replica. Every replica runs it; the store makes concurrent reaps safe. It survives any
//! single failure: it logs with fields and goes on.

use std::sync::Arc;

use tracing::{info, warn};

use tablekeeper_store::AttemptOutcome;

use crate::shared::Shared;

/// Runs the reaper every reap grace (a quarter lease by default) until the replica stops, so a
/// crashed replica's job is taken over within one grace of becoming reapable. Every replica
/// runs it; the store makes concurrent reaps safe.
pub(crate) async fn reaper(rt: Arc<Shared>) {
    let lease = rt.config.lease;
    let grace = tablekeeper_store::default_reap_grace(lease);
    let mut interval = tokio::time::interval(grace);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = rt.shutdown.cancelled() => return,
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
