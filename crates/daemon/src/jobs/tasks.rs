//! One task of a split rewrite job (README "Tasks"), run by whichever replica claims it:
//! [`run_any`] claims a queued task of any running job (every worker tries this before it
//! claims a job), [`run_one`] runs it under its own lease and records how it ended. What
//! `job_tasks.input` and `result` hold is the vocabulary's task contract
//! ([`tablekeeper_vocab::TaskSpec`] over the delta crate's [`TaskInput`],
//! [`tablekeeper_vocab::TaskOutcome`]), read here through [`stored`] and [`outcome`].
//!
//! Store calls run here, on the main runtime; the Delta work of a task runs on a runtime of
//! its own ([`crate::delta_runtime::run_metered`]) under the task's own lease watch, so what
//! it cost is measured: the task's `result` carries it, and this replica's cost counters count
//! it whatever the task's end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tablekeeper_delta::cost::Meter;
use tablekeeper_delta::{TaskCommits, TaskInput, TaskRun};
use tablekeeper_store::{ClaimedTask, LeaseClock, StoreError, Task, TaskEnd, TaskEnded, Trigger};
use tablekeeper_vocab::{TaskOutcome, TaskSpec};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn, Instrument};

use crate::delta_runtime;
use crate::jobs::executor::{self, ExecError, RunContext};
use crate::jobs::lease_watch::{self, Watched};
use crate::jobs::stops::Stops;
use crate::shared::Shared;

/// How often a coordinator with nothing of its own to run looks at its job's tasks.
pub(crate) const TASK_POLL: Duration = Duration::from_secs(1);

/// What `job_tasks.input` holds for a rewrite task.
pub(crate) type StoredTask = TaskSpec<TaskInput>;

/// The task's input, or why this version cannot read it (logged with the task).
pub(crate) fn stored(task: &Task) -> Option<StoredTask> {
    task.spec()
        .inspect_err(|err| warn!(error = %err, "task input unreadable"))
        .ok()
}

/// What a succeeded task committed, from its `result`; `None` (logged) when the result does
/// not hold the contract's outcome.
pub(crate) fn outcome(task: &Task) -> Option<TaskOutcome<TaskCommits>> {
    let result = task.result.clone()?;
    serde_json::from_value(result)
        .inspect_err(|err| {
            warn!(job_id = task.job_id.0, task = task.task, error = %err, "task result unreadable")
        })
        .ok()
}

