//! `job_tasks`: the tasks a rewrite job is split into, and every store call on them.
//!
//! The replica running a job plans its tasks at one table version and adds them, fenced by
//! the job's lease ([`JobStore::add_tasks`]). Any replica then claims a queued task of a
//! running job ([`JobStore::claim_task`], `FOR UPDATE SKIP LOCKED` on Postgres), renews the
//! task's own lease while it rewrites ([`JobStore::heartbeat_task`]: refused once the job is
//! no longer running, so a task never outlives its job's hold on the concurrency key), and
//! ends it fenced by the task's token ([`JobStore::end_task`]). The reaper takes back tasks
//! whose lease expired ([`JobStore::reap_tasks`]) exactly as it takes back jobs.
//!
//! ```text
//!   add_tasks ──► queued ──claim_task──► running ──end_task──► succeeded | replanned
//!                   ▲                      │ end_task(failed) or reap: attempts left ─┐
//!                   └──────────────────────┴─ release_task (shutdown, attempt back) ◄─┘
//!                                          │ no attempts left ──► failed
//!   its job ended (succeeded, failed, cancelled) ──► cancelled
//! ```
//!
//! Like every store call, each method here is one statement or one short transaction; the
//! decisions (requeue, fail, cancel) are made in this module, the SQL only applies them.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tablekeeper_vocab::{JobId, JobState, Lease, TaskLease, TaskSize, TaskSpec, TaskState};
use uuid::Uuid;

use crate::dialect::{args, Arg, Record};
use crate::error::StoreError;
use crate::model::Job;
use crate::store::{first, job_row, micros, one, JobStore, StoreOp};

/// Upper bound of expired tasks one `reap_tasks` call handles; the next call takes the rest.
const MAX_REAP_BATCH: i64 = 100;

/// The `error` of a task whose job ended before the task ran.
pub const JOB_ENDED: &str = "its job ended before the task ran";

/// A row of `job_tasks`.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Task {
    pub job_id: JobId,
    pub task: i32,
    pub state: TaskState,
    /// Worker of the latest attempt (kept after it ends, for operators).
    pub worker_id: Option<String>,
    pub attempt: i32,
    pub max_attempts: i32,
    /// What the task rewrites: a [`TaskSpec`] over the delta crate's task input (read it with
    /// [`Task::spec`]).
    pub input: serde_json::Value,
    /// What it committed, once succeeded: a [`tablekeeper_vocab::TaskOutcome`].
    pub result: Option<serde_json::Value>,
    pub error: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Task {
    /// The task's input as `U`, the view of the contract its reader needs; an error names the
    /// task when the stored input does not hold it.
    pub fn spec<U: DeserializeOwned>(&self) -> Result<TaskSpec<U>, StoreError> {
        serde_json::from_value(self.input.clone()).map_err(|err| {
            StoreError::InvalidInput(format!(
                "task {} of job {} holds an input this version cannot read ({err}); it was \
                 written by another tablekeeper version: let its job end, then run again",
                self.task, self.job_id
            ))
        })
    }

    /// The input bytes the task reads; 0, with a warning, for an input this version cannot
    /// read (progress then undercounts rather than failing the page that shows it).
    pub fn bytes(&self) -> u64 {
        match self.spec::<TaskSize>() {
            Ok(spec) => spec.unit.bytes,
            Err(err) => {
                tracing::warn!(error = %err, "task size unknown");
                0
            }
        }
    }
}

/// A claimed task, with its job and the lease that fences its writes.
#[derive(Clone, Debug)]
pub struct ClaimedTask {
    pub task: Task,
    pub job: Job,
    pub lease: TaskLease,
    pub lease_expires_at: DateTime<Utc>,
}

/// How a worker ends a task.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskEnd {
    /// Committed; the result says what.
    Succeeded(serde_json::Value),
    /// Its inputs were no longer active: nothing committed, the job plans again.
    Replanned(String),
    /// Failed; retried by any replica while attempts remain.
    Failed(String),
}

/// What [`JobStore::end_task`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskEnded {
    /// The task reached the state asked for (or, for a failure, `failed`).
    Done(TaskState),
    /// A failure with attempts left: queued again for any replica.
    Retrying,
    /// The token no longer holds the task's lease; nothing changed.
    LeaseLost,
}

