//! The worker pool: each worker runs a queued task of a running job when there is one
//! (`tasks.rs`), else claims a job, runs it through the executor on the Delta runtime
//! (`delta_runtime.rs`) under the lease watch (`lease_watch.rs`), or, for a rewrite planned
//! as tasks, sees its tasks through (`tasks.rs`), and records how the attempt ended
//! (`attempt.rs`). A worker never holds a database transaction while an operation runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tablekeeper_inventory::TableSpec;
use tablekeeper_store::{AttemptOutcome, ClaimedJob, FailureKind, LeaseClock};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn, Instrument};

use crate::attempt;
use crate::delta_runtime;
use crate::executor::{self, ExecError};
use crate::lease_watch;
use crate::runtime::Runtime;
use crate::tasks;

/// Runs `count` workers until `stop_claiming` fires; each finishes or releases its job
/// according to `hard_stop`. Returns when every worker has exited.
pub(crate) async fn run_pool(
    rt: Arc<Runtime>,
    count: usize,
    stop_claiming: CancellationToken,
    hard_stop: CancellationToken,
) {
    let mut handles = Vec::with_capacity(count);
    for n in 0..count {
        let worker_id = format!("{}/{}", rt.config.replica_id, n);
        let rt = Arc::clone(&rt);
        let stop = stop_claiming.clone();
        let hard = hard_stop.clone();
        handles.push(tokio::spawn(async move {
            worker_loop(rt, worker_id, stop, hard).await;
        }));
    }
    for h in handles {
        if let Err(e) = h.await {
            error!(error = %e, "worker task panicked");
        }
    }
}

async fn worker_loop(
    rt: Arc<Runtime>,
    worker_id: String,
    stop: CancellationToken,
    hard_stop: CancellationToken,
) {
    let mut store_errors: u32 = 0;
    while !stop.is_cancelled() {
        // A running job's tasks first: they finish work that already holds a table's key.
        match tasks::run_any(&rt, &worker_id, &hard_stop).await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => warn!(worker = %worker_id, error = %e, "cannot claim tasks"),
        }
        // The claim is the lease's first renewal: the abandon deadline counts from when it
        // was sent, however long the claim call (or anything after it) takes to return.
        let claim_sent = tokio::time::Instant::now().into_std();
        let outcome = rt.store.claim(&worker_id, rt.config.lease).await;
        let idle = match outcome {
            Ok(outcome) => {
                store_errors = 0;
                for wait in &outcome.key_waits {
                    rt.metrics.count_key_wait(&wait.table_name, wait.operation);
                }
                match outcome.job {
                    Some(claimed) => {
                        run_claimed(&rt, &worker_id, claimed, claim_sent, &hard_stop).await;
                        Duration::ZERO
                    }
                    None => rt.config.poll_interval,
                }
            }
            Err(e) => {
                store_errors = store_errors.saturating_add(1);
                // Back off while the store is unreachable: 1s, 2s, 4s ... capped at 30s.
                let wait =
                    Duration::from_secs(1 << store_errors.min(5)).min(Duration::from_secs(30));
                warn!(worker = %worker_id, error = %e, retry_in = ?wait, "cannot claim jobs");
                wait
            }
        };
        if !idle.is_zero() {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(idle) => {}
            }
        }
    }
}