/// Claims a queued task of any running job and runs it. `Ok(true)` when one ran.
pub(crate) async fn run_any(
    rt: &Arc<Shared>,
    worker_id: &str,
    stops: &Stops,
) -> Result<bool, StoreError> {
    let sent = tokio::time::Instant::now().into_std();
    match rt
        .store
        .claim_task(worker_id, rt.config.lease, None)
        .await?
    {
        Some(task) => {
            Box::pin(run_one(rt, worker_id, task, sent, stops)).await;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Runs one claimed task under its lease and records how it ended. A claim that returns
/// after the replica began to drain (it was in flight when the signal came) is given back
/// unstarted, so nothing starts on a draining replica.
pub(crate) async fn run_one(
    rt: &Arc<Shared>,
    worker_id: &str,
    claimed: ClaimedTask,
    claim_sent: Instant,
    stops: &Stops,
) {
    let job = &claimed.job;
    let op = job.operation;
    let span = tracing::info_span!("task", job_id = job.id.0, task = claimed.lease.task, table = %job.table_name, operation = %op, attempt = claimed.task.attempt);
    async {
        let Some(spec) = rt.fleet.spec(&job.table_name) else {
            let reason = format!(
                "table `{}` is not in this replica's inventory; left for a replica that has it",
                job.table_name
            );
            warn!(worker = %worker_id, "{reason}");
            if let Err(e) = rt.store.release_task(&claimed.lease, &reason).await {
                warn!(error = %e, "cannot give the task back; the reaper will");
            }
            tokio::time::sleep(TASK_POLL).await;
            return;
        };
        let Some(stored) = stored(&claimed.task) else {
            end(rt, &claimed, TaskEnd::Failed("the task's input in job_tasks is not a task tablekeeper wrote".into())).await;
            return;
        };
        let started = stops.start(|| {
            info!(worker = %worker_id, partition = %stored.unit.partition, files = stored.unit.files.len(), bytes = stored.unit.bytes, "task started");
        });
        if !started {
            let reason = "replica draining: claimed as the drain began, given back unstarted";
            info!(worker = %worker_id, "{reason}");
            if let Err(e) = rt.store.release_task(&claimed.lease, reason).await {
                warn!(error = %e, "cannot give the task back; the reaper will");
            }
            return;
        }
        let started = Instant::now();
        let ctx = RunContext {
            forced: job.trigger == Trigger::Manual,
            ..RunContext::default()
        };
        let cancel = CancellationToken::new();
        let meter = Meter::new();
        let running = delta_runtime::run_metered(Arc::clone(&meter), {
            let (spec, cancel, input) = (spec.clone(), cancel.clone(), stored.unit.clone());
            async move { executor::run_task(&spec, op, &ctx, &input, cancel).await }
                .in_current_span()
        });
        // boxed: the task's state machine is too large for a worker thread's stack in a
        // debug build
        let end_of = lease_watch::watch(
            &rt.store,
            &claimed.lease,
            LeaseClock::new(claim_sent, rt.config.lease),
            Box::pin(async { running.await.map_err(ExecError::from).and_then(|run| run) }),
            &stops.hard,
            spec.timeout,
        )
        .await;
        cancel.cancel();
        let elapsed = started.elapsed();
        // spent whatever the task's end: counted here, where it ran
        let cost = rt.config.prices.priced(meter.cost(elapsed));
        rt.metrics.count_cost(&spec.owner, op.as_str(), &cost);
        match end_of {
            Watched::Finished(Ok(TaskRun::Committed(report))) => {
                info!(elapsed = ?elapsed, commits = ?report.commits, files_removed = report.files_removed, files_added = report.files_added, cpu_seconds = cost.cpu_seconds, requests = cost.requests.total(), "task committed");
                let outcome = TaskOutcome { worker_id: worker_id.to_owned(), report: report.as_ref(), cost };
                match serde_json::to_value(outcome) {
                    Ok(result) => end(rt, &claimed, TaskEnd::Succeeded(result)).await,
                    Err(err) => end(rt, &claimed, TaskEnd::Failed(format!("the task's report does not serialize: {err}"))).await,
                }
            }
            Watched::Finished(Ok(TaskRun::Replan(reason))) => {
                info!(reason = %reason, "task re-planned: its inputs changed");
                end(rt, &claimed, TaskEnd::Replanned(reason)).await;
            }
            Watched::Finished(Err(e)) => {
                if matches!(e, ExecError::Delta(tablekeeper_delta::DeltaError::DuplicateRewrite { .. } | tablekeeper_delta::DeltaError::RowsChanged { .. })) {
                    error!(error = %e, "DATA SAFETY: a task's rewrite failed its row check; investigate before the next maintenance run");
                }
                end(rt, &claimed, TaskEnd::Failed(e.to_string())).await;
            }
            Watched::TimedOut(limit) => {
                let message = format!(
                    "timed out after {}: raise `maintenance.timeout` or lower `maintenance.max_task_bytes`",
                    humantime::format_duration(limit)
                );
                end(rt, &claimed, TaskEnd::Failed(message)).await;
            }
            Watched::LeaseLost(_) => {
                warn!("task abandoned: its lease was lost or its job stopped running; the reaper hands it on");
            }
            Watched::Shutdown => {
                let reason = "replica shutting down: released before shutdown_grace ran out";
                match rt.store.release_task(&claimed.lease, reason).await {
                    Ok(true) => info!("task released for another replica"),
                    Ok(false) => warn!("the task's lease was gone before it could be released"),
                    Err(e) => warn!(error = %e, "cannot release the task; the reaper will"),
                }
            }
        }
    }
    .instrument(span)
    .await;
}

async fn end(rt: &Shared, claimed: &ClaimedTask, end: TaskEnd) {
    match rt.store.end_task(&claimed.lease, end).await {
        Ok(TaskEnded::Done(state)) => info!(state = %state, "task ended"),
        Ok(TaskEnded::Retrying) => warn!("task failed; queued again for any replica"),
        Ok(TaskEnded::LeaseLost) => {
            warn!("the task ended but its lease was already lost: another replica owns it now")
        }
        Err(e) => {
            error!(error = %e, "cannot record how the task ended; the reaper requeues it when its lease expires")
        }
    }
}

pub(crate) fn store_error(what: &str, e: &StoreError) -> ExecError {
    ExecError::Store(format!("{what} failed: {e}"))
}
