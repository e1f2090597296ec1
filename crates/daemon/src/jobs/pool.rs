//! The worker pool: each worker runs a queued task of a running job when there is one
//! (`tasks.rs`), else claims a job, runs it through the executor on a runtime of its own that
//! measures what it costs (`crate::delta_runtime::run_metered`) under the lease watch
//! (`lease_watch.rs`), or, for a rewrite
//! planned as tasks, sees its tasks through (`split.rs`), records how the attempt ended
//! (`attempt.rs`) and tells the replica (`Shared::job_finished`). A worker never holds a
//! database transaction while an operation runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tablekeeper_delta::cost::Meter;
use tablekeeper_store::{ClaimedJob, FailureKind, LeaseClock};
use tablekeeper_vocab::{Cost, TableFigures};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn, Instrument};

use crate::delta_runtime;
use crate::jobs::attempt::Spent;
use crate::jobs::executor::{self, ExecError, Ran};
use crate::jobs::stops::Stops;
use crate::jobs::{attempt, inputs, lease_watch, split, tasks};
use crate::shared::Shared;

/// Runs `count` workers until `stops.claiming` fires; each finishes or releases its job
/// according to `stops.hard`. Returns when every worker has exited.
pub(crate) async fn run_pool(rt: Arc<Shared>, count: usize, stops: Stops) {
    let mut handles = Vec::with_capacity(count);
    for n in 0..count {
        let worker_id = format!("{}/{}", rt.config.replica_id, n);
        let rt = Arc::clone(&rt);
        let stops = stops.clone();
        handles.push(tokio::spawn(async move {
            worker_loop(rt, worker_id, stops).await;
        }));
    }
    for h in handles {
        if let Err(e) = h.await {
            error!(error = %e, "worker task panicked");
        }
    }
}

async fn worker_loop(rt: Arc<Shared>, worker_id: String, stops: Stops) {
    let mut store_errors: u32 = 0;
    while !stops.claiming.is_cancelled() {
        // A running job's tasks first: they finish work that already holds a table's key.
        // boxed, as is the job below: their state machines are too large for a worker
        // thread's stack in a debug build
        match Box::pin(tasks::run_any(&rt, &worker_id, &stops)).await {
            Ok(true) => continue,
            Ok(false) => {}
            Err(e) => warn!(worker = %worker_id, error = %e, "cannot claim tasks"),
        }
        // The claim is the lease's first renewal: the abandon deadline counts from when it
        // was sent, however long the claim call (or anything after it) takes to return.
        let claim_sent = tokio::time::Instant::now().into_std();
        // under an enforced budget, only what the latest budget round admitted
        let admitted_only = crate::jobs::budget::enforced(&rt.fleet.inventory());
        let outcome = rt
            .store
            .claim_admitted(&worker_id, rt.config.lease, admitted_only)
            .await;
        let idle = match outcome {
            Ok(outcome) => {
                store_errors = 0;
                for wait in &outcome.key_waits {
                    rt.metrics.count_key_wait(&wait.table_name, wait.operation);
                }
                match outcome.job {
                    Some(claimed) => {
                        Box::pin(run_claimed(&rt, &worker_id, claimed, claim_sent, &stops)).await;
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
            stops.nap(idle).await;
        }
    }
}

async fn run_claimed(
    rt: &Arc<Shared>,
    worker_id: &str,
    claimed: ClaimedJob,
    claim_sent: Instant,
    stops: &Stops,
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
        let ctx = match inputs::inputs(rt, &spec, op, job.trigger).await {
            Ok(ctx) => ctx,
            Err(message) => {
                attempt::fail(rt, &claimed, FailureKind::Failed, &message).await;
                return;
            }
        };
        let cancel = CancellationToken::new();
        let meter = Meter::new();
        let work = async {
            let before = figures_before(rt, &spec).await;
            let split = op.rewrites()
                && Box::pin(split::as_tasks(rt, &claimed, &spec, &ctx, &cancel, &meter)).await?;
            let ran = if split {
                Box::pin(split::coordinate(rt, worker_id, &claimed, &spec, &ctx, stops, &meter))
                    .await?
            } else {
                // on a runtime of its own, so its computing never delays the lease renewals
                // and its threads count what it costs
                let operation = delta_runtime::run_metered(Arc::clone(&meter), {
                    let (spec, cancel, ctx) = (spec.clone(), cancel.clone(), ctx.clone());
                    async move { executor::run(&spec, op, ctx, cancel).await }.in_current_span()
                });
                let report = operation.await.map_err(ExecError::from).and_then(|r| r)?;
                Ran {
                    report,
                    tasks: Cost::default(),
                    before: None,
                }
            };
            Ok(Ran { before, ..ran })
        };
        let end = lease_watch::watch(
            &rt.store,
            &claimed.lease,
            LeaseClock::new(claim_sent, rt.config.lease),
            Box::pin(work),
            &stops.hard,
            spec.timeout,
        )
        .await;
        // anything the operation spawned observes this; the operation itself was aborted
        // when the watch dropped it
        cancel.cancel();
        let elapsed = started.elapsed();
        rt.metrics.observe_attempt_duration(op, elapsed);
        // what this replica spent on the attempt (its tasks count where they ran)
        let own = rt.config.prices.priced(meter.cost(elapsed));
        rt.metrics.count_cost(&spec.owner, op.as_str(), &own);
        let spent = Spent { own };
        let outcome =
            Box::pin(attempt::record(rt, &claimed, &spec, op, &ctx, end, elapsed, spent)).await;
        rt.metrics.count_attempt(&spec.name, op, outcome);
        // the replica refreshes what the attempt changed (`replica::after_jobs`)
        rt.job_finished(&spec.name, outcome);
    }
    .instrument(span)
    .await;
}

/// The table's figures before a job, for its outcome: from its last probe, or, on a replica
/// that has not probed it yet (another replica does), from a probe now.
async fn figures_before(
    rt: &Shared,
    spec: &tablekeeper_inventory::TableSpec,
) -> Option<TableFigures> {
    match rt.fleet.figures(&spec.name) {
        Some(figures) => Some(figures),
        None => Box::pin(rt.fleet.probe(spec))
            .await
            .ok()
            .map(|probe| crate::fleet::probe_figures(&probe)),
    }
}