/// A task the reaper took back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReapedTask {
    pub job_id: JobId,
    pub task: i32,
    pub worker_id: String,
    pub attempt: i32,
    /// queued (attempts left), failed (none left) or cancelled (its job ended).
    pub state: TaskState,
}

/// Progress of a job's tasks: what the API and the dashboard show.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Progress {
    pub tasks_total: u64,
    pub tasks_done: u64,
    pub tasks_running: u64,
    pub tasks_failed: u64,
    pub bytes_total: u64,
    pub bytes_done: u64,
}

impl Progress {
    /// Progress over `tasks`. Re-planned and cancelled tasks count for nothing: their files are
    /// in their successors' inputs, or were never to be rewritten.
    pub fn of(tasks: &[Task]) -> Self {
        let mut progress = Progress::default();
        for task in tasks {
            if matches!(task.state, TaskState::Replanned | TaskState::Cancelled) {
                continue;
            }
            progress.tasks_total += 1;
            progress.bytes_total += task.bytes();
            match task.state {
                TaskState::Succeeded => {
                    progress.tasks_done += 1;
                    progress.bytes_done += task.bytes();
                }
                TaskState::Running => progress.tasks_running += 1,
                TaskState::Failed => progress.tasks_failed += 1,
                TaskState::Queued | TaskState::Replanned | TaskState::Cancelled => {}
            }
        }
        progress
    }
}

impl JobStore {
    /// Adds tasks to the running job `held` fences, numbered after its existing ones, each
    /// with `max_attempts`. `None`: the lease does not hold and nothing was added. Returns
    /// every task of the job.
    pub async fn add_tasks(
        &self,
        held: &Lease,
        max_attempts: i32,
        inputs: &[serde_json::Value],
    ) -> Result<Option<Vec<Task>>, StoreError> {
        self.measured(StoreOp::AddTasks, async {
            let sql = self.sql();
            let mut tx = self.dialect().begin().await?;
            if first(
                tx.fetch(sql.lock_leased, args!(held.job.0, held.token))
                    .await?,
            )
            .is_none()
            {
                tx.rollback().await?;
                return Ok(None);
            }
            let next = one(
                tx.fetch(sql.next_task, args!(held.job.0)).await?,
                "next task",
            )?
            .int32("next")?;
            for (n, input) in inputs.iter().enumerate() {
                let number = next
                    .checked_add(i32::try_from(n).unwrap_or(i32::MAX))
                    .ok_or_else(|| StoreError::InvalidInput("too many tasks".into()))?;
                let args = args!(
                    held.job.0,
                    number,
                    max_attempts.max(1),
                    Arg::Json(Some(input.clone()))
                );
                tx.execute(sql.insert_task, args).await?;
            }
            let tasks = tx
                .fetch(sql.job_tasks, args!(held.job.0))
                .await?
                .iter()
                .map(task_row)
                .collect::<Result<Vec<_>, _>>()?;
            tx.commit().await?;
            Ok(Some(tasks))
        })
        .await
    }

    /// Every task of `job`, in task order.
    pub async fn tasks(&self, job: JobId) -> Result<Vec<Task>, StoreError> {
        self.measured(StoreOp::Tasks, async {
            self.dialect()
                .fetch(self.sql().job_tasks, args!(job.0))
                .await?
                .iter()
                .map(task_row)
                .collect()
        })
        .await
    }

