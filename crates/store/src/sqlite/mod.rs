//! The embedded SQLite job store: one replica (quickstart, small fleets), same semantics
//! as Postgres (the conformance suite runs against both).
//!
//! What we store, and why: the same `jobs` and `job_attempts` tables as Postgres (see
//! `migrations/sqlite/0001_jobs.sql`), with the same partial unique indexes. SQLite has
//! one writer at a time: every multi-statement write takes the write lock up front
//! (`BEGIN IMMEDIATE`), which replaces `FOR UPDATE SKIP LOCKED` and rules out the races
//! the Postgres backend retries. It must never be shared by several replicas on a
//! network filesystem: SQLite locking is not reliable there.

mod sql;

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{Row, Sqlite, Transaction};
use uuid::Uuid;

use crate::error::StoreError;
use crate::history::{clamp_history_limit, CommitRow, StaleWriteRow, HISTORY_BATCH};
use crate::lifecycle::{self, Applied, Plan};
use crate::model::{
    Attempt, AttemptOutcome, ClaimOutcome, ClaimedJob, Enqueued, FailOutcome, FailureKind,
    FailureStreak, Job, JobFilter, JobState, KeyWait, LastSuccess, NewJob, ReapedJob, Trigger,
};
use crate::retry::RetryPolicy;
use crate::rows::{parse_stored, MAX_KEY_WAITS, MAX_RACE_RETRIES, MAX_REAP_BATCH};
use crate::store::{Backend, JobStore, StoreOptions};

/// The migrations in `migrations/sqlite`, embedded at compile time.
pub static MIGRATOR: Migrator = sqlx::migrate!("../../migrations/sqlite");

/// How long a writer waits for SQLite's write lock before failing with `Contention`.
/// Store transactions hold it for milliseconds; 5 s is sqlx's default and matches the
/// pool acquire timeout.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct SqliteJobStore {
    pool: SqlitePool,
}

impl SqliteJobStore {
    /// Opens `url` (`sqlite://PATH`, `sqlite:PATH` or `sqlite::memory:`). A file database
    /// is created if missing (with its directory) and put in WAL mode.
    pub async fn connect(url: &str, opts: &StoreOptions) -> Result<Self, StoreError> {
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        let mut connect_options = SqliteConnectOptions::from_str(url)
            .map_err(|err| StoreError::config(url, err.to_string()))?
            .create_if_missing(true)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        if !in_memory {
            // WAL: readers (API, dashboard) never block the writer and vice versa.
            // synchronous=NORMAL is the documented safe pairing with WAL (a power loss
            // may drop the last commits, never corrupt the file).
            connect_options = connect_options
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal);
            create_parent_dir(url, connect_options.get_filename())?;
        }
        let mut pool_options = SqlitePoolOptions::new()
            .acquire_timeout(opts.acquire_timeout)
            .test_before_acquire(true);
        pool_options = if in_memory {
            // Every connection to `sqlite::memory:` would open its own database, and the
            // database vanishes with its last connection: one connection, kept forever.
            pool_options
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
        } else {
            pool_options.max_connections(opts.max_connections.max(1))
        };
        let pool = if opts.connect_lazily && !in_memory {
            pool_options.connect_lazy_with(connect_options)
        } else {
            pool_options
                .connect_with(connect_options)
                .await
                .map_err(|err| StoreError::config(url, err.to_string()))?
        };
        Ok(Self { pool })
    }

    /// Wraps an existing pool (benchmarks, tests).
    pub fn from_pool(pool: SqlitePool) -> Self {
        Self { pool }
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// A write transaction holding SQLite's write lock from the start. A deferred
    /// transaction that reads first and writes later can fail to upgrade its lock
    /// (SQLITE_BUSY without waiting); IMMEDIATE waits up to the busy timeout instead.
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn key_waits(&self, claimed: Option<&Job>) -> Result<Vec<KeyWait>, StoreError> {
        let rows = sqlx::query(sql::KEY_WAITS)
            .bind(claimed.map(|j| j.id))
            .bind(claimed.map(|j| j.priority))
            .bind(claimed.map(|j| timestamp(j.run_at)))
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

    /// Executes `plan` for `job` (attempt already closed) inside `tx`; see the Postgres
    /// backend. No race is possible here: `tx` holds the write lock.
    async fn apply(
        tx: &mut Transaction<'static, Sqlite>,
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
                let run_at: DateTime<Utc> = sqlx::query_scalar(sql::REQUEUE)
                    .bind(job.id)
                    .bind(modifier('+', delay))
                    .bind(i32::from(give_back_attempt))
                    .bind(requeue_error)
                    .fetch_one(&mut **tx)
                    .await?;
                Ok(Applied::Requeued { run_at })
            }
        }
    }

    /// Reaps one job inside its own write transaction; `None` if it is no longer expired.
    async fn reap_one(&self, id: i64, grace: &str) -> Result<Option<ReapedJob>, StoreError> {
        let mut tx = self.begin_write().await?;
        let Some(row) = sqlx::query(sql::SELECT_EXPIRED)
            .bind(id)
            .bind(grace)
            .fetch_optional(&mut *tx)
            .await?
        else {
            tx.rollback().await?;
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
            .execute(&mut *tx)
            .await?;
        let plan = lifecycle::after_lost_lease(job.attempt, job.max_attempts);
        let fail_error =
            lifecycle::lost_lease_exhausted_error(&attempt_error, job.attempt, job.max_attempts);
        let applied = Self::apply(&mut tx, &job, plan, Some(&attempt_error), &fail_error).await?;
        tx.commit().await?;
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
}

/// `create_if_missing` creates the file, not its directory; the embedded default path
/// usually lives in a data directory that may not exist yet.
fn create_parent_dir(url: &str, file: &Path) -> Result<(), StoreError> {
    match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.exists() => std::fs::create_dir_all(dir)
            .map_err(|err| {
                StoreError::config(
                    url,
                    format!("cannot create directory `{}`: {err}", dir.display()),
                )
            }),
        _ => Ok(()),
    }
}

