//! A rewrite job split into tasks (README "Tasks"), seen through by the worker that claimed
//! it.
//!
//! The worker that claims a compaction, Z-order or purge job plans it
//! ([`crate::jobs::executor::plan_tasks`]); when the plan
//! [`splits`](tablekeeper_delta::TaskPlan::splits), [`add`] stores the tasks under the job's
//! lease and [`coordinate`] sees the job through: it runs the job's queued tasks itself, while
//! every other replica's idle workers take them too ([`crate::jobs::tasks::run_any`], called
//! before a worker claims a job), waits for the rest, re-plans the partitions whose tasks found
//! their inputs rewritten by someone else, and adds up what the tasks committed into the job's
//! report. The job keeps its concurrency key (it stays `running`) the whole time; a task's
//! lease can only be renewed while its job runs, so no task outlives the job's hold on the
//! table.
//!
//! A coordinator that dies leaves its job to the reaper like any job: the next claim finds the
//! tasks already planned and resumes them.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tablekeeper_delta::cost::Meter;
use tablekeeper_delta::{OpReport, TaskCommits, TaskPlan, TaskSummary};
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_store::{ClaimedJob, Task, TaskState};
use tablekeeper_vocab::Cost;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn, Instrument};

use crate::delta_runtime;
use crate::jobs::executor::{self, ExecError, Ran, RunContext};
use crate::jobs::stops::Stops;
use crate::jobs::tasks::{outcome, run_one, store_error, stored, StoredTask, TASK_POLL};
use crate::shared::Shared;

/// The first wait for other replicas' tasks; each wait without news doubles it, up to
/// [`TASK_POLL`].
const POLL_FIRST: Duration = Duration::from_millis(100);

/// Rounds of re-planning after tasks found their inputs gone, before the job fails as a
/// conflict (another writer keeps rewriting the same partitions).
const MAX_REPLANS: u32 = 3;

/// Whether a rewrite job runs as tasks: true when it does (its tasks stored now, or by an
/// earlier attempt whose replica stopped: then they are resumed, not planned again), false
/// when it runs whole here (a plan of one task).
pub(crate) async fn as_tasks(
    rt: &Shared,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    ctx: &RunContext,
    cancel: &CancellationToken,
    meter: &Arc<Meter>,
) -> Result<bool, ExecError> {
    let op = claimed.job.operation;
    let stored = rt
        .store
        .tasks(claimed.job.id)
        .await
        .map_err(|e| store_error("reading the job's tasks", &e))?;
    if !stored.is_empty() {
        info!(
            tasks = stored.len(),
            "resuming the tasks an earlier attempt planned"
        );
        return Ok(true);
    }
    match plan(spec, op, ctx, cancel, meter).await? {
        Split::Whole => Ok(false),
        Split::Tasks(plan) => {
            add(rt, claimed, spec, &plan, &[]).await?;
            Ok(true)
        }
    }
}

/// How a rewrite runs: whole (a plan of one task), or as the plan's tasks.
#[derive(Debug)]
pub(crate) enum Split {
    Whole,
    Tasks(TaskPlan),
}

/// Plans a rewrite as tasks at the table's current version, its cost counted into `meter`:
/// the one decision of whether a job splits, for the daemon's workers and `maintain` alike.
pub(crate) async fn plan(
    spec: &TableSpec,
    op: Operation,
    ctx: &RunContext,
    cancel: &CancellationToken,
    meter: &Arc<Meter>,
) -> Result<Split, ExecError> {
    let planning = delta_runtime::run_metered(Arc::clone(meter), {
        let (spec, ctx, cancel) = (spec.clone(), ctx.clone(), cancel.clone());
        async move { executor::plan_tasks(&spec, op, &ctx, cancel).await }.in_current_span()
    });
    let plan = planning.await.map_err(ExecError::from).and_then(|p| p)?;
    Ok(if plan.splits() {
        Split::Tasks(plan)
    } else {
        Split::Whole
    })
}

