//! The Postgres job store: the production backend, shared by every replica.
//!
//! What we store, and why: one row per requested job in `jobs` and one row per claim in
//! `job_attempts` (see `migrations/postgres/0001_jobs.sql`). Postgres enforces the two
//! invariants (one running job per concurrency key, one queued job per table and
//! operation) with partial unique indexes, so correctness does not depend on replicas
//! agreeing. Claims lock with `FOR UPDATE SKIP LOCKED`; every call is one statement or one
//! transaction of a few statements, never held across a Delta operation.

mod sql;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::types::Json;
use sqlx::{Postgres, Row, Transaction};
use uuid::Uuid;

use crate::error::StoreError;
use crate::history::{clamp_history_limit, CommitRow, StaleWriteRow, HISTORY_BATCH};
use crate::lifecycle::{self, Applied, Plan};
use crate::model::{
    Attempt, AttemptOutcome, ClaimOutcome, ClaimedJob, Enqueued, FailOutcome, FailureKind,
    FailureStreak, Job, JobFilter, JobState, KeyWait, LastSuccess, NewJob, ReapedJob, Trigger,
};
use crate::retry::RetryPolicy;
use crate::rows::{micros, parse_stored, MAX_KEY_WAITS, MAX_RACE_RETRIES, MAX_REAP_BATCH};
use crate::store::{Backend, JobStore, StoreOptions};

/// The migrations in `migrations/postgres`, embedded at compile time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/postgres");

/// A store transaction is a few statements lasting milliseconds. A session idle inside
/// one for a minute is a hung client, and its row locks would block claims and reaping,
/// so Postgres ends it.
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "60s";

#[derive(Debug, Clone)]
pub struct PgJobStore {
    pool: PgPool,
}

impl PgJobStore {
    /// Opens a pool for `url` (`postgres://` or `postgresql://`).
    pub async fn connect(url: &str, opts: &StoreOptions) -> Result<Self, StoreError> {
        let connect_options = PgConnectOptions::from_str(url)
            .map_err(|err| StoreError::config(url, err.to_string()))?
            .application_name("tablekeeper")
            .options([(
                "idle_in_transaction_session_timeout",
                IDLE_IN_TRANSACTION_TIMEOUT,
            )]);
        let pool_options = PgPoolOptions::new()
            .max_connections(opts.max_connections.max(1))
            .acquire_timeout(opts.acquire_timeout)
            // A connection that died with a database restart is replaced before use
            // instead of failing the caller's statement.
            .test_before_acquire(true);
        let pool = if opts.connect_lazily {
            pool_options.connect_lazy_with(connect_options)
        } else {
            pool_options
                .connect_with(connect_options)
                .await
                .map_err(|err| connect_error(url, err))?
        };
        Ok(Self { pool })
    }

