//! [`JobStore`]: every job store call, written once over a [`Dialect`], measured inside.
//!
//! What we store, and why: one row per requested job in `jobs`, one row per claim in
//! `job_attempts`, the history of every table in `table_commits`, the stale writes found in
//! `stale_writes`, the API's pause overrides in `table_pauses`, and what replicas share to
//! split probing (`replicas`, `table_probes`; `probes.rs`) (`migrations/*`). The
//! database enforces the two invariants (one running job per concurrency key, one queued job
//! per table and operation) with partial unique indexes, so correctness does not depend on
//! replicas agreeing; this driver only has to retry the races those indexes expose.
//!
//! Each call is one statement or one short transaction, never held across a Delta
//! operation, and runs inside [`JobStore::measured`]: timed, bounded by the call timeout,
//! logged on failure and reported to the [`StoreObserver`] under its [`StoreOp`]. The SQL
//! texts live in each dialect (`postgres/sql.rs`, `sqlite/sql.rs`) under the names of
//! [`Statements`]; adding a store call means a method here, a [`StoreOp`], a field of
//! [`Statements`], and its text in both dialects.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tablekeeper_vocab::{AttemptOutcome, JobId, JobState, Lease, Operation, Trigger};
use uuid::Uuid;

use crate::dialect::{args, Arg, Backend, Dialect, Record, Statements, Tx};
use crate::error::StoreError;
use crate::history::{
    clamp_history_limit, CommitRow, ForeignRewriteRow, StaleWriteCount, StaleWriteRow,
    HISTORY_BATCH,
};
use crate::lifecycle::{self, Applied, Plan};
use crate::model::{
    Attempt, ClaimOutcome, ClaimedJob, Enqueued, FailOutcome, FailureKind, FailureStreak, Job,
    JobFilter, KeyWait, LastSuccess, NewJob, ReapedJob,
};
use crate::pins::TablePin;
use crate::probes::{ProbeRow, FORGET_REPLICAS_AFTER};
use crate::retry::RetryPolicy;

/// Names of the invariant indexes (`migrations/*/0001_jobs.sql`).
const ONE_RUNNING_PER_KEY: &str = "jobs_one_running_per_key";
const ONE_QUEUED_PER_TABLE_OPERATION: &str = "jobs_one_queued_per_table_operation";

/// How many times a call retries after losing a race with another replica before it gives
/// up with `Contention`. Each retry means a competing transaction committed, so a handful
/// suffices; the bound only keeps a pathological loop finite.
const MAX_RACE_RETRIES: usize = 8;

/// Upper bound of key waits one claim reports: enough for metrics, bounded so a backlog of
/// blocked jobs cannot make each claim read the whole queue.
const MAX_KEY_WAITS: i64 = 100;

/// Upper bound of expired jobs one `reap_expired` call handles; the next call takes the rest.
const MAX_REAP_BATCH: i64 = 100;

tablekeeper_vocab::closed_set! {
    /// A store call, for timing and error counting (the `op` label of the store metrics).
    pub enum StoreOp as "store call" {
        Migrate => "migrate",
        Ping => "ping",
        Enqueue => "enqueue",
        Claim => "claim",
        Heartbeat => "heartbeat",
        Complete => "complete",
        KeepSpent => "keep_spent",
        Fail => "fail",
        Release => "release",
        Defer => "defer",
        ReapExpired => "reap_expired",
        Cancel => "cancel",
        GetJob => "get_job",
        ListJobs => "list_jobs",
        Attempts => "attempts",
        CountsByState => "counts_by_state",
        ActiveCounts => "active_counts",
        LastSuccess => "last_success",
        FailureStreaks => "failure_streaks",
        SetPaused => "set_paused",
        PausedOverrides => "paused_overrides",
        AddPin => "add_pin",
        Pins => "pins",
        RemovePin => "remove_pin",
        RecordCommits => "record_commits",
        History => "history",
        RecordedRange => "recorded_range",
        HistoryGaps => "history_gaps",
        RecordStaleWrites => "record_stale_writes",
        ForeignRewrites => "foreign_rewrites",
        StaleWrites => "stale_writes",
        StaleWriteCounts => "stale_write_counts",
        BeatReplica => "beat_replica",
        LeaveReplica => "leave_replica",
        RecordProbe => "record_probe",
        ProbesSince => "probes_since",
        RecordFigures => "record_figures",
        Figures => "figures",
        RecordFleetHealth => "record_fleet_health",
        FleetHealth => "fleet_health",
        FinishedJobs => "finished_jobs",
        RecordProbeCosts => "record_probe_costs",
        ProbeCosts => "probe_costs",
        AddTasks => "add_tasks",
        Tasks => "tasks",
        ClaimTask => "claim_task",
        HeartbeatTask => "heartbeat_task",
        EndTask => "end_task",
        ReleaseTask => "release_task",
        ReapTasks => "reap_tasks",
        BudgetRound => "budget_round",
        SetEstimate => "set_estimate",
        BudgetQueue => "budget_queue",
        BudgetSpent => "budget_spent",
        BudgetReport => "budget_report",
        EstimatesAndCosts => "estimates_and_costs",
        TaskCounts => "task_counts",
    }
}

/// Receives every store call's duration and error. Implement it to export metrics; it is
/// called on the caller's task, so keep it cheap and non-blocking.
pub trait StoreObserver: Send + Sync + fmt::Debug {
    fn observe(&self, backend: Backend, op: StoreOp, elapsed: Duration, error: Option<&StoreError>);
}

/// The job table. See the crate docs for the lifecycle and the lease rules.
#[derive(Debug)]
pub struct JobStore {
    dialect: Box<dyn Dialect>,
    observer: Option<Arc<dyn StoreObserver>>,
    call_timeout: Option<Duration>,
}

impl JobStore {
    pub(crate) fn new(
        dialect: Box<dyn Dialect>,
        observer: Option<Arc<dyn StoreObserver>>,
        call_timeout: Option<Duration>,
    ) -> Self {
        JobStore {
            dialect,
            observer,
            call_timeout,
        }
    }

    pub fn backend(&self) -> Backend {
        self.dialect.backend()
    }