/// The canonical stored form of a time: UTC, milliseconds, `Z`.
fn timestamp(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A SQLite date modifier adding (`+`) or subtracting (`-`) `duration`.
fn modifier(sign: char, duration: Duration) -> String {
    format!(
        "{sign}{}.{:06} seconds",
        duration.as_secs(),
        duration.subsec_micros()
    )
}

fn uuid_column(row: &SqliteRow, column: &str) -> Result<Option<Uuid>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|t| {
        Uuid::parse_str(&t).map_err(|_| {
            StoreError::Corrupt(format!("`{column}` holds `{t}`, which is not a uuid"))
        })
    })
    .transpose()
}

fn job_from_row(row: &SqliteRow) -> Result<Job, StoreError> {
    let result: Option<String> = row.try_get("result")?;
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
        lease_token: uuid_column(row, "lease_token")?,
        lease_expires_at: row.try_get("lease_expires_at")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        result: result
            .map(|text| {
                serde_json::from_str(&text)
                    .map_err(|err| StoreError::Corrupt(format!("`jobs.result` is not JSON: {err}")))
            })
            .transpose()?,
        error: row.try_get("error")?,
    })
}

fn attempt_from_row(row: &SqliteRow) -> Result<Attempt, StoreError> {
    let outcome: Option<String> = row.try_get("outcome")?;
    Ok(Attempt {
        id: row.try_get("id")?,
        job_id: row.try_get("job_id")?,
        attempt: row.try_get("attempt")?,
        worker_id: row.try_get("worker_id")?,
        lease_token: uuid_column(row, "lease_token")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        outcome: outcome
            .map(|o| parse_stored(&o, "job_attempts.outcome"))
            .transpose()?,
        error: row.try_get("error")?,
    })
}

impl SqliteJobStore {
    /// Closes the attempt as cancelled with `reason` and requeues the job by `plan`, if
    /// `lease_token` still holds the lease.
    async fn give_back(
        &self,
        job_id: i64,
        lease_token: Uuid,
        reason: &str,
        plan: Plan,
    ) -> Result<bool, StoreError> {
        let mut tx = self.begin_write().await?;
        let Some(row) = sqlx::query(sql::SELECT_LEASED)
            .bind(job_id)
            .bind(lease_token.to_string())
            .fetch_optional(&mut *tx)
            .await?
        else {
            tx.rollback().await?;
            return Ok(false);
        };
        let job = job_from_row(&row)?;
        sqlx::query(sql::CLOSE_ATTEMPT)
            .bind(job_id)
            .bind(AttemptOutcome::Cancelled.as_str())
            .bind(reason)
            .execute(&mut *tx)
            .await?;
        Self::apply(&mut tx, &job, plan, None, reason).await?;
        tx.commit().await?;
        Ok(true)
    }
}