    /// Wraps an existing pool (benchmarks, tests).
    pub fn from_pool(pool: PgPool) -> Self {
        Self { pool }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    async fn begin(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        Ok(self.pool.begin().await?)
    }

    /// Due jobs ranked ahead of `claimed` whose key is held (see [`ClaimOutcome`]).
    async fn key_waits(&self, claimed: Option<&Job>) -> Result<Vec<KeyWait>, StoreError> {
        let rows = sqlx::query(sql::KEY_WAITS)
            .bind(claimed.map(|j| j.id))
            .bind(claimed.map(|j| j.priority))
            .bind(claimed.map(|j| j.run_at))
            .bind(MAX_KEY_WAITS)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(KeyWait {
                    job_id: row.try_get("id")?,
                    table_name: row.try_get("table_name")?,
                    operation: row.try_get("operation")?,
                    concurrency_key: row.try_get("concurrency_key")?,
                })
            })
            .collect()
    }

    /// Executes `plan` for `job` (locked, attempt already closed) inside `tx`.
    /// `requeue_error`: new `jobs.error` when requeued (`None` keeps it);
    /// `fail_error`: `jobs.error` when failed.
    ///
    /// A job enqueued between our check and our update makes the update hit the queued
    /// index; [`Self::with_requeue_retry`] then runs the whole transaction again.
    async fn apply(
        tx: &mut Transaction<'static, Postgres>,
        job: &Job,
        plan: Plan,
        requeue_error: Option<&str>,
        fail_error: &str,
    ) -> Result<Applied, StoreError> {
        match plan {
            Plan::Fail => {
                sqlx::query(sql::FINISH)
                    .bind(job.id)
                    .bind(JobState::Failed.as_str())
                    .bind(fail_error)
                    .execute(&mut **tx)
                    .await?;
                Ok(Applied::Failed)
            }
            Plan::Requeue {
                delay,
                give_back_attempt,
            } => {
                let other: Option<i64> = sqlx::query_scalar(sql::OTHER_QUEUED)
                    .bind(&job.table_name)
                    .bind(&job.operation)
                    .bind(job.id)
                    .fetch_optional(&mut **tx)
                    .await?;
                if let Some(queued_job_id) = other {
                    sqlx::query(sql::FINISH)
                        .bind(job.id)
                        .bind(JobState::Cancelled.as_str())
                        .bind(lifecycle::superseded_error(queued_job_id))
                        .execute(&mut **tx)
                        .await?;
                    return Ok(Applied::Superseded { queued_job_id });
                }
                // Delays come from RetryPolicy (capped) or are zero; saturate rather than
                // fail on an absurd cap.
                let delay_us = i64::try_from(delay.as_micros()).unwrap_or(i64::MAX / 2);
                let run_at: DateTime<Utc> = sqlx::query_scalar(sql::REQUEUE)
                    .bind(job.id)
                    .bind(delay_us)
                    .bind(i32::from(give_back_attempt))
                    .bind(requeue_error)
                    .fetch_one(&mut **tx)
                    .await?;
                Ok(Applied::Requeued { run_at })
            }
        }
    }

    /// Runs `body` in a transaction, retrying when it lost a race on the queued index.
    /// `body` returns `Ok(None)` to roll back and stop (e.g. the lease is gone).
    async fn with_requeue_retry<T, F>(&self, mut body: F) -> Result<Option<T>, StoreError>
    where
        F: for<'t> FnMut(
                &'t mut Transaction<'static, Postgres>,
            ) -> BoxFuture<'t, Result<Option<T>, StoreError>>
            + Send,
        T: Send,
    {
        for _ in 0..MAX_RACE_RETRIES {
            let mut tx = self.begin().await?;
            match body(&mut tx).await {
                Ok(Some(value)) => {
                    tx.commit().await?;
                    return Ok(Some(value));
                }
                Ok(None) => {
                    tx.rollback().await?;
                    return Ok(None);
                }
                Err(err) if err.constraint() == Some(sql::ONE_QUEUED_PER_TABLE_OPERATION) => {
                    tx.rollback().await?;
                }
                Err(err) => return Err(err),
            }
        }
        Err(StoreError::Contention {
            detail: "requeue kept colliding with concurrent enqueues".to_owned(),
        })
    }
}

/// Errors of the first connection: reachability problems stay `Unavailable`
/// (retryable); anything else (bad credentials, missing database) is configuration.
fn connect_error(url: &str, err: sqlx::Error) -> StoreError {
    match StoreError::from(err) {
        err @ StoreError::Unavailable { .. } => err,
        other => StoreError::config(url, other.to_string()),
    }
}

/// Did `err` come from the unique index `constraint`?
fn violates(err: &sqlx::Error, constraint: &str) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.constraint() == Some(constraint))
}

fn job_from_row(row: &PgRow) -> Result<Job, StoreError> {
    Ok(Job {
        id: row.try_get("id")?,
        table_name: row.try_get("table_name")?,
        operation: row.try_get("operation")?,
        concurrency_key: row.try_get("concurrency_key")?,
        state: parse_stored(row.try_get("state")?, "jobs.state")?,
        trigger: parse_stored(row.try_get("trigger")?, "jobs.trigger")?,
        priority: row.try_get("priority")?,
        run_at: row.try_get("run_at")?,
        attempt: row.try_get("attempt")?,
        max_attempts: row.try_get("max_attempts")?,
        worker_id: row.try_get("worker_id")?,
        lease_token: row.try_get("lease_token")?,
        lease_expires_at: row.try_get("lease_expires_at")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        result: row
            .try_get::<Option<Json<serde_json::Value>>, _>("result")?
            .map(|json| json.0),
        error: row.try_get("error")?,
    })
}