async fn run_claimed(
    rt: &Arc<Runtime>,
    worker_id: &str,
    claimed: ClaimedJob,
    claim_sent: Instant,
    hard_stop: &CancellationToken,
) {
    let job = &claimed.job;
    let op = job.operation;
    let span = tracing::info_span!("job", job_id = job.id.0, table = %job.table_name, operation = %op, attempt = job.attempt);
    async {
        let Some(spec) = rt.fleet.spec(&job.table_name) else {
            let message = format!(
                "table `{}` is not in the inventory: nothing to run (it was removed after the job was queued)",
                job.table_name
            );
            attempt::fail(rt, &claimed, FailureKind::Permanent, &message).await;
            return;
        };
        info!(worker = %worker_id, "job started");
        let started = Instant::now();
        let ctx = match attempt::inputs(rt, &spec, op, job.trigger).await {
            Ok(ctx) => ctx,
            Err(message) => {
                attempt::fail(rt, &claimed, FailureKind::Failed, &message).await;
                return;
            }
        };
        let cancel = CancellationToken::new();
        let work = async {
            if op.rewrites() {
                if let Some(split) = as_tasks(rt, &claimed, &spec, &ctx, &cancel).await? {
                    split?;
                    return tasks::coordinate(rt, worker_id, &claimed, &spec, &ctx, hard_stop)
                        .await;
                }
            }
            // on the Delta runtime, so its computing never delays the lease renewals
            let operation = delta_runtime::spawn({
                let (spec, cancel, ctx) = (spec.clone(), cancel.clone(), ctx.clone());
                async move { executor::run(&spec, op, ctx, cancel).await }.in_current_span()
            });
            operation.await.map_err(ExecError::from).and_then(|report| report)
        };
        let end = lease_watch::watch(
            &rt.store,
            &claimed.lease,
            LeaseClock::new(claim_sent, rt.config.lease),
            work,
            hard_stop,
            spec.timeout,
        )
        .await;
        // anything the operation spawned observes this; the operation itself was aborted
        // when the watch dropped it
        cancel.cancel();
        let elapsed = started.elapsed();
        rt.metrics.observe_attempt_duration(op, elapsed);
        let outcome = attempt::record(rt, &claimed, &spec, op, &ctx, end, elapsed).await;
        rt.metrics.count_attempt(&spec.name, op, outcome);
        after_attempt(rt, &spec, outcome).await;
    }
    .instrument(span)
    .await;
}

/// Whether a rewrite job runs as tasks: `Some` when it does (its tasks stored now, or by an
/// earlier attempt whose replica stopped: then they are resumed, not planned again), `None`
/// when it runs whole here (a plan of one task). The inner error is a plan that refused every
/// partition.
async fn as_tasks(
    rt: &Runtime,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    ctx: &executor::RunContext,
    cancel: &CancellationToken,
) -> Result<Option<Result<(), ExecError>>, ExecError> {
    let op = claimed.job.operation;
    let stored = rt
        .store
        .tasks(claimed.job.id)
        .await
        .map_err(|e| tasks::store_error("reading the job's tasks", &e))?;
    if !stored.is_empty() {
        info!(
            tasks = stored.len(),
            "resuming the tasks an earlier attempt planned"
        );
        return Ok(Some(Ok(())));
    }
    let planning = delta_runtime::spawn({
        let (spec, ctx, cancel) = (spec.clone(), ctx.clone(), cancel.clone());
        async move { executor::plan_tasks(&spec, op, &ctx, cancel).await }.in_current_span()
    });
    let plan = planning.await.map_err(ExecError::from).and_then(|p| p)?;
    if !plan.splits() {
        return Ok(None);
    }
    if plan.tasks.is_empty() {
        return Ok(Some(Err(ExecError::Refused(plan.refused.join("; ")))));
    }
    tasks::add(rt, claimed, spec, &plan, &[]).await?;
    Ok(Some(Ok(())))
}

/// Refreshes what the attempt changed: the failure streak is the job table's, not this
/// replica's; after a success a re-probe shows the maintenance just done (a successful probe
/// refreshes every gauge of the table), otherwise the gauges are republished from what is
/// known.
async fn after_attempt(rt: &Runtime, spec: &TableSpec, outcome: AttemptOutcome) {
    crate::background::refresh_failure_streaks(rt).await;
    if outcome == AttemptOutcome::Succeeded {
        rt.fleet.expire_cached_reads(spec).await;
    }
    // a worker probes nothing: the replicas that plan see the result on their next probe
    let probed = outcome == AttemptOutcome::Succeeded
        && rt.config.role == crate::config::Role::All
        && crate::recorder::probe(rt, spec).await.is_ok();
    if !probed {
        crate::publish::table(&rt.metrics, &rt.fleet, spec, Utc::now());
    }
}