    pub(crate) fn sql(&self) -> &'static Statements {
        self.dialect.statements()
    }

    pub(crate) fn dialect(&self) -> &dyn Dialect {
        self.dialect.as_ref()
    }

    /// Runs one store call: bounded by the call timeout (a call with no answer is dropped,
    /// so its transaction never commits half-way), timed, logged when it fails, reported to
    /// the observer.
    pub(crate) async fn measured<T>(
        &self,
        op: StoreOp,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let started = Instant::now();
        let result = match self.call_timeout {
            // migrations may legitimately run long on a big job table
            Some(limit) if op != StoreOp::Migrate => tokio::time::timeout(limit, call)
                .await
                .unwrap_or_else(|_| Err(StoreError::no_answer(limit))),
            _ => call.await,
        };
        let elapsed = started.elapsed();
        let backend = self.backend();
        match &result {
            Err(err) => tracing::warn!(
                backend = backend.as_str(),
                op = op.as_str(),
                elapsed_ms = elapsed.as_millis() as u64,
                retryable = err.is_retryable(),
                error = %err,
                "job store call failed"
            ),
            Ok(_) => tracing::trace!(
                backend = backend.as_str(),
                op = op.as_str(),
                elapsed_ms = elapsed.as_millis() as u64,
                "job store call"
            ),
        }
        if let Some(observer) = &self.observer {
            observer.observe(backend, op, elapsed, result.as_ref().err());
        }
        result
    }

    pub(crate) async fn jobs(
        &self,
        sql: &'static str,
        args: Vec<Arg>,
    ) -> Result<Vec<Job>, StoreError> {
        self.dialect
            .fetch(sql, args)
            .await?
            .iter()
            .map(job_row)
            .collect()
    }

    async fn first_job(
        &self,
        sql: &'static str,
        args: Vec<Arg>,
    ) -> Result<Option<Job>, StoreError> {
        first(self.dialect.fetch(sql, args).await?)
            .as_ref()
            .map(job_row)
            .transpose()
    }

    // ------------------------------------------------------------------ lifecycle

    /// Applies the embedded migrations (idempotent; on Postgres, replicas migrating at once
    /// serialize on an advisory lock).
    pub async fn migrate(&self) -> Result<(), StoreError> {
        self.measured(StoreOp::Migrate, self.dialect.migrate())
            .await
    }

    /// Cheap reachability check (`SELECT 1`), for `/readyz`.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.measured(StoreOp::Ping, async {
            self.dialect.fetch("SELECT 1", args!()).await.map(drop)
        })
        .await
    }

    /// Queues a job, or joins the queued job for the same (table, operation).
    ///
    /// Joining a queued job changes nothing for a `schedule` trigger (a cron tick must not
    /// pull a job out of its retry backoff). A `manual` trigger is a person asking for it
    /// now: the queued job gets `trigger = manual`, `priority = max(both)` and `run_at =
    /// min(both)` (the request's `run_at` defaults to now). The queued job's
    /// `concurrency_key` and `max_attempts` are kept. A scheduled job whose tick already
    /// has a job (another replica's firing of the same tick) returns that job.
    pub async fn enqueue(&self, new: NewJob) -> Result<Enqueued, StoreError> {
        self.measured(StoreOp::Enqueue, self.enqueue_script(new))
            .await
    }

    async fn enqueue_script(&self, new: NewJob) -> Result<Enqueued, StoreError> {
        new.validate()?;
        let sql = self.sql();
        let table = new.table_name.as_str();
        let operation = new.operation.as_str();
        // Three cases race here: no queued job (insert), a queued job (join it), and a queued
        // job that gets claimed between our insert and our join (loop: the next insert
        // succeeds).
        for _ in 0..MAX_RACE_RETRIES {
            let args = args!(
                table,
                operation,
                new.concurrency_key.as_str(),
                new.trigger.as_str(),
                new.priority,
                new.run_at,
                new.max_attempts,
                new.scheduled_for
            );
            if let Some(job) = self.first_job(sql.insert_queued, args).await? {
                return Ok(Enqueued { job, created: true });
            }
            let existing = match new.trigger {
                Trigger::Manual => {
                    let args = args!(table, operation, new.run_at, new.priority);
                    self.first_job(sql.join_queued_manual, args).await?
                }
                Trigger::Schedule => {
                    let args = args!(table, operation);
                    self.first_job(sql.select_queued, args).await?
                }
            };
            // No queued job: the tick's own job already left the queue (another replica's
            // firing of the same tick made it, and it runs or ran).
            let existing = match (existing, new.scheduled_for) {
                (None, Some(tick)) => {
                    let args = args!(table, operation, tick);
                    self.first_job(sql.select_tick, args).await?
                }
                (existing, _) => existing,
            };
            if let Some(job) = existing {
                return Ok(Enqueued {
                    job,
                    created: false,
                });
            }
        }
        Err(StoreError::Contention {
            detail: format!(
                "the queued job for `{table}` {operation} kept changing while enqueueing"
            ),
        })
    }

    /// Claims the best due job (`run_at <= now`, by priority desc, run_at, id) whose
    /// concurrency key has no running job, for `lease`. See [`ClaimOutcome`].
    pub async fn claim(
        &self,
        worker_id: &str,
        lease: Duration,
    ) -> Result<ClaimOutcome, StoreError> {
        self.claim_admitted(worker_id, lease, false).await
    }

    /// [`JobStore::claim`], and when `only_admitted`, only among the jobs the latest budget
    /// round admitted ([`JobStore::budget_round`]): an enforced budget's deferred jobs and
    /// the jobs no round has seen yet wait.
    pub async fn claim_admitted(
        &self,
        worker_id: &str,
        lease: Duration,
        only_admitted: bool,
    ) -> Result<ClaimOutcome, StoreError> {
        self.measured(StoreOp::Claim, async {
            let claimed = self.claim_script(worker_id, lease, only_admitted).await?;
            // The claim is committed: a failure to list key waits must not lose it.
            let key_waits = match self.key_waits(claimed.as_ref().map(|c| &c.job)).await {
                Ok(waits) => waits,
                Err(err) => {
                    tracing::warn!(error = %err, "listing concurrency key waits failed");
                    Vec::new()
                }
            };
            Ok(ClaimOutcome {
                job: claimed,
                key_waits,
            })
        })
        .await
    }

    async fn claim_script(
        &self,
        worker_id: &str,
        lease: Duration,
        only_admitted: bool,
    ) -> Result<Option<ClaimedJob>, StoreError> {
        let sql = self.sql();
        let lease_us = micros(lease, "lease")?;
        // Jobs whose claim lost a race on the running-key index in this call: another
        // replica claimed a job with the same key between our check and our update.
        let mut raced: Vec<i64> = Vec::new();
        for _ in 0..MAX_RACE_RETRIES {
            let mut tx = self.dialect.begin().await?;
            let candidate_sql = if only_admitted {
                sql.claim_candidate_admitted
            } else {
                sql.claim_candidate
            };
            let candidate = first(
                tx.fetch(
                    candidate_sql,
                    args!(Arg::Json(Some(serde_json::json!(raced)))),
                )
                .await?,
            );
            let Some(id) = candidate.map(|r| r.int("id")).transpose()? else {
                tx.rollback().await?;
                return Ok(None);
            };
            let token = Uuid::new_v4();
            let update = args!(id, worker_id, token, lease_us);
            let attempt = match tx.fetch(sql.claim_update, update).await {
                Ok(rows) => one(rows, "claim")?.int32("attempt")?,
                Err(err) if err.constraint() == Some(ONE_RUNNING_PER_KEY) => {
                    tx.rollback().await?;
                    raced.push(id);
                    continue;
                }
                Err(err) => return Err(err),
            };
            let stray = args!(id, lifecycle::STRAY_ATTEMPT_ERROR);
            tx.execute(sql.close_stray_attempts, stray).await?;
            let start = args!(id, attempt, worker_id, token, lease_us);
            tx.execute(sql.start_attempt, start).await?;
            let job = job_row(&one(tx.fetch(sql.get_job, args!(id)).await?, "claim")?)?;
            tx.commit().await?;
            let lease_expires_at = job.lease_expires_at.ok_or_else(|| {
                StoreError::Corrupt(format!("claimed job {} has no lease expiry", job.id))
            })?;
            return Ok(Some(ClaimedJob {
                lease: Lease::new(job.id, token),
                job,
                lease_expires_at,
            }));
        }
        Ok(None)
    }

    /// Due jobs ranked ahead of `claimed` whose key is held (see [`ClaimOutcome`]).
    async fn key_waits(&self, claimed: Option<&Job>) -> Result<Vec<KeyWait>, StoreError> {
        let args = args!(
            claimed.map(|j| j.id.0),
            Arg::Int32(claimed.map(|j| j.priority)),
            claimed.map(|j| j.run_at),
            MAX_KEY_WAITS
        );
        self.dialect
            .fetch(self.sql().key_waits, args)
            .await?
            .iter()
            .map(|r| {
                Ok(KeyWait {
                    job_id: JobId(r.int("id")?),
                    table_name: r.text("table_name")?,
                    operation: r.parsed("operation")?,
                    concurrency_key: r.text("concurrency_key")?,
                })
            })
            .collect()
    }

    /// Extends the lease to database-now + `lease` if it still holds.
    /// `None`: the lease is lost (reaped, released, or finished); abandon the work.
    pub async fn heartbeat(
        &self,
        held: &Lease,
        lease: Duration,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.measured(StoreOp::Heartbeat, async {
            let args = args!(held.job.0, held.token, micros(lease, "lease")?);
            first(self.dialect.fetch(self.sql().heartbeat, args).await?)
                .map(|r| r.time("lease_expires_at"))
                .transpose()
        })
        .await
    }

    /// Marks the job succeeded with `result`, fenced by the lease. `false`: the lease does
    /// not hold and nothing changed. Idempotent: repeating a completion that already took
    /// effect (its reply was lost) returns `true` again.
    pub async fn complete(
        &self,
        held: &Lease,
        result: serde_json::Value,
    ) -> Result<bool, StoreError> {
        self.measured(StoreOp::Complete, async {
            let sql = self.sql();
            let mut tx = self.dialect.begin().await?;
            let args = args!(held.job.0, held.token, Arg::Json(Some(result)));
            if first(tx.fetch(sql.complete, args).await?).is_some() {
                let close = args!(
                    held.job.0,
                    AttemptOutcome::Succeeded.as_str(),
                    Arg::Text(None)
                );
                tx.execute(sql.close_attempt, close).await?;
                tx.commit().await?;
                return Ok(true);
            }
            tx.rollback().await?;
            // A retry of a completion whose reply was lost finds its own successful attempt.
            let args = args!(held.job.0, held.token);
            Ok(!self
                .dialect
                .fetch(sql.completed_by_token, args)
                .await?
                .is_empty())
        })
        .await
    }

    /// Writes `result` (what the attempts so far spent, and whom it is charged to) to a job
    /// whose attempt ends without success, fenced by the lease, before the attempt is failed,
    /// released or deferred: the next attempt adds to it, and a job that ends failed or
    /// cancelled keeps it. `false`: the lease does not hold and nothing changed.
    pub async fn keep_spent(
        &self,
        held: &Lease,
        result: serde_json::Value,
    ) -> Result<bool, StoreError> {
        self.measured(StoreOp::KeepSpent, async {
            let args = args!(held.job.0, held.token, Arg::Json(Some(result)));
            Ok(first(self.dialect.fetch(self.sql().keep_spent, args).await?).is_some())
        })
        .await
    }

    /// Records a failed attempt, fenced by the lease: requeues with backoff while attempts
    /// remain, else `failed`. See [`FailOutcome`].
    pub async fn fail(
        &self,
        held: &Lease,
        kind: FailureKind,
        error: &str,
        retry: &RetryPolicy,
    ) -> Result<FailOutcome, StoreError> {
        self.measured(StoreOp::Fail, async {
            let applied = self
                .with_requeue_retry(|mut tx| {
                    Box::pin(async move {
                        let result = self.fail_step(&mut tx, held, kind, error, retry).await;
                        (tx, result)
                    })
                })
                .await?;
            Ok(match applied {
                None => FailOutcome::LeaseLost,
                Some(Applied::Requeued { run_at }) => FailOutcome::Retrying { run_at },
                Some(Applied::Failed) => FailOutcome::Failed,
                Some(Applied::Superseded { queued_job_id }) => {
                    FailOutcome::Superseded { queued_job_id }
                }
            })
        })
        .await
    }

    async fn fail_step(
        &self,
        tx: &mut Box<dyn Tx>,
        held: &Lease,
        kind: FailureKind,
        error: &str,
        retry: &RetryPolicy,
    ) -> Result<Option<Applied>, StoreError> {
        let Some(job) = self.lock_leased(tx, held).await? else {
            return Ok(None);
        };
        self.close_attempt(tx, job.id, kind.outcome(), Some(error))
            .await?;
        let plan = {
            // ThreadRng is not Send: keep it out of the awaits below.
            let mut rng = rand::rng();
            lifecycle::after_failure(kind, job.attempt, job.max_attempts, retry, &mut rng)
        };
        self.apply(tx, &job, plan, Some(error), error)
            .await
            .map(Some)
    }

    /// Graceful shutdown: gives the job back (queued, due now, attempt not consumed) and
    /// closes the attempt as `cancelled` with `reason`. `false`: the lease did not hold. If
    /// a newer queued job exists for the same (table, operation) this job is cancelled as
    /// superseded instead (still `true`).
    pub async fn release(&self, held: &Lease, reason: &str) -> Result<bool, StoreError> {
        self.measured(
            StoreOp::Release,
            self.give_back(held, reason, lifecycle::AFTER_RELEASE),
        )
        .await
    }

    /// Gives the job back like [`JobStore::release`], but due only `delay` from now
    /// (database clock): the worker found it may not run yet (for example inside a table's
    /// overwrite window). The attempt is closed as `cancelled` with `reason`, not consumed.
    pub async fn defer(
        &self,
        held: &Lease,
        reason: &str,
        delay: Duration,
    ) -> Result<bool, StoreError> {
        self.measured(
            StoreOp::Defer,
            self.give_back(held, reason, lifecycle::after_deferral(delay)),
        )
        .await
    }

    /// Closes the attempt as cancelled with `reason` and requeues the job by `plan`, if the
    /// lease still holds.
    async fn give_back(&self, held: &Lease, reason: &str, plan: Plan) -> Result<bool, StoreError> {
        let applied = self
            .with_requeue_retry(|mut tx| {
                Box::pin(async move {
                    let result = self.give_back_step(&mut tx, held, reason, plan).await;
                    (tx, result)
                })
            })
            .await?;
        Ok(applied.is_some())
    }

    async fn give_back_step(
        &self,
        tx: &mut Box<dyn Tx>,
        held: &Lease,
        reason: &str,
        plan: Plan,
    ) -> Result<Option<Applied>, StoreError> {
        let Some(job) = self.lock_leased(tx, held).await? else {
            return Ok(None);
        };
        self.close_attempt(tx, job.id, AttemptOutcome::Cancelled, Some(reason))
            .await?;
        self.apply(tx, &job, plan, None, reason).await.map(Some)
    }

    /// Takes back running jobs whose lease expired more than `grace` ago (database clock):
    /// closes the attempt as `lost_lease`, requeues (due now) or fails when out of
    /// attempts. Safe to run from every replica at once: each job is reaped once.
    pub async fn reap_expired(&self, grace: Duration) -> Result<Vec<ReapedJob>, StoreError> {
        self.measured(StoreOp::ReapExpired, async {
            let grace_us = micros(grace, "grace")?;
            let args = args!(grace_us, MAX_REAP_BATCH);
            let candidates = self.dialect.fetch(self.sql().reap_candidates, args).await?;
            let mut reaped = Vec::new();
            for candidate in candidates {
                let id = candidate.int("id")?;
                match self.reap_one(id, grace_us).await {
                    Ok(Some(job)) => {
                        tracing::warn!(
                            job_id = job.job_id.0,
                            table = %job.table_name,
                            operation = %job.operation,
                            worker_id = %job.worker_id,
                            attempt = job.attempt,
                            requeued = job.requeued,
                            "reaped a job whose lease expired"
                        );
                        reaped.push(job);
                    }
                    Ok(None) => {}
                    // The database is gone: stop, the next round retries everything.
                    Err(err) if err.is_retryable() => return Err(err),
                    // One bad row must not stop the reaper for every other job.
                    Err(err) => tracing::error!(job_id = id, error = %err, "reaping a job failed"),
                }
            }
            Ok(reaped)
        })
        .await
    }

    async fn reap_one(&self, id: i64, grace_us: i64) -> Result<Option<ReapedJob>, StoreError> {
        self.with_requeue_retry(|mut tx| {
            Box::pin(async move {
                let result = self.reap_step(&mut tx, id, grace_us).await;
                (tx, result)
            })
        })
        .await
    }

    async fn reap_step(
        &self,
        tx: &mut Box<dyn Tx>,
        id: i64,
        grace_us: i64,
    ) -> Result<Option<ReapedJob>, StoreError> {
        // Re-checked under the row lock: the worker may have renewed, or another
        // replica's reaper may hold or have finished this job.
        let args = args!(id, grace_us);
        let Some(job) = first(tx.fetch(self.sql().lock_expired, args).await?)
            .as_ref()
            .map(job_row)
            .transpose()?
        else {
            return Ok(None);
        };
        let worker_id = job.worker_id.clone().unwrap_or_default();
        let expiry = job.lease_expires_at.unwrap_or(job.run_at);
        let attempt_error = lifecycle::lost_lease_error(&worker_id, expiry);
        self.close_attempt(tx, job.id, AttemptOutcome::LostLease, Some(&attempt_error))
            .await?;
        let plan = lifecycle::after_lost_lease(job.attempt, job.max_attempts);
        let fail_error =
            lifecycle::lost_lease_exhausted_error(&attempt_error, job.attempt, job.max_attempts);
        let applied = self
            .apply(tx, &job, plan, Some(&attempt_error), &fail_error)
            .await?;
        Ok(Some(ReapedJob {
            job_id: job.id,
            table_name: job.table_name,
            operation: job.operation,
            worker_id,
            attempt: job.attempt,
            lease_expires_at: expiry,
            requeued: matches!(applied, Applied::Requeued { .. }),
            superseded_by: match applied {
                Applied::Superseded { queued_job_id } => Some(queued_job_id),
                _ => None,
            },
        }))
    }

    /// Cancels a queued job. `false` if the job exists but is not queued: a running job
    /// cannot be cancelled here, because only its worker may stop its operation (it holds
    /// the lease); it finishes or fails on its own. `NotFound` if there is no such job.
    pub async fn cancel(&self, id: JobId) -> Result<bool, StoreError> {
        self.measured(StoreOp::Cancel, async {
            let args = args!(id.0, lifecycle::CANCELLED_WHILE_QUEUED);
            if self.dialect.execute(self.sql().cancel_queued, args).await? == 1 {
                return Ok(true);
            }
            match self.first_job(self.sql().get_job, args!(id.0)).await? {
                Some(_) => Ok(false),
                None => Err(StoreError::NotFound { id }),
            }
        })
        .await
    }

    // ------------------------------------------------------- transaction steps

    /// Runs `body` in a transaction, retrying when it lost a race on the queued index.
    /// `body` returns `Ok(None)` to roll back and stop (e.g. the lease is gone).
    async fn with_requeue_retry<'a, T>(
        &'a self,
        mut body: impl FnMut(Box<dyn Tx>) -> TxBody<'a, T>,
    ) -> Result<Option<T>, StoreError> {
        for _ in 0..MAX_RACE_RETRIES {
            let tx = self.dialect.begin().await?;
            let (tx, result) = body(tx).await;
            match result {
                Ok(Some(value)) => {
                    tx.commit().await?;
                    return Ok(Some(value));
                }
                Ok(None) => {
                    tx.rollback().await?;
                    return Ok(None);
                }
                Err(err) if err.constraint() == Some(ONE_QUEUED_PER_TABLE_OPERATION) => {
                    tx.rollback().await?;
                }
                Err(err) => return Err(err),
            }
        }
        Err(StoreError::Contention {
            detail: "requeue kept colliding with concurrent enqueues".to_owned(),
        })
    }

    /// The job, locked, if `held` still holds its lease.
    async fn lock_leased(
        &self,
        tx: &mut Box<dyn Tx>,
        held: &Lease,
    ) -> Result<Option<Job>, StoreError> {
        let args = args!(held.job.0, held.token);
        first(tx.fetch(self.sql().lock_leased, args).await?)
            .as_ref()
            .map(job_row)
            .transpose()
    }

    async fn close_attempt(
        &self,
        tx: &mut Box<dyn Tx>,
        id: JobId,
        outcome: AttemptOutcome,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let args = args!(id.0, outcome.as_str(), error);
        tx.execute(self.sql().close_attempt, args).await.map(drop)
    }

    /// Executes `plan` for `job` (locked, attempt already closed) inside `tx`.
    /// `requeue_error`: new `jobs.error` when requeued (`None` keeps it); `fail_error`:
    /// `jobs.error` when failed.
    ///
    /// A job enqueued between our check and our update makes the update hit the queued
    /// index; [`Self::with_requeue_retry`] then runs the whole transaction again.
    async fn apply(
        &self,
        tx: &mut Box<dyn Tx>,
        job: &Job,
        plan: Plan,
        requeue_error: Option<&str>,
        fail_error: &str,
    ) -> Result<Applied, StoreError> {
        let sql = self.sql();
        let finish =
            |state: JobState, error: String| args!(job.id.0, state.as_str(), error.as_str());
        match plan {
            Plan::Fail => {
                tx.execute(sql.finish, finish(JobState::Failed, fail_error.to_owned()))
                    .await?;
                Ok(Applied::Failed)
            }
            Plan::Requeue {
                delay,
                give_back_attempt,
            } => {
                let args = args!(job.table_name.as_str(), job.operation.as_str(), job.id.0);
                if let Some(other) = first(tx.fetch(sql.other_queued, args).await?) {
                    let queued_job_id = JobId(other.int("id")?);
                    let error = lifecycle::superseded_error(queued_job_id);
                    tx.execute(sql.finish, finish(JobState::Cancelled, error))
                        .await?;
                    return Ok(Applied::Superseded { queued_job_id });
                }
                // Delays come from RetryPolicy (capped) or are zero; saturate rather than
                // fail on an absurd cap.
                let delay_us = i64::try_from(delay.as_micros()).unwrap_or(i64::MAX / 2);
                let args = args!(
                    job.id.0,
                    delay_us,
                    i32::from(give_back_attempt),
                    requeue_error
                );
                let run_at = one(tx.fetch(sql.requeue, args).await?, "requeue")?.time("run_at")?;
                Ok(Applied::Requeued { run_at })
            }
        }
    }

    // ------------------------------------------------------------------ reads

    pub async fn get_job(&self, id: JobId) -> Result<Option<Job>, StoreError> {
        self.measured(
            StoreOp::GetJob,
            self.first_job(self.sql().get_job, args!(id.0)),
        )
        .await
    }

    /// Jobs matching `filter`, newest (highest id) first.
    pub async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<Job>, StoreError> {
        let args = args!(
            filter.table.as_deref(),
            filter.state.map(JobState::as_str),
            filter.clamped_limit(),
            filter.operation.map(Operation::as_str)
        );
        self.measured(StoreOp::ListJobs, self.jobs(self.sql().list_jobs, args))
            .await
    }

    /// The attempts of a job, oldest first. `NotFound` if there is no such job.
    pub async fn attempts(&self, id: JobId) -> Result<Vec<Attempt>, StoreError> {
        self.measured(StoreOp::Attempts, async {
            let attempts = self
                .dialect
                .fetch(self.sql().attempts, args!(id.0))
                .await?
                .iter()
                .map(attempt_row)
                .collect::<Result<Vec<_>, _>>()?;
            if attempts.is_empty()
                && self
                    .first_job(self.sql().get_job, args!(id.0))
                    .await?
                    .is_none()
            {
                return Err(StoreError::NotFound { id });
            }
            Ok(attempts)
        })
        .await
    }

    /// Number of jobs per state; every state is present (0 if none). Reads every job: for
    /// operators and tests; the replicas' gauges read [`JobStore::active_counts`].
    pub async fn counts_by_state(&self) -> Result<BTreeMap<JobState, i64>, StoreError> {
        self.measured(
            StoreOp::CountsByState,
            self.state_counts(self.sql().counts_by_state, JobState::ALL.iter().copied()),
        )
        .await
    }

    /// Jobs queued and running, fleet-wide (`tablekeeper_jobs`); both states present (0 if
    /// none). Reads the active jobs only (`jobs_active`), never the finished history.
    pub async fn active_counts(&self) -> Result<BTreeMap<JobState, i64>, StoreError> {
        self.measured(
            StoreOp::ActiveCounts,
            self.state_counts(
                self.sql().active_counts,
                [JobState::Queued, JobState::Running],
            ),
        )
        .await
    }

    /// The counts `sql` answers (columns `state`, `n`), every state of `states` present.
    async fn state_counts(
        &self,
        sql: &'static str,
        states: impl IntoIterator<Item = JobState>,
    ) -> Result<BTreeMap<JobState, i64>, StoreError> {
        let mut counts: BTreeMap<JobState, i64> = states.into_iter().map(|s| (s, 0)).collect();
        for r in self.dialect.fetch(sql, args!()).await? {
            counts.insert(r.parsed("state")?, r.int("n")?);
        }
        Ok(counts)
    }

    /// The latest successful finish per (table, operation), ordered by table, operation.
    pub async fn last_success(&self) -> Result<Vec<LastSuccess>, StoreError> {
        self.measured(StoreOp::LastSuccess, async {
            self.dialect
                .fetch(self.sql().last_success, args!())
                .await?
                .iter()
                .map(|r| {
                    Ok(LastSuccess {
                        table_name: r.text("table_name")?,
                        operation: r.parsed("operation")?,
                        finished_at: r.time("finished_at")?,
                    })
                })
                .collect()
        })
        .await
    }

    /// Failed attempts per (table, operation) since its last successful attempt, whichever
    /// replica ran them; pairs without such failures are left out. Ordered by table,
    /// operation.
    pub async fn failure_streaks(&self) -> Result<Vec<FailureStreak>, StoreError> {
        self.measured(StoreOp::FailureStreaks, async {
            self.dialect
                .fetch(self.sql().failure_streaks, args!())
                .await?
                .iter()
                .map(|r| {
                    Ok(FailureStreak {
                        table_name: r.text("table_name")?,
                        operation: r.parsed("operation")?,
                        failures: r.int("failures")?,
                        last_failed_at: r.time("last_failed_at")?,
                        last_error: r.opt_text("last_error")?,
                    })
                })
                .collect()
        })
        .await
    }

    /// Records an API pause (`true`) or resume (`false`) of a table for every replica.
    pub async fn set_paused(&self, table: &str, paused: bool) -> Result<(), StoreError> {
        self.measured(StoreOp::SetPaused, async {
            let args = args!(table, paused);
            self.dialect
                .execute(self.sql().set_paused, args)
                .await
                .map(drop)
        })
        .await
    }

    /// Pause overrides set through the API, by table name.
    pub async fn paused_overrides(&self) -> Result<BTreeMap<String, bool>, StoreError> {
        self.measured(StoreOp::PausedOverrides, async {
            self.dialect
                .fetch(self.sql().paused_overrides, args!())
                .await?
                .iter()
                .map(|r| Ok((r.text("table_name")?, r.bool("paused")?)))
                .collect()
        })
        .await
    }

    // ------------------------------------------------------------------ pins

    /// Pins `version` of `table` until `until` for every replica; pinning a version again
    /// replaces its `until`, reason and author. Returns the stored pin.
    pub async fn add_pin(
        &self,
        table: &str,
        version: i64,
        until: DateTime<Utc>,
        reason: &str,
        created_by: &str,
    ) -> Result<TablePin, StoreError> {
        self.measured(StoreOp::AddPin, async {
            let rows = self
                .dialect
                .fetch(
                    self.sql().add_pin,
                    args!(table, version, until, reason, created_by),
                )
                .await?;
            let row = rows.first().ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "the pin of `{table}` version {version} was not returned"
                ))
            })?;
            pin_of(row)
        })
        .await
    }

    /// Every API pin (expired ones too), of one table or of all, by table then version.
    pub async fn pins(&self, table: Option<&str>) -> Result<Vec<TablePin>, StoreError> {
        self.measured(StoreOp::Pins, async {
            self.dialect
                .fetch(self.sql().pins, args!(table))
                .await?
                .iter()
                .map(pin_of)
                .collect()
        })
        .await
    }

    /// Removes the pin of `version`; whether there was one.
    pub async fn remove_pin(&self, table: &str, version: i64) -> Result<bool, StoreError> {
        self.measured(StoreOp::RemovePin, async {
            let n = self
                .dialect
                .execute(self.sql().remove_pin, args!(table, version))
                .await?;
            Ok(n > 0)
        })
        .await
    }

    // ------------------------------------------------------------------ history

    /// Copies commits of `table` into `table_commits`. Versions already recorded (by this
    /// or another replica) are left untouched. Returns how many rows were new.
    pub async fn record_commits(
        &self,
        table: &str,
        commits: &[CommitRow],
    ) -> Result<u64, StoreError> {
        self.measured(StoreOp::RecordCommits, async {
            let mut inserted = 0;
            for batch in commits.chunks(HISTORY_BATCH) {
                let mut tx = self.dialect.begin().await?;
                for c in batch {
                    let args = args!(
                        table,
                        c.version,
                        c.timestamp,
                        c.operation.as_deref(),
                        Arg::Json(c.operation_parameters.clone()),
                        Arg::Json(c.operation_metrics.clone()),
                        c.engine_info.as_deref(),
                        c.user_name.as_deref(),
                        c.is_blind_append,
                        c.rewrite,
                        c.tablekeeper_operation.as_deref()
                    );
                    inserted += tx.execute(self.sql().insert_commit, args).await?;
                }
                tx.commit().await?;
            }
            Ok(inserted)
        })
        .await
    }

    /// The recorded history of `table`, newest first: at most `limit` (clamped to
    /// 1..=[`crate::MAX_HISTORY_LIMIT`]) commits with a version below `before`, if given.
    pub async fn history(
        &self,
        table: &str,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<CommitRow>, StoreError> {
        self.measured(StoreOp::History, async {
            let args = args!(table, before, clamp_history_limit(limit));
            self.dialect
                .fetch(self.sql().history, args)
                .await?
                .iter()
                .map(|r| {
                    Ok(CommitRow {
                        version: r.int("version")?,
                        timestamp: r.time("timestamp")?,
                        operation: r.opt_text("operation")?,
                        operation_parameters: r.opt_json("operation_parameters")?,
                        operation_metrics: r.opt_json("operation_metrics")?,
                        engine_info: r.opt_text("engine_info")?,
                        user_name: r.opt_text("user_name")?,
                        is_blind_append: r.opt_bool("is_blind_append")?,
                        rewrite: r.opt_bool("rewrite")?,
                        tablekeeper_operation: r.opt_text("tablekeeper_operation")?,
                    })
                })
                .collect()
        })
        .await
    }

    /// The versions of `table` recorded without a hole from its oldest recorded one:
    /// `(oldest, through)`. `None` when nothing is recorded. Log cleanup deletes only these.
    pub async fn recorded_range(&self, table: &str) -> Result<Option<(i64, i64)>, StoreError> {
        self.measured(StoreOp::RecordedRange, async {
            let rows = self
                .dialect
                .fetch(self.sql().recorded_range, args!(table))
                .await?;
            let r = one(rows, "recorded range")?;
            Ok(r.opt_int("oldest")?.zip(r.opt_int("through")?))
        })
        .await
    }

    /// Version ranges (inclusive) missing from the recorded history of `table` between
    /// version 0 and the newest recorded one: commits cleaned up from the log before any
    /// replica could record them. Ascending.
    pub async fn history_gaps(&self, table: &str) -> Result<Vec<(i64, i64)>, StoreError> {
        self.measured(StoreOp::HistoryGaps, async {
            self.dialect
                .fetch(self.sql().history_gaps, args!(table))
                .await?
                .iter()
                .map(|r| Ok((r.int("gap_from")?, r.int("gap_to")?)))
                .collect()
        })
        .await
    }

    /// Records stale writes: new ones are inserted; for known ones, a missing row count and
    /// the repair commit are filled in. Returns how many were new.
    pub async fn record_stale_writes(&self, writes: &[StaleWriteRow]) -> Result<u64, StoreError> {
        self.measured(StoreOp::RecordStaleWrites, async {
            let sql = self.sql();
            let mut inserted = 0;
            let mut tx = self.dialect.begin().await?;
            for w in writes {
                let args = args!(
                    w.table_name.as_str(),
                    w.version,
                    w.committed_at,
                    w.operation.as_deref(),
                    w.engine_info.as_deref(),
                    Arg::Json(Some(serde_json::json!(w.rewrite_versions))),
                    w.files,
                    Arg::Json(Some(serde_json::json!(w.sample_files))),
                    w.rows,
                    w.over_repair,
                    w.repaired_by,
                    w.kind.map(|k| k.as_str())
                );
                inserted += tx.execute(sql.insert_stale_write, args).await?;
                let args = args!(w.table_name.as_str(), w.version, w.rows, w.repaired_by);
                tx.execute(sql.update_stale_write, args).await?;
            }
            tx.commit().await?;
            Ok(inserted)
        })
        .await
    }

    /// Every table's rewrites by engines other than tablekeeper recorded in `table_commits`
    /// (tables without one are left out), by table.
    pub async fn foreign_rewrites(&self) -> Result<Vec<ForeignRewriteRow>, StoreError> {
        self.measured(StoreOp::ForeignRewrites, async {
            self.dialect
                .fetch(self.sql().foreign_rewrites, args!())
                .await?
                .iter()
                .map(|r| {
                    Ok(ForeignRewriteRow {
                        table_name: r.text("table_name")?,
                        rewrites: r.int("rewrites")?,
                        last_version: r.int("version")?,
                        last_timestamp: r.time("timestamp")?,
                        last_operation: r.opt_text("operation")?,
                        last_engine_info: r.opt_text("engine_info")?,
                    })
                })
                .collect()
        })
        .await
    }

    /// Per table with any, how many stale writes are recorded and when the newest was
    /// detected: as many rows as such tables, whatever the history holds.
    pub async fn stale_write_counts(&self) -> Result<Vec<StaleWriteCount>, StoreError> {
        self.measured(StoreOp::StaleWriteCounts, async {
            self.dialect
                .fetch(self.sql().stale_write_counts, args!())
                .await?
                .iter()
                .map(|r| {
                    Ok(StaleWriteCount {
                        table_name: r.text("table_name")?,
                        stale_writes: r.int("stale_writes")?,
                        last_detected_at: r.opt_time("stale_write_detected_at")?,
                    })
                })
                .collect()
        })
        .await
    }

    /// Recorded stale writes of `table` (every table when `None`), by table then version.
    pub async fn stale_writes(
        &self,
        table: Option<&str>,
    ) -> Result<Vec<StaleWriteRow>, StoreError> {
        self.measured(StoreOp::StaleWrites, async {
            self.dialect
                .fetch(self.sql().stale_writes, args!(table))
                .await?
                .iter()
                .map(|r| {
                    Ok(StaleWriteRow {
                        table_name: r.text("table_name")?,
                        version: r.int("version")?,
                        committed_at: r.opt_time("committed_at")?,
                        operation: r.opt_text("operation")?,
                        engine_info: r.opt_text("engine_info")?,
                        rewrite_versions: r.json_as("rewrite_versions")?,
                        files: r.int("files")?,
                        sample_files: r.json_as("sample_files")?,
                        rows: r.opt_int("rows")?,
                        over_repair: r.bool("over_repair")?,
                        repaired_by: r.opt_int("repaired_by")?,
                        detected_at: r.opt_time("detected_at")?,
                        kind: r.opt_parsed("kind")?,
                    })
                })
                .collect()
        })
        .await
    }

    // ------------------------------------------------------------------ shared probing

    /// Marks `replica` alive, forgets replicas unseen for [`FORGET_REPLICAS_AFTER`], and
    /// returns the replicas seen within `live_within` (this one included), by id.
    pub async fn beat_replica(
        &self,
        replica: &str,
        live_within: Duration,
    ) -> Result<Vec<String>, StoreError> {
        self.measured(StoreOp::BeatReplica, async {
            let sql = self.sql();
            let mut tx = self.dialect.begin().await?;
            tx.execute(sql.beat_replica, args!(replica)).await?;
            let forget = micros(FORGET_REPLICAS_AFTER, "forget_replicas_after")?;
            tx.execute(sql.forget_replicas, args!(forget)).await?;
            tx.commit().await?;
            self.dialect
                .fetch(
                    sql.live_replicas,
                    args!(micros(live_within, "live_within")?),
                )
                .await?
                .iter()
                .map(|r| r.text("replica_id"))
                .collect()
        })
        .await
    }

    /// Removes `replica` from the live set at once (a clean shutdown), so the others take
    /// its tables over without waiting for it to age out.
    pub async fn leave_replica(&self, replica: &str) -> Result<(), StoreError> {
        self.measured(StoreOp::LeaveReplica, async {
            self.dialect
                .execute(self.sql().leave_replica, args!(replica))
                .await
                .map(drop)
        })
        .await
    }

    /// Stores a probe of a table for the other replicas, unless a newer one is stored. A
    /// failed probe (`probe` is `None`) keeps the stored facts and records the error.
    pub async fn record_probe(&self, row: &ProbeRow) -> Result<(), StoreError> {
        self.measured(StoreOp::RecordProbe, async {
            let args = args!(
                row.table_name.as_str(),
                row.replica_id.as_str(),
                row.probed_at,
                Arg::Json(row.probe.clone()),
                row.error.as_deref(),
                row.error_kind.map(|k| k.as_str())
            );
            self.dialect
                .execute(self.sql().record_probe, args)
                .await
                .map(drop)
        })
        .await
    }

    /// Up to `limit` probes stored by replicas other than `leave_out` (by every replica when
    /// `None`) after a point, oldest update first (then by table): after `after` (all when
    /// `None`), or with `after_table`, after the row (`after`, `after_table`), the last row of
    /// the previous page. Read in pages, so a replica taking in thousands of probes never holds
    /// them all at once.
    pub async fn probes_since(
        &self,
        after: Option<DateTime<Utc>>,
        after_table: Option<&str>,
        leave_out: Option<&str>,
        limit: u32,
    ) -> Result<Vec<ProbeRow>, StoreError> {
        self.measured(StoreOp::ProbesSince, async {
            self.dialect
                .fetch(
                    self.sql().probes_since,
                    args!(after, leave_out, after_table, i64::from(limit)),
                )
                .await?
                .iter()
                .map(|r| {
                    Ok(ProbeRow {
                        table_name: r.text("table_name")?,
                        replica_id: r.text("replica_id")?,
                        probed_at: r.time("probed_at")?,
                        probe: r.opt_json("probe")?,
                        error: r.opt_text("error")?,
                        error_kind: r.opt_parsed("error_kind")?,
                        updated_at: r.time("updated_at")?,
                    })
                })
                .collect()
        })
        .await
    }

    /// Closes the connection pool; calls after this fail as unavailable.
    pub async fn close(&self) {
        self.dialect.close().await;
    }
}