fn attempt_from_row(row: &PgRow) -> Result<Attempt, StoreError> {
    let outcome: Option<&str> = row.try_get("outcome")?;
    Ok(Attempt {
        id: row.try_get("id")?,
        job_id: row.try_get("job_id")?,
        attempt: row.try_get("attempt")?,
        worker_id: row.try_get("worker_id")?,
        lease_token: row.try_get("lease_token")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        outcome: outcome
            .map(|o| parse_stored(o, "job_attempts.outcome"))
            .transpose()?,
        error: row.try_get("error")?,
    })
}

impl PgJobStore {
    /// Closes the attempt as cancelled with `reason` and requeues the job by `plan`, if
    /// `lease_token` still holds the lease.
    async fn give_back(
        &self,
        job_id: i64,
        lease_token: Uuid,
        reason: &str,
        plan: Plan,
    ) -> Result<bool, StoreError> {
        let reason = reason.to_owned();
        let applied = self
            .with_requeue_retry(|tx| {
                let reason = reason.clone();
                Box::pin(async move {
                    let Some(row) = sqlx::query(sql::LOCK_LEASED)
                        .bind(job_id)
                        .bind(lease_token)
                        .fetch_optional(&mut **tx)
                        .await?
                    else {
                        return Ok(None);
                    };
                    let job = job_from_row(&row)?;
                    sqlx::query(sql::CLOSE_ATTEMPT)
                        .bind(job_id)
                        .bind(AttemptOutcome::Cancelled.as_str())
                        .bind(&reason)
                        .execute(&mut **tx)
                        .await?;
                    Self::apply(tx, &job, plan, None, &reason).await.map(Some)
                })
            })
            .await?;
        Ok(applied.is_some())
    }
}