#[async_trait]
impl JobStore for SqliteJobStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
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
        let run_at = new.run_at.map(timestamp);
        let tick = new.scheduled_for.map(timestamp);
        // Same shape as Postgres. Each statement is atomic; between them a claim may take
        // the queued job, hence the loop.
        for _ in 0..MAX_RACE_RETRIES {
            let inserted = sqlx::query(sql::INSERT_QUEUED)
                .bind(&new.table_name)
                .bind(&new.operation)
                .bind(&new.concurrency_key)
                .bind(new.trigger.as_str())
                .bind(new.priority)
                .bind(run_at.as_deref())
                .bind(new.max_attempts)
                .bind(tick.as_deref())
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
                        .bind(run_at.as_deref())
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
            let existing = match (existing, tick.as_deref()) {
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
        let lease = modifier('+', lease);
        let mut tx = self.begin_write().await?;
        let candidate: Option<i64> = sqlx::query_scalar(sql::CLAIM_CANDIDATE)
            .fetch_optional(&mut *tx)
            .await?;
        let claimed = match candidate {
            None => {
                tx.rollback().await?;
                None
            }
            Some(id) => {
                let lease_token = Uuid::new_v4();
                let row = sqlx::query(sql::CLAIM_UPDATE)
                    .bind(id)
                    .bind(worker_id)
                    .bind(lease_token.to_string())
                    .bind(&lease)
                    .fetch_one(&mut *tx)
                    .await?;
                let job = job_from_row(&row)?;
                sqlx::query(sql::CLOSE_STRAY_ATTEMPTS)
                    .bind(id)
                    .bind(lifecycle::STRAY_ATTEMPT_ERROR)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(sql::INSERT_ATTEMPT)
                    .bind(id)
                    .bind(job.attempt)
                    .bind(worker_id)
                    .bind(lease_token.to_string())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                let lease_expires_at = job.lease_expires_at.ok_or_else(|| {
                    StoreError::Corrupt(format!("claimed job {id} has no lease expiry"))
                })?;
                Some(ClaimedJob {
                    job,
                    lease_token,
                    lease_expires_at,
                })
            }
        };
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
        Ok(sqlx::query_scalar(sql::HEARTBEAT)
            .bind(job_id)
            .bind(lease_token.to_string())
            .bind(modifier('+', lease))
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn complete(
        &self,
        job_id: i64,
        lease_token: Uuid,
        result: serde_json::Value,
    ) -> Result<bool, StoreError> {
        let token = lease_token.to_string();
        let mut tx = self.begin_write().await?;
        let done: Option<i64> = sqlx::query_scalar(sql::COMPLETE)
            .bind(job_id)
            .bind(&token)
            .bind(result.to_string())
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
        let earlier: Option<i64> = sqlx::query_scalar(sql::COMPLETED_BY_TOKEN)
            .bind(job_id)
            .bind(&token)
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
        let mut tx = self.begin_write().await?;
        let Some(row) = sqlx::query(sql::SELECT_LEASED)
            .bind(job_id)
            .bind(lease_token.to_string())
            .fetch_optional(&mut *tx)
            .await?
        else {
            tx.rollback().await?;
            return Ok(FailOutcome::LeaseLost);
        };
        let job = job_from_row(&row)?;
        sqlx::query(sql::CLOSE_ATTEMPT)
            .bind(job_id)
            .bind(kind.outcome().as_str())
            .bind(error)
            .execute(&mut *tx)
            .await?;
        let plan = {
            // ThreadRng is not Send: keep it out of the awaits below.
            let mut rng = rand::rng();
            lifecycle::after_failure(kind, job.attempt, job.max_attempts, retry, &mut rng)
        };
        let applied = Self::apply(&mut tx, &job, plan, Some(error), error).await?;
        tx.commit().await?;
        Ok(match applied {
            Applied::Requeued { run_at } => FailOutcome::Retrying { run_at },
            Applied::Failed => FailOutcome::Failed,
            Applied::Superseded { queued_job_id } => FailOutcome::Superseded { queued_job_id },
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
        let grace = modifier('-', grace);
        let candidates: Vec<i64> = sqlx::query_scalar(sql::REAP_CANDIDATES)
            .bind(&grace)
            .bind(MAX_REAP_BATCH)
            .fetch_all(&self.pool)
            .await?;
        let mut reaped = Vec::new();
        for id in candidates {
            match self.reap_one(id, &grace).await {
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
                Err(err) if err.is_retryable() => return Err(err),
                // One bad row must not stop the reaper for every other job.
                Err(err) => tracing::error!(job_id = id, error = %err, "reaping a job failed"),
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
            let state: String = row.try_get("state")?;
            counts.insert(parse_stored(&state, "jobs.state")?, row.try_get("n")?);
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
                    .bind(commit.operation_parameters.as_ref().map(|v| v.to_string()))
                    .bind(commit.operation_metrics.as_ref().map(|v| v.to_string()))
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
                    operation_parameters: json_text(row, "table_commits", "operation_parameters")?,
                    operation_metrics: json_text(row, "table_commits", "operation_metrics")?,
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
                .bind(serde_json::to_string(&w.rewrite_versions).unwrap_or_else(|_| "[]".into()))
                .bind(w.files)
                .bind(serde_json::to_string(&w.sample_files).unwrap_or_else(|_| "[]".into()))
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
                    rewrite_versions: json_text(row, "stale_writes", "rewrite_versions")?
                        .and_then(|v| serde_json::from_value(v).ok())
                        .unwrap_or_default(),
                    files: row.try_get("files")?,
                    sample_files: json_text(row, "stale_writes", "sample_files")?
                        .and_then(|v| serde_json::from_value(v).ok())
                        .unwrap_or_default(),
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

/// A JSON column stored as text.
fn json_text(
    row: &SqliteRow,
    table: &str,
    column: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let text: Option<String> = row.try_get(column)?;
    text.map(|text| {
        serde_json::from_str(&text)
            .map_err(|err| StoreError::Corrupt(format!("`{table}.{column}` is not JSON: {err}")))
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modifiers_are_sqlite_date_modifiers() {
        assert_eq!(
            modifier('+', Duration::from_millis(1500)),
            "+1.500000 seconds"
        );
        assert_eq!(modifier('-', Duration::ZERO), "-0.000000 seconds");
    }

    #[test]
    fn timestamps_use_the_canonical_form() {
        let time = DateTime::parse_from_rfc3339("2026-11-05T10:00:00.123456+02:00")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(timestamp(time), "2026-11-05T08:00:00.123Z");
    }
}