    /// Claims a queued task of a running job (of `only_job` when given), for `lease`: the
    /// oldest job's first task first, so a job finishes before the next one's tasks start.
    pub async fn claim_task(
        &self,
        worker_id: &str,
        lease: Duration,
        only_job: Option<JobId>,
    ) -> Result<Option<ClaimedTask>, StoreError> {
        self.measured(StoreOp::ClaimTask, async {
            let sql = self.sql();
            let lease_us = micros(lease, "lease")?;
            let mut tx = self.dialect().begin().await?;
            let candidate = first(
                tx.fetch(sql.claim_task_candidate, args!(only_job.map(|j| j.0)))
                    .await?,
            );
            let Some(candidate) = candidate else {
                tx.rollback().await?;
                return Ok(None);
            };
            let (job_id, number) = (candidate.int("job_id")?, candidate.int32("task")?);
            let token = Uuid::new_v4();
            let update = args!(job_id, number, worker_id, token, lease_us);
            let task = task_row(&one(
                tx.fetch(sql.claim_task_update, update).await?,
                "claim task",
            )?)?;
            let job = job_row(&one(
                tx.fetch(sql.get_job, args!(job_id)).await?,
                "claim task",
            )?)?;
            tx.commit().await?;
            let lease_expires_at = task.lease_expires_at.ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "claimed task {job_id}/{number} has no lease expiry"
                ))
            })?;
            Ok(Some(ClaimedTask {
                lease: TaskLease {
                    job: JobId(job_id),
                    task: number,
                    token,
                },
                task,
                job,
                lease_expires_at,
            }))
        })
        .await
    }

    /// Extends the task's lease to database-now + `lease` while it holds and its job still
    /// runs. `None`: abandon the task (taken over, or its job ended or lost its own lease).
    pub async fn heartbeat_task(
        &self,
        held: &TaskLease,
        lease: Duration,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.measured(StoreOp::HeartbeatTask, async {
            let args = args!(held.job.0, held.task, held.token, micros(lease, "lease")?);
            first(
                self.dialect()
                    .fetch(self.sql().heartbeat_task, args)
                    .await?,
            )
            .map(|r| r.time("lease_expires_at"))
            .transpose()
        })
        .await
    }

    /// Ends the task as `end` says, fenced by its lease. A failure requeues it while attempts
    /// remain (any replica retries it), else fails it. Idempotent for a success whose reply
    /// was lost: the same token finds its task succeeded and gets `Done(Succeeded)` again.
    pub async fn end_task(&self, held: &TaskLease, end: TaskEnd) -> Result<TaskEnded, StoreError> {
        self.measured(StoreOp::EndTask, async {
            let sql = self.sql();
            let mut tx = self.dialect().begin().await?;
            let locked = first(
                tx.fetch(sql.lock_task, args!(held.job.0, held.task, held.token))
                    .await?,
            )
            .as_ref()
            .map(task_row)
            .transpose()?;
            let Some(task) = locked else {
                tx.rollback().await?;
                return Ok(TaskEnded::LeaseLost);
            };
            let (state, result, error) = match end {
                TaskEnd::Succeeded(result) => (TaskState::Succeeded, Some(result), None),
                TaskEnd::Replanned(reason) => (TaskState::Replanned, None, Some(reason)),
                TaskEnd::Failed(error) if task.attempt < task.max_attempts => {
                    (TaskState::Queued, None, Some(error))
                }
                TaskEnd::Failed(error) => (TaskState::Failed, None, Some(error)),
            };
            let args = args!(
                held.job.0,
                held.task,
                state.as_str(),
                Arg::Json(result),
                error.as_deref(),
                0i32
            );
            tx.execute(sql.end_task, args).await?;
            tx.commit().await?;
            Ok(match state {
                TaskState::Queued => TaskEnded::Retrying,
                done => TaskEnded::Done(done),
            })
        })
        .await
    }

    /// Graceful shutdown: gives the task back (queued, attempt not consumed) with `reason`.
    /// `false`: the lease did not hold.
    pub async fn release_task(&self, held: &TaskLease, reason: &str) -> Result<bool, StoreError> {
        self.measured(StoreOp::ReleaseTask, async {
            let sql = self.sql();
            let mut tx = self.dialect().begin().await?;
            let locked = first(
                tx.fetch(sql.lock_task, args!(held.job.0, held.task, held.token))
                    .await?,
            );
            if locked.is_none() {
                tx.rollback().await?;
                return Ok(false);
            }
            let args = args!(
                held.job.0,
                held.task,
                TaskState::Queued.as_str(),
                Arg::Json(None),
                reason,
                1i32
            );
            tx.execute(sql.end_task, args).await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    /// Takes back running tasks whose lease expired more than `grace` ago (database clock):
    /// queued again while attempts remain and the job has not ended, failed when none remain,
    /// cancelled when the job ended. Also cancels the queued tasks of jobs that ended. Safe to
    /// run from every replica at once.
    pub async fn reap_tasks(&self, grace: Duration) -> Result<Vec<ReapedTask>, StoreError> {
        self.measured(StoreOp::ReapTasks, async {
            let sql = self.sql();
            let grace_us = micros(grace, "grace")?;
            let candidates = self
                .dialect()
                .fetch(sql.reap_task_candidates, args!(grace_us, MAX_REAP_BATCH))
                .await?;
            let mut reaped = Vec::new();
            for candidate in candidates {
                let (job_id, number) = (candidate.int("job_id")?, candidate.int32("task")?);
                let mut tx = self.dialect().begin().await?;
                let locked = first(
                    tx.fetch(sql.lock_expired_task, args!(job_id, number, grace_us))
                        .await?,
                );
                let Some(locked) = locked else {
                    tx.rollback().await?;
                    continue;
                };
                let task = task_row(&locked)?;
                let job_state: JobState = locked.parsed("job_state")?;
                let worker_id = task.worker_id.clone().unwrap_or_default();
                let expiry = task.lease_expires_at.unwrap_or(task.created_at);
                let (state, error) = if job_state.is_terminal() {
                    (TaskState::Cancelled, JOB_ENDED.to_owned())
                } else if task.attempt < task.max_attempts {
                    (
                        TaskState::Queued,
                        format!("lost lease: worker `{worker_id}` stopped renewing it (expired {expiry})"),
                    )
                } else {
                    (
                        TaskState::Failed,
                        format!(
                            "lost lease on its last attempt ({} of {}): worker `{worker_id}` stopped renewing it (expired {expiry})",
                            task.attempt, task.max_attempts
                        ),
                    )
                };
                let args = args!(
                    job_id,
                    number,
                    state.as_str(),
                    Arg::Json(None),
                    error.as_str(),
                    0i32
                );
                tx.execute(sql.end_task, args).await?;
                tx.commit().await?;
                tracing::warn!(
                    job_id,
                    task = number,
                    worker_id = %worker_id,
                    attempt = task.attempt,
                    state = state.as_str(),
                    "reaped a task whose lease expired"
                );
                reaped.push(ReapedTask {
                    job_id: JobId(job_id),
                    task: number,
                    worker_id,
                    attempt: task.attempt,
                    state,
                });
            }
            let orphans = self
                .dialect()
                .execute(sql.cancel_orphan_tasks, args!(JOB_ENDED))
                .await?;
            if orphans > 0 {
                tracing::info!(tasks = orphans, "cancelled the queued tasks of jobs that ended");
            }
            Ok(reaped)
        })
        .await
    }

    /// Tasks of running jobs per state (every state present, zero when none), fleet-wide:
    /// `tablekeeper_tasks{state}`.
    pub async fn task_counts(&self) -> Result<BTreeMap<TaskState, i64>, StoreError> {
        self.measured(StoreOp::TaskCounts, async {
            let mut counts: BTreeMap<TaskState, i64> =
                TaskState::ALL.iter().map(|state| (*state, 0)).collect();
            for row in self
                .dialect()
                .fetch(self.sql().task_counts, args!())
                .await?
            {
                counts.insert(row.parsed("state")?, row.int("n")?);
            }
            Ok(counts)
        })
        .await
    }
}

/// A row of `job_tasks`.
fn task_row(r: &Record) -> Result<Task, StoreError> {
    Ok(Task {
        job_id: JobId(r.int("job_id")?),
        task: r.int32("task")?,
        state: r.parsed("state")?,
        worker_id: r.opt_text("worker_id")?,
        attempt: r.int32("attempt")?,
        max_attempts: r.int32("max_attempts")?,
        input: r.opt_json("input")?.unwrap_or_default(),
        result: r.opt_json("result")?,
        error: r.opt_text("error")?,
        lease_expires_at: r.opt_time("lease_expires_at")?,
        created_at: r.time("created_at")?,
        started_at: r.opt_time("started_at")?,
        finished_at: r.opt_time("finished_at")?,
    })
}
