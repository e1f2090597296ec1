//! A rewrite job spread over replicas through `job_tasks` (README "Tasks").
//!
//! The worker that claims a compaction, Z-order or purge job plans it ([`crate::executor::plan_tasks`]);
//! when the plan [`splits`](tablekeeper_delta::TaskPlan::splits), [`add`] stores the tasks
//! under the job's lease and [`coordinate`] sees the job through: it runs the job's queued tasks
//! itself, while every other replica's idle workers take them too ([`run_any`], called before a
//! worker claims a job), waits for the rest, re-plans the partitions whose tasks found their
//! inputs rewritten by someone else, and adds up what the tasks committed into the job's report.
//! The job keeps its concurrency key (it stays `running`) the whole time; a task's lease can only
//! be renewed while its job runs, so no task outlives the job's hold on the table.
//!
//! A coordinator that dies leaves its job to the reaper like any job: the next claim finds the
//! tasks already planned and resumes them. A task whose worker dies is reaped and run again
//! by anyone; one that runs out of attempts fails the job, which lists what committed.
//!
//! Store calls run here, on the main runtime; the Delta work of a task runs on the Delta
//! runtime ([`crate::delta_runtime`]) under the task's own lease watch.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tablekeeper_delta::{OpReport, TaskCommits, TaskInput, TaskPlan, TaskRun, TaskSummary};
use tablekeeper_inventory::TableSpec;
use tablekeeper_store::{
    ClaimedJob, ClaimedTask, LeaseClock, StoreError, Task, TaskEnd, TaskEnded, TaskState, Trigger,
};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn, Instrument};

use crate::delta_runtime;
use crate::executor::{self, ExecError, RunContext};
use crate::lease_watch::{self, Watched};
use crate::runtime::Runtime;

/// How often a coordinator with nothing of its own to run looks at its job's tasks.
const TASK_POLL: Duration = Duration::from_secs(1);

/// Rounds of re-planning after tasks found their inputs gone, before the job fails as a
/// conflict (another writer keeps rewriting the same partitions).
const MAX_REPLANS: u32 = 3;

/// What `job_tasks.input` holds: the task, the version it was planned at, and which earlier
/// tasks (re-planned ones) it takes over from.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredTask {
    #[serde(flatten)]
    input: TaskInput,
    version: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    replaces: Vec<i32>,
    /// Partitions the plan left alone, and why (on the first task only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    refused: Vec<String>,
}

/// What a succeeded task's `result` holds.
#[derive(Debug, Serialize)]
struct TaskResult<'a> {
    worker_id: &'a str,
    report: &'a OpReport,
}