/// A transaction body: it gets the transaction and hands it back with what it did, so it
/// may borrow the store and the caller's arguments.
type TxBody<'a, T> = std::pin::Pin<
    Box<dyn Future<Output = (Box<dyn Tx>, Result<Option<T>, StoreError>)> + Send + 'a>,
>;

pub(crate) fn first(rows: Vec<Record>) -> Option<Record> {
    rows.into_iter().next()
}

/// The one row a statement must return.
pub(crate) fn one(rows: Vec<Record>, what: &str) -> Result<Record, StoreError> {
    first(rows).ok_or_else(|| StoreError::Corrupt(format!("{what} returned no row")))
}

/// A duration as whole microseconds (Postgres timestamp precision).
pub(crate) fn micros(duration: Duration, what: &str) -> Result<i64, StoreError> {
    i64::try_from(duration.as_micros())
        .map_err(|_| StoreError::InvalidInput(format!("`{what}` of {duration:?} is too long")))
}

/// A row of `jobs`.
pub(crate) fn job_row(r: &Record) -> Result<Job, StoreError> {
    Ok(Job {
        id: JobId(r.int("id")?),
        table_name: r.text("table_name")?,
        operation: r.parsed("operation")?,
        concurrency_key: r.text("concurrency_key")?,
        state: r.parsed("state")?,
        trigger: r.parsed("trigger")?,
        priority: r.int32("priority")?,
        run_at: r.time("run_at")?,
        attempt: r.int32("attempt")?,
        max_attempts: r.int32("max_attempts")?,
        worker_id: r.opt_text("worker_id")?,
        lease_token: r.opt_uuid("lease_token")?,
        lease_expires_at: r.opt_time("lease_expires_at")?,
        created_at: r.time("created_at")?,
        started_at: r.opt_time("started_at")?,
        finished_at: r.opt_time("finished_at")?,
        result: r.opt_json("result")?,
        error: r.opt_text("error")?,
        estimate: r.opt_json("estimate")?,
    })
}