#[async_trait]
impl JobStore for PgJobStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR.run(&self.pool).await?;
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn enqueue(&self, new: NewJob) -> Result<Enqueued, StoreError> {
        new.validate()?;
        // Three cases race here: no queued job (insert), a queued job (join it), and a
        // queued job that gets claimed between our insert and our join (loop: the next
        // insert succeeds).
        for _ in 0..MAX_RACE_RETRIES {
            let inserted = sqlx::query(sql::INSERT_QUEUED)
                .bind(&new.table_name)
                .bind(&new.operation)
                .bind(&new.concurrency_key)
                .bind(new.trigger.as_str())
                .bind(new.priority)
                .bind(new.run_at)
                .bind(new.max_attempts)
                .bind(new.scheduled_for)
                .fetch_optional(&self.pool)
                .await?;
            if let Some(row) = inserted {
                return Ok(Enqueued {
                    job: job_from_row(&row)?,
                    created: true,
                });
            }
            let existing = match new.trigger {
                Trigger::Manual => {
                    sqlx::query(sql::JOIN_QUEUED_MANUAL)
                        .bind(&new.table_name)
                        .bind(&new.operation)
                        .bind(new.run_at)
                        .bind(new.priority)
                        .fetch_optional(&self.pool)
                        .await?
                }
                Trigger::Schedule => {
                    sqlx::query(sql::SELECT_QUEUED)
                        .bind(&new.table_name)
                        .bind(&new.operation)
                        .fetch_optional(&self.pool)
                        .await?
                }
            };
            // No queued job: the tick's own job already left the queue (another replica's
            // firing of the same tick made it, and it runs or ran).
            let existing = match (existing, new.scheduled_for) {
                (None, Some(tick)) => {
                    sqlx::query(sql::SELECT_TICK)
                        .bind(&new.table_name)
                        .bind(&new.operation)
                        .bind(tick)
                        .fetch_optional(&self.pool)
                        .await?
                }
                (existing, _) => existing,
            };
            if let Some(row) = existing {
                return Ok(Enqueued {
                    job: job_from_row(&row)?,
                    created: false,
                });
            }
        }
        Err(StoreError::Contention {
            detail: format!(
                "the queued job for `{}` {} kept changing while enqueueing",
                new.table_name, new.operation
            ),
        })
    }

    async fn claim(&self, worker_id: &str, lease: Duration) -> Result<ClaimOutcome, StoreError> {
        let lease_us = micros(lease, "lease")?;
        // Jobs whose claim lost a race on the running-key index in this call: another
        // replica claimed a job with the same key between our check and our update.
        let mut raced: Vec<i64> = Vec::new();
        let mut claimed = None;
        for _ in 0..MAX_RACE_RETRIES {
            let mut tx = self.begin().await?;
            let candidate: Option<i64> = sqlx::query_scalar(sql::CLAIM_CANDIDATE)
                .bind(&raced)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(id) = candidate else {
                tx.rollback().await?;
                break;
            };
            let lease_token = Uuid::new_v4();
            let updated = sqlx::query(sql::CLAIM_UPDATE)
                .bind(id)
                .bind(worker_id)
                .bind(lease_token)
                .bind(lease_us)
                .fetch_one(&mut *tx)
                .await;
            let attempt: i32 = match updated {
                Ok(row) => row.try_get("attempt")?,
                Err(err) if violates(&err, sql::ONE_RUNNING_PER_KEY) => {
                    tx.rollback().await?;
                    raced.push(id);
                    continue;
                }
                Err(err) => return Err(err.into()),
            };
            sqlx::query(sql::CLOSE_STRAY_ATTEMPTS)
                .bind(id)
                .bind(lifecycle::STRAY_ATTEMPT_ERROR)
                .execute(&mut *tx)
                .await?;
            let row = sqlx::query(sql::START_ATTEMPT)
                .bind(id)
                .bind(attempt)
                .bind(worker_id)
                .bind(lease_token)
                .bind(lease_us)
                .fetch_one(&mut *tx)
                .await?;
            let job = job_from_row(&row)?;
            tx.commit().await?;
            let lease_expires_at = job.lease_expires_at.ok_or_else(|| {
                StoreError::Corrupt(format!("claimed job {} has no lease expiry", job.id))
            })?;
            claimed = Some(ClaimedJob {
                job,
                lease_token,
                lease_expires_at,
            });
            break;
        }
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
    }

    async fn heartbeat(
        &self,
        job_id: i64,
        lease_token: Uuid,
        lease: Duration,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        let lease_us = micros(lease, "lease")?;
        Ok(sqlx::query_scalar(sql::HEARTBEAT)
            .bind(job_id)
            .bind(lease_token)
            .bind(lease_us)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn complete(
        &self,
        job_id: i64,
        lease_token: Uuid,
        result: serde_json::Value,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let done: Option<i64> = sqlx::query_scalar(sql::COMPLETE)
            .bind(job_id)
            .bind(lease_token)
            .bind(Json(result))
            .fetch_optional(&mut *tx)
            .await?;
        if done.is_some() {
            sqlx::query(sql::CLOSE_ATTEMPT)
                .bind(job_id)
                .bind(AttemptOutcome::Succeeded.as_str())
                .bind(None::<&str>)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            return Ok(true);
        }
        tx.rollback().await?;
        // A retry of a completion whose reply was lost finds its own successful attempt.
        let earlier: Option<i64> = sqlx::query_scalar(sql::COMPLETED_BY_TOKEN)
            .bind(job_id)
            .bind(lease_token)
            .fetch_optional(&self.pool)
            .await?;
        Ok(earlier.is_some())
    }

    async fn fail(
        &self,
        job_id: i64,
        lease_token: Uuid,
        kind: FailureKind,
        error: &str,
        retry: &RetryPolicy,
    ) -> Result<FailOutcome, StoreError> {
        let retry = *retry;
        let error = error.to_owned();
        let applied = self
            .with_requeue_retry(|tx| {
                let error = error.clone();
                Box::pin(async move {
                    let Some(row) = sqlx::query(sql::LOCK_LEASED)
                        .bind(job_id)
                        .bind(lease_token)
                        .fetch_optional(&mut **tx)
                        .await?
                    else {
                        return Ok(None);
                    };
                    let job = job_from_row(&row)?;
                    sqlx::query(sql::CLOSE_ATTEMPT)
                        .bind(job_id)
                        .bind(kind.outcome().as_str())
                        .bind(&error)
                        .execute(&mut **tx)
                        .await?;
                    let plan = {
                        // ThreadRng is not Send: keep it out of the awaits below.
                        let mut rng = rand::rng();
                        lifecycle::after_failure(
                            kind,
                            job.attempt,
                            job.max_attempts,
                            &retry,
                            &mut rng,
                        )
                    };
                    Self::apply(tx, &job, plan, Some(&error), &error)
                        .await
                        .map(Some)
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
    }

    async fn release(
        &self,
        job_id: i64,
        lease_token: Uuid,
        reason: &str,
    ) -> Result<bool, StoreError> {
        self.give_back(job_id, lease_token, reason, lifecycle::AFTER_RELEASE)
            .await
    }

    async fn defer(
        &self,
        job_id: i64,
        lease_token: Uuid,
        reason: &str,
        delay: Duration,
    ) -> Result<bool, StoreError> {
        self.give_back(
            job_id,
            lease_token,
            reason,
            lifecycle::after_deferral(delay),
        )
        .await
    }

    async fn reap_expired(&self, grace: Duration) -> Result<Vec<ReapedJob>, StoreError> {
        let grace_us = micros(grace, "grace")?;
        let candidates: Vec<i64> = sqlx::query_scalar(sql::REAP_CANDIDATES)
            .bind(grace_us)
            .bind(MAX_REAP_BATCH)
            .fetch_all(&self.pool)
            .await?;
        let mut reaped = Vec::new();
        for id in candidates {
            let outcome = self
                .with_requeue_retry(|tx| {
                    Box::pin(async move {
                        // Re-checked under the row lock: the worker may have renewed, or
                        // another replica's reaper may hold or have finished this job.
                        let Some(row) = sqlx::query(sql::LOCK_EXPIRED)
                            .bind(id)
                            .bind(grace_us)
                            .fetch_optional(&mut **tx)
                            .await?
                        else {
                            return Ok(None);
                        };
                        let job = job_from_row(&row)?;
                        let worker_id = job.worker_id.clone().unwrap_or_default();
                        let expiry = job.lease_expires_at.unwrap_or(job.run_at);
                        let attempt_error = lifecycle::lost_lease_error(&worker_id, expiry);
                        sqlx::query(sql::CLOSE_ATTEMPT)
                            .bind(id)
                            .bind(AttemptOutcome::LostLease.as_str())
                            .bind(&attempt_error)
                            .execute(&mut **tx)
                            .await?;
                        let plan = lifecycle::after_lost_lease(job.attempt, job.max_attempts);
                        let fail_error = lifecycle::lost_lease_exhausted_error(
                            &attempt_error,
                            job.attempt,
                            job.max_attempts,
                        );
                        let applied =
                            Self::apply(tx, &job, plan, Some(&attempt_error), &fail_error).await?;
                        Ok(Some(reaped_job(job, worker_id, expiry, applied)))
                    })
                })
                .await;
            match outcome {
                Ok(Some(job)) => {
                    tracing::warn!(
                        job_id = job.job_id,
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
                Err(err) => {
                    tracing::error!(job_id = id, error = %err, "reaping a job failed");
                }
            }
        }
        Ok(reaped)
    }

    async fn cancel(&self, job_id: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(sql::CANCEL_QUEUED)
            .bind(job_id)
            .bind(lifecycle::CANCELLED_WHILE_QUEUED)
            .execute(&self.pool)
            .await?;
        if done.rows_affected() == 1 {
            return Ok(true);
        }
        let exists: Option<i64> = sqlx::query_scalar(sql::JOB_EXISTS)
            .bind(job_id)
            .fetch_optional(&self.pool)
            .await?;
        match exists {
            Some(_) => Ok(false),
            None => Err(StoreError::NotFound { id: job_id }),
        }
    }

    async fn get_job(&self, id: i64) -> Result<Option<Job>, StoreError> {
        sqlx::query(sql::GET_JOB)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .map(|row| job_from_row(&row))
            .transpose()
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<Job>, StoreError> {
        sqlx::query(sql::LIST_JOBS)
            .bind(filter.table.as_deref())
            .bind(filter.state.map(JobState::as_str))
            .bind(filter.clamped_limit())
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(job_from_row)
            .collect()
    }

    async fn attempts(&self, job_id: i64) -> Result<Vec<Attempt>, StoreError> {
        let attempts = sqlx::query(sql::ATTEMPTS)
            .bind(job_id)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(attempt_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        if attempts.is_empty() && self.get_job(job_id).await?.is_none() {
            return Err(StoreError::NotFound { id: job_id });
        }
        Ok(attempts)
    }

    async fn counts_by_state(&self) -> Result<BTreeMap<JobState, i64>, StoreError> {
        let mut counts: BTreeMap<JobState, i64> =
            JobState::ALL.iter().map(|state| (*state, 0)).collect();
        for row in sqlx::query(sql::COUNTS_BY_STATE)
            .fetch_all(&self.pool)
            .await?
        {
            let state: JobState = parse_stored(row.try_get("state")?, "jobs.state")?;
            counts.insert(state, row.try_get("n")?);
        }
        Ok(counts)
    }

    async fn last_success(&self) -> Result<Vec<LastSuccess>, StoreError> {
        sqlx::query(sql::LAST_SUCCESS)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| {
                Ok(LastSuccess {
                    table_name: row.try_get("table_name")?,
                    operation: row.try_get("operation")?,
                    finished_at: row.try_get("finished_at")?,
                })
            })
            .collect()
    }

    async fn failure_streaks(&self) -> Result<Vec<FailureStreak>, StoreError> {
        sqlx::query(sql::FAILURE_STREAKS)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| {
                Ok(FailureStreak {
                    table_name: row.try_get("table_name")?,
                    operation: row.try_get("operation")?,
                    failures: row.try_get("failures")?,
                    last_failed_at: row.try_get("last_failed_at")?,
                    last_error: row.try_get("last_error")?,
                })
            })
            .collect()
    }

    async fn latest_jobs_for_table(&self, table: &str) -> Result<Vec<Job>, StoreError> {
        sqlx::query(sql::LATEST_JOBS_FOR_TABLE)
            .bind(table)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(job_from_row)
            .collect()
    }

    async fn running_jobs(&self) -> Result<Vec<Job>, StoreError> {
        sqlx::query(sql::RUNNING_JOBS)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(job_from_row)
            .collect()
    }

    async fn set_paused(&self, table: &str, paused: bool) -> Result<(), StoreError> {
        sqlx::query(sql::SET_PAUSED)
            .bind(table)
            .bind(paused)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn paused_overrides(&self) -> Result<BTreeMap<String, bool>, StoreError> {
        let rows = sqlx::query(sql::PAUSED_OVERRIDES)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("table_name")?, r.try_get("paused")?)))
            .collect()
    }

    async fn record_commits(&self, table: &str, commits: &[CommitRow]) -> Result<u64, StoreError> {
        let mut inserted = 0;
        for batch in commits.chunks(HISTORY_BATCH) {
            let mut tx = self.pool.begin().await?;
            for commit in batch {
                inserted += sqlx::query(sql::INSERT_COMMIT)
                    .bind(table)
                    .bind(commit.version)
                    .bind(commit.timestamp)
                    .bind(commit.operation.as_deref())
                    .bind(commit.operation_parameters.as_ref().map(Json))
                    .bind(commit.operation_metrics.as_ref().map(Json))
                    .bind(commit.engine_info.as_deref())
                    .bind(commit.user_name.as_deref())
                    .bind(commit.is_blind_append)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            tx.commit().await?;
        }
        Ok(inserted)
    }

    async fn history(
        &self,
        table: &str,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<CommitRow>, StoreError> {
        sqlx::query(sql::HISTORY)
            .bind(table)
            .bind(before)
            .bind(clamp_history_limit(limit))
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| {
                Ok(CommitRow {
                    version: row.try_get("version")?,
                    timestamp: row.try_get("timestamp")?,
                    operation: row.try_get("operation")?,
                    operation_parameters: json_column(row, "operation_parameters")?,
                    operation_metrics: json_column(row, "operation_metrics")?,
                    engine_info: row.try_get("engine_info")?,
                    user_name: row.try_get("user_name")?,
                    is_blind_append: row.try_get("is_blind_append")?,
                })
            })
            .collect()
    }

    async fn recorded_range(&self, table: &str) -> Result<Option<(i64, i64)>, StoreError> {
        let row = sqlx::query(sql::RECORDED_RANGE)
            .bind(table)
            .fetch_one(&self.pool)
            .await?;
        let oldest: Option<i64> = row.try_get("oldest")?;
        let through: Option<i64> = row.try_get("through")?;
        Ok(oldest.zip(through))
    }

    async fn history_gaps(&self, table: &str) -> Result<Vec<(i64, i64)>, StoreError> {
        sqlx::query(sql::HISTORY_GAPS)
            .bind(table)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| Ok((row.try_get("gap_from")?, row.try_get("gap_to")?)))
            .collect()
    }

    async fn record_stale_writes(&self, writes: &[StaleWriteRow]) -> Result<u64, StoreError> {
        let mut inserted = 0;
        let mut tx = self.pool.begin().await?;
        for w in writes {
            inserted += sqlx::query(sql::INSERT_STALE_WRITE)
                .bind(&w.table_name)
                .bind(w.version)
                .bind(w.committed_at)
                .bind(w.operation.as_deref())
                .bind(w.engine_info.as_deref())
                .bind(Json(&w.rewrite_versions))
                .bind(w.files)
                .bind(Json(&w.sample_files))
                .bind(w.rows)
                .bind(w.over_repair)
                .bind(w.repaired_by)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query(sql::UPDATE_STALE_WRITE)
                .bind(&w.table_name)
                .bind(w.version)
                .bind(w.rows)
                .bind(w.repaired_by)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(inserted)
    }

    async fn stale_writes(&self, table: Option<&str>) -> Result<Vec<StaleWriteRow>, StoreError> {
        sqlx::query(sql::STALE_WRITES)
            .bind(table)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| {
                Ok(StaleWriteRow {
                    table_name: row.try_get("table_name")?,
                    version: row.try_get("version")?,
                    committed_at: row.try_get("committed_at")?,
                    operation: row.try_get("operation")?,
                    engine_info: row.try_get("engine_info")?,
                    rewrite_versions: row.try_get::<Json<Vec<i64>>, _>("rewrite_versions")?.0,
                    files: row.try_get("files")?,
                    sample_files: row.try_get::<Json<Vec<String>>, _>("sample_files")?.0,
                    rows: row.try_get("rows")?,
                    over_repair: row.try_get("over_repair")?,
                    repaired_by: row.try_get("repaired_by")?,
                    detected_at: row.try_get("detected_at")?,
                })
            })
            .collect()
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

fn json_column(row: &PgRow, column: &str) -> Result<Option<serde_json::Value>, StoreError> {
    Ok(row
        .try_get::<Option<Json<serde_json::Value>>, _>(column)?
        .map(|json| json.0))
}

fn reaped_job(
    job: Job,
    worker_id: String,
    lease_expires_at: DateTime<Utc>,
    applied: Applied,
) -> ReapedJob {
    ReapedJob {
        job_id: job.id,
        table_name: job.table_name,
        operation: job.operation,
        worker_id,
        attempt: job.attempt,
        lease_expires_at,
        requeued: matches!(applied, Applied::Requeued { .. }),
        superseded_by: match applied {
            Applied::Superseded { queued_job_id } => Some(queued_job_id),
            _ => None,
        },
    }
}

/// The future a transaction body returns.
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