/// Stores `plan`'s tasks under the job's lease (after `replaces` when re-planning).
pub(crate) async fn add(
    rt: &Runtime,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    plan: &TaskPlan,
    replaces: &[i32],
) -> Result<Vec<Task>, ExecError> {
    let inputs: Vec<serde_json::Value> = plan
        .tasks
        .iter()
        .enumerate()
        .map(|(n, input)| {
            serde_json::to_value(StoredTask {
                input: input.clone(),
                version: plan.version,
                replaces: replaces.to_vec(),
                refused: if n == 0 {
                    plan.refused.clone()
                } else {
                    Vec::new()
                },
            })
            .unwrap_or_default()
        })
        .collect();
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
pub(crate) async fn coordinate(
    rt: &Arc<Runtime>,
    worker_id: &str,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    ctx: &RunContext,
    hard_stop: &CancellationToken,
) -> Result<OpReport, ExecError> {
    let started = Instant::now();
    let job = claimed.job.id;
    let op = claimed.job.operation;
    let mut replans = 0;
    let tasks = loop {
        let sent = tokio::time::Instant::now().into_std();
        match rt
            .store
            .claim_task(worker_id, rt.config.lease, Some(job))
            .await
        {
            Ok(Some(task)) => {
                run_one(rt, worker_id, task, sent, hard_stop).await;
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                warn!(error = %e, "cannot claim the job's tasks; retrying");
                tokio::time::sleep(TASK_POLL).await;
                continue;
            }
        }
        let tasks = match rt.store.tasks(job).await {
            Ok(tasks) => tasks,
            Err(e) => {
                warn!(error = %e, "cannot read the job's tasks; retrying");
                tokio::time::sleep(TASK_POLL).await;
                continue;
            }
        };
        if tasks.iter().any(|t| !t.state.is_terminal()) {
            tokio::time::sleep(TASK_POLL).await;
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
            .filter_map(|t| stored(t).map(|s| s.input.partition))
            .collect();
        let plan = replan(spec, op, ctx, &partitions).await?;
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
    Ok(report(spec, op, &tasks, started.elapsed()))
}

/// Plans the job again at the table's latest version, keeping only `partitions`' tasks.
async fn replan(
    spec: &TableSpec,
    op: tablekeeper_inventory::Operation,
    ctx: &RunContext,
    partitions: &BTreeSet<String>,
) -> Result<TaskPlan, ExecError> {
    let cancel = CancellationToken::new();
    let planning = delta_runtime::spawn({
        let (spec, ctx, cancel) = (spec.clone(), ctx.clone(), cancel.clone());
        async move { executor::plan_tasks(&spec, op, &ctx, cancel).await }.in_current_span()
    });
    let mut plan = planning.await.map_err(ExecError::from).and_then(|p| p)?;
    plan.tasks.retain(|t| partitions.contains(&t.partition));
    plan.refused.clear();
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

fn stored(task: &Task) -> Option<StoredTask> {
    serde_json::from_value(task.input.clone()).ok()
}

/// The job's report: what its tasks committed, and who ran which.
fn report(
    spec: &TableSpec,
    op: tablekeeper_inventory::Operation,
    tasks: &[Task],
    elapsed: Duration,
) -> OpReport {
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
    let mut report = OpReport::of_tasks(op, &spec.path, version_before, &parts, summaries, elapsed);
    report
        .warnings
        .extend(stored.into_iter().flatten().flat_map(|s| s.refused));
    if report.commits.is_empty() {
        report.skipped = Some("the tasks found nothing left to rewrite".into());
    }
    report
}

/// What a succeeded task's result says it committed.
fn committed_by(task: &Task) -> Option<TaskCommits> {
    let report = task.result.as_ref()?.get("report")?;
    serde_json::from_value(report.clone()).ok()
}

fn summary(task: &Task, stored: Option<&StoredTask>) -> TaskSummary {
    let commits = committed_by(task).map(|c| c.commits).unwrap_or_default();
    TaskSummary {
        task: task.task,
        state: task.state.to_string(),
        worker_id: task.worker_id.clone(),
        attempt: task.attempt,
        partition: stored
            .map(|s| s.input.partition.clone())
            .unwrap_or_default(),
        files: stored.map_or(0, |s| s.input.files.len() as u64),
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

/// Claims a queued task of any running job and runs it. `Ok(true)` when one ran.
pub(crate) async fn run_any(
    rt: &Arc<Runtime>,
    worker_id: &str,
    hard_stop: &CancellationToken,
) -> Result<bool, StoreError> {
    let sent = tokio::time::Instant::now().into_std();
    match rt
        .store
        .claim_task(worker_id, rt.config.lease, None)
        .await?
    {
        Some(task) => {
            run_one(rt, worker_id, task, sent, hard_stop).await;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Runs one claimed task under its lease and records how it ended.
async fn run_one(
    rt: &Arc<Runtime>,
    worker_id: &str,
    claimed: ClaimedTask,
    claim_sent: Instant,
    hard_stop: &CancellationToken,
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
        info!(worker = %worker_id, partition = %stored.input.partition, files = stored.input.files.len(), bytes = stored.input.bytes, "task started");
        let started = Instant::now();
        let ctx = RunContext {
            forced: job.trigger == Trigger::Manual,
            ..RunContext::default()
        };
        let cancel = CancellationToken::new();
        let running = delta_runtime::spawn({
            let (spec, cancel, input) = (spec.clone(), cancel.clone(), stored.input.clone());
            async move { executor::run_task(&spec, op, &ctx, &input, cancel).await }
                .in_current_span()
        });
        let end_of = lease_watch::watch(
            &rt.store,
            &claimed.lease,
            LeaseClock::new(claim_sent, rt.config.lease),
            async { running.await.map_err(ExecError::from).and_then(|run| run) },
            hard_stop,
            spec.timeout,
        )
        .await;
        cancel.cancel();
        let elapsed = started.elapsed();
        match end_of {
            Watched::Finished(Ok(TaskRun::Committed(report))) => {
                info!(elapsed = ?elapsed, commits = ?report.commits, files_removed = report.files_removed, files_added = report.files_added, "task committed");
                let result = serde_json::to_value(TaskResult { worker_id, report: report.as_ref() }).unwrap_or_default();
                end(rt, &claimed, TaskEnd::Succeeded(result)).await;
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

async fn end(rt: &Runtime, claimed: &ClaimedTask, end: TaskEnd) {
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
        let spec = crate::planner::tests::spec("");
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