/// A row of `job_attempts`.
fn attempt_row(r: &Record) -> Result<Attempt, StoreError> {
    Ok(Attempt {
        id: r.int("id")?,
        job_id: JobId(r.int("job_id")?),
        attempt: r.int32("attempt")?,
        worker_id: r.text("worker_id")?,
        lease_token: r.opt_uuid("lease_token")?,
        started_at: r.time("started_at")?,
        finished_at: r.opt_time("finished_at")?,
        outcome: r.opt_parsed("outcome")?,
        error: r.opt_text("error")?,
    })
}

fn pin_of(r: &Record) -> Result<TablePin, StoreError> {
    Ok(TablePin {
        table_name: r.text("table_name")?,
        version: r.int("version")?,
        until: r.time("until")?,
        reason: r.text("reason")?,
        created_at: r.time("created_at")?,
        created_by: r.text("created_by")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_refuses_absurd_durations() {
        assert_eq!(
            micros(Duration::from_millis(1500), "lease").unwrap(),
            1_500_000
        );
        assert!(micros(Duration::MAX, "lease").is_err());
    }

    #[test]
    fn every_store_op_has_a_distinct_label() {
        let names: std::collections::BTreeSet<_> =
            StoreOp::ALL.iter().map(|op| op.as_str()).collect();
        assert_eq!(names.len(), StoreOp::ALL.len());
    }
}