/// A split job's report: what its tasks committed (`parts`), each task's summary, what its
/// tasks warned of (`warnings`), and "nothing left to rewrite" when no task committed. One
/// report for the daemon's jobs and `maintain`.
pub(crate) fn job_report(
    spec: &TableSpec,
    op: Operation,
    version_before: i64,
    parts: &[TaskCommits],
    summaries: Vec<TaskSummary>,
    warnings: Vec<String>,
    elapsed: Duration,
) -> OpReport {
    let mut report = OpReport::of_tasks(op, &spec.path, version_before, parts, summaries, elapsed);
    report.warnings.extend(warnings);
    if report.commits.is_empty() {
        report.skipped = Some("the tasks found nothing left to rewrite".into());
    }
    report
}

/// Stores `plan`'s tasks under the job's lease (after `replaces` when re-planning).
pub(crate) async fn add(
    rt: &Shared,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    plan: &TaskPlan,
    replaces: &[i32],
) -> Result<Vec<Task>, ExecError> {
    let inputs = plan
        .tasks
        .iter()
        .map(|input| {
            serde_json::to_value(StoredTask {
                unit: input.clone(),
                version: plan.version,
                replaces: replaces.to_vec(),
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|err| ExecError::TaskFailed(format!("a task input does not serialize: {err}")))?;
    let max_attempts = i32::try_from(spec.max_attempts).unwrap_or(i32::MAX);
    match rt
        .store
        .add_tasks(&claimed.lease, max_attempts, &inputs)
        .await
    {
        Ok(Some(tasks)) => {
            info!(
                tasks = plan.tasks.len(),
                version = plan.version,
                bytes = plan.tasks.iter().map(|t| t.bytes).sum::<u64>(),
                "job planned as tasks"
            );
            Ok(tasks)
        }
        Ok(None) => Err(ExecError::TaskFailed(
            "the job's lease was lost before its tasks were stored; another replica owns it".into(),
        )),
        Err(e) => Err(store_error("storing the job's tasks", &e)),
    }
}

/// Sees a job's tasks through: runs its queued tasks here while other replicas take them
/// too, waits for the rest, re-plans the stale ones, and returns the job's report. Runs under
/// the job's lease watch, which drops it when the lease is lost.
///
/// When the replica begins to drain it claims no more tasks, and as soon as none of the job's
/// tasks runs anywhere it hands the job over ([`ExecError::HandedOver`]: the attempt releases
/// it, and the next replica to claim it resumes its tasks). While some task still runs on
/// another replica the job keeps its lease, so the table's concurrency key stays held.
pub(crate) async fn coordinate(
    rt: &Arc<Shared>,
    worker_id: &str,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    ctx: &RunContext,
    stops: &Stops,
    meter: &Arc<Meter>,
) -> Result<Ran, ExecError> {
    let started = Instant::now();
    let job = claimed.job.id;
    let op = claimed.job.operation;
    let mut replans = 0;
    let mut poll = POLL_FIRST;
    let tasks = loop {
        if !stops.claiming.is_cancelled() {
            let sent = tokio::time::Instant::now().into_std();
            match rt
                .store
                .claim_task(worker_id, rt.config.lease, Some(job))
                .await
            {
                Ok(Some(task)) => {
                    Box::pin(run_one(rt, worker_id, task, sent, stops)).await;
                    poll = POLL_FIRST;
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    warn!(error = %e, "cannot claim the job's tasks; retrying");
                    stops.nap(TASK_POLL).await;
                    continue;
                }
            }
        }
        let tasks = match rt.store.tasks(job).await {
            Ok(tasks) => tasks,
            Err(e) => {
                warn!(error = %e, "cannot read the job's tasks; retrying");
                stops.nap(TASK_POLL).await;
                continue;
            }
        };
        if tasks.iter().any(|t| !t.state.is_terminal()) {
            if stops.claiming.is_cancelled() && !tasks.iter().any(|t| t.state == TaskState::Running)
            {
                let queued = tasks
                    .iter()
                    .filter(|t| t.state == TaskState::Queued)
                    .count();
                info!(
                    queued,
                    "replica draining: handing the job and its queued tasks over"
                );
                return Err(ExecError::HandedOver(format!(
                    "replica shutting down: the job and its {queued} queued task(s) handed over \
                     to another replica; {}",
                    committed(&tasks)
                )));
            }
            // others' tasks end on their own time: look again soon, then less often
            stops.nap(poll).await;
            poll = (poll * 2).min(TASK_POLL);
            continue;
        }
        if tasks.iter().any(|t| t.state == TaskState::Failed) {
            return Err(ExecError::TaskFailed(failure(&tasks)));
        }
        let stale = stale(&tasks);
        if stale.is_empty() {
            break tasks;
        }
        replans += 1;
        if replans > MAX_REPLANS {
            return Err(ExecError::TaskFailed(format!(
                "re-planned {MAX_REPLANS} times and other writers kept rewriting the same files \
                 (tasks {stale:?} found their inputs gone); {}",
                committed(&tasks)
            )));
        }
        let partitions: BTreeSet<String> = tasks
            .iter()
            .filter(|t| stale.contains(&t.task))
            .filter_map(|t| stored(t).map(|s| s.unit.partition))
            .collect();
        let plan = Box::pin(replan(spec, op, ctx, &partitions, meter)).await?;
        info!(
            stale = ?stale,
            tasks = plan.tasks.len(),
            version = plan.version,
            "tasks found their inputs rewritten by another writer: re-planned their partitions"
        );
        if plan.tasks.is_empty() {
            // nothing left to rewrite there: mark the stale ones as taken care of
            break tasks;
        }
        add(rt, claimed, spec, &plan, &stale).await?;
    };
    Ok(Ran {
        report: report(spec, op, &tasks, started.elapsed()),
        tasks: tasks_cost(&tasks),
        before: None,
    })
}

/// What the job's succeeded tasks cost, wherever they ran (their results say).
fn tasks_cost(tasks: &[Task]) -> Cost {
    tasks
        .iter()
        .filter(|t| t.state == TaskState::Succeeded)
        .filter_map(outcome)
        .fold(Cost::default(), |sum, o| sum.plus(&o.cost))
}

/// Plans the job again at the table's latest version, keeping only `partitions`' tasks.
async fn replan(
    spec: &TableSpec,
    op: tablekeeper_inventory::Operation,
    ctx: &RunContext,
    partitions: &BTreeSet<String>,
    meter: &Arc<Meter>,
) -> Result<TaskPlan, ExecError> {
    let cancel = CancellationToken::new();
    let planning = delta_runtime::run_metered(Arc::clone(meter), {
        let (spec, ctx, cancel) = (spec.clone(), ctx.clone(), cancel.clone());
        async move { executor::plan_tasks(&spec, op, &ctx, cancel).await }.in_current_span()
    });
    let mut plan = planning.await.map_err(ExecError::from).and_then(|p| p)?;
    plan.tasks.retain(|t| partitions.contains(&t.partition));
    Ok(plan)
}

/// Re-planned tasks no later task took over from.
fn stale(tasks: &[Task]) -> Vec<i32> {
    let replaced: BTreeSet<i32> = tasks
        .iter()
        .filter_map(stored)
        .flat_map(|s| s.replaces)
        .collect();
    tasks
        .iter()
        .filter(|t| t.state == TaskState::Replanned && !replaced.contains(&t.task))
        .map(|t| t.task)
        .collect()
}

/// The job's report: what its tasks committed, and who ran which.
fn report(spec: &TableSpec, op: Operation, tasks: &[Task], elapsed: Duration) -> OpReport {
    let stored: Vec<Option<StoredTask>> = tasks.iter().map(stored).collect();
    let version_before = stored
        .iter()
        .flatten()
        .map(|s| s.version)
        .min()
        .unwrap_or(0);
    let parts: Vec<TaskCommits> = tasks
        .iter()
        .filter(|t| t.state == TaskState::Succeeded)
        .filter_map(committed_by)
        .collect();
    let summaries = tasks
        .iter()
        .zip(&stored)
        .map(|(task, stored)| summary(task, stored.as_ref()))
        .collect();
    job_report(
        spec,
        op,
        version_before,
        &parts,
        summaries,
        Vec::new(),
        elapsed,
    )
}

/// What a succeeded task's result says it committed.
fn committed_by(task: &Task) -> Option<TaskCommits> {
    outcome(task).map(|o| o.report)
}

fn summary(task: &Task, stored: Option<&StoredTask>) -> TaskSummary {
    let commits = committed_by(task).map(|c| c.commits).unwrap_or_default();
    TaskSummary {
        task: task.task,
        state: task.state.to_string(),
        worker_id: task.worker_id.clone(),
        attempt: task.attempt,
        partition: stored.map(|s| s.unit.partition.clone()).unwrap_or_default(),
        files: stored.map_or(0, |s| s.unit.files.len() as u64),
        bytes: task.bytes(),
        commits,
        error: task.error.clone(),
    }
}

/// Why the job failed: the failed tasks and what the others committed.
fn failure(tasks: &[Task]) -> String {
    let failed: Vec<String> = tasks
        .iter()
        .filter(|t| t.state == TaskState::Failed)
        .map(|t| {
            format!(
                "task {} failed after {} attempts: {}",
                t.task,
                t.attempt,
                t.error.as_deref().unwrap_or("no error recorded")
            )
        })
        .collect();
    format!("{}; {}", failed.join("; "), committed(tasks))
}

/// What the succeeded tasks committed, for a failed job's error.
fn committed(tasks: &[Task]) -> String {
    let done: Vec<String> = tasks
        .iter()
        .filter(|t| t.state == TaskState::Succeeded)
        .map(|t| {
            let versions = committed_by(t).map(|c| c.commits).unwrap_or_default();
            format!("task {} at versions {versions:?}", t.task)
        })
        .collect();
    if done.is_empty() {
        "no task committed".into()
    } else {
        format!("committed and kept: {}", done.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use serde_json::json;
    use tablekeeper_inventory::Operation;
    use tablekeeper_store::JobId;

    use super::*;

    fn task(n: i32, state: TaskState, replaces: &[i32], commits: &[i64]) -> Task {
        Task {
            job_id: JobId(1),
            task: n,
            state,
            worker_id: Some(format!("r{n}/0")),
            attempt: 1,
            max_attempts: 3,
            input: json!({"partition": format!("d={n}"), "values": [], "files": ["a", "b"], "bytes": 10, "version": 4, "replaces": replaces}),
            result: (state == TaskState::Succeeded)
                .then(|| json!({"worker_id": format!("r{n}/0"), "report": {"commits": commits, "files_removed": 2, "files_added": 1, "bytes_removed": 10, "bytes_added": 8}})),
            error: (state == TaskState::Failed).then(|| "disk full".to_owned()),
            lease_expires_at: None,
            created_at: Utc::now(),
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn a_replanned_task_is_stale_until_a_later_task_takes_it_over() {
        let tasks = vec![
            task(0, TaskState::Succeeded, &[], &[5]),
            task(1, TaskState::Replanned, &[], &[]),
            task(2, TaskState::Replanned, &[], &[]),
        ];
        assert_eq!(stale(&tasks), vec![1, 2]);
        let mut tasks = tasks;
        tasks.push(task(3, TaskState::Succeeded, &[1, 2], &[7]));
        assert!(stale(&tasks).is_empty());
    }

    #[test]
    fn the_report_adds_up_the_tasks_and_says_who_ran_which() {
        let spec = crate::policy::planner::tests::spec("");
        let tasks = vec![
            task(0, TaskState::Succeeded, &[], &[6]),
            task(1, TaskState::Replanned, &[], &[]),
            task(2, TaskState::Succeeded, &[1], &[5]),
        ];
        let report = report(&spec, Operation::Compact, &tasks, Duration::from_secs(2));
        assert_eq!(report.commits, vec![5, 6]);
        assert_eq!(report.version_after, Some(6));
        assert_eq!(report.version_before, 4);
        assert_eq!((report.files_removed, report.files_added), (4, 2));
        assert_eq!(report.tasks.len(), 3);
        assert_eq!(report.tasks[2].worker_id.as_deref(), Some("r2/0"));
        assert_eq!(report.tasks[2].commits, vec![5]);
        assert_eq!(report.tasks[1].state, "replanned");
        assert!(report.skipped.is_none());
    }

    #[test]
    fn a_failed_job_names_the_failed_task_and_what_committed() {
        let tasks = vec![
            task(0, TaskState::Succeeded, &[], &[6]),
            task(1, TaskState::Failed, &[], &[]),
        ];
        let why = failure(&tasks);
        assert!(
            why.contains("task 1 failed after 1 attempts: disk full"),
            "{why}"
        );
        assert!(why.contains("task 0 at versions [6]"), "{why}");
    }
}
