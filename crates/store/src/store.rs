//! The `JobStore` trait every backend implements, its options, and `connect`, which picks
//! the backend from the URL scheme.
//!
//! Contract for implementations: every method is one short statement or one short
//! transaction (never held across a Delta operation); every lease timestamp comes from
//! the database clock; every write by a worker is fenced by its lease token.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::StoreError;
use crate::history::{CommitRow, StaleWriteRow};
use crate::model::{
    Attempt, ClaimOutcome, Enqueued, FailOutcome, FailureKind, FailureStreak, Job, JobFilter,
    JobState, LastSuccess, NewJob, ReapedJob,
};
use crate::observed::{ObservedStore, StoreObserver};
use crate::postgres::PgJobStore;
use crate::retry::RetryPolicy;
use crate::sqlite::SqliteJobStore;

/// Which database a store talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::Sqlite => "sqlite",
        }
    }
}

/// The job table. See the crate docs for the lifecycle and the lease rules.
#[async_trait]
pub trait JobStore: Send + Sync + fmt::Debug {
    fn backend(&self) -> Backend;

    /// Applies the embedded migrations (idempotent; on Postgres, replicas migrating at
    /// once serialize on an advisory lock).
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Cheap reachability check (`SELECT 1`), for `/readyz`.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Queues a job, or joins the queued job for the same (table, operation).
    ///
    /// Joining a queued job changes nothing for a `schedule` trigger (a cron tick must
    /// not pull a job out of its retry backoff). A `manual` trigger is a person asking
    /// for it now: the queued job gets `trigger = manual`, `priority = max(both)` and
    /// `run_at = min(both)` (the request's `run_at` defaults to now). The queued job's
    /// `concurrency_key` and `max_attempts` are kept.
    async fn enqueue(&self, job: NewJob) -> Result<Enqueued, StoreError>;

    /// Claims the best due job (`run_at <= now`, by priority desc, run_at, id) whose
    /// concurrency key has no running job, for `lease`. See [`ClaimOutcome`].
    async fn claim(&self, worker_id: &str, lease: Duration) -> Result<ClaimOutcome, StoreError>;

    /// Extends the lease to database-now + `lease` if `lease_token` still holds it.
    /// `None`: the lease is lost (reaped, released, or finished); abandon the work.
    async fn heartbeat(
        &self,
        job_id: i64,
        lease_token: Uuid,
        lease: Duration,
    ) -> Result<Option<DateTime<Utc>>, StoreError>;

    /// Marks the job succeeded with `result`, fenced by `lease_token`. `false`: the token
    /// does not hold the lease and nothing changed. Idempotent: repeating a completion
    /// that already took effect (its reply was lost) returns `true` again.
    async fn complete(
        &self,
        job_id: i64,
        lease_token: Uuid,
        result: serde_json::Value,
    ) -> Result<bool, StoreError>;

    /// Records a failed attempt, fenced by `lease_token`: requeues with backoff while
    /// attempts remain, else `failed`. See [`FailOutcome`].
    async fn fail(
        &self,
        job_id: i64,
        lease_token: Uuid,
        kind: FailureKind,
        error: &str,
        retry: &RetryPolicy,
    ) -> Result<FailOutcome, StoreError>;

    /// Graceful shutdown: gives the job back (queued, due now, attempt not consumed) and
    /// closes the attempt as `cancelled` with `reason`. `false`: the token did not hold
    /// the lease. If a newer queued job exists for the same (table, operation) this job
    /// is cancelled as superseded instead (still `true`).
    async fn release(
        &self,
        job_id: i64,
        lease_token: Uuid,
        reason: &str,
    ) -> Result<bool, StoreError>;

    /// Gives the job back like [`JobStore::release`], but due only `delay` from now (database
    /// clock): the worker found it may not run yet (for example inside a table's overwrite
    /// window). The attempt is closed as `cancelled` with `reason` and not consumed.
    async fn defer(
        &self,
        job_id: i64,
        lease_token: Uuid,
        reason: &str,
        delay: Duration,
    ) -> Result<bool, StoreError>;

    /// Takes back running jobs whose lease expired more than `grace` ago (database
    /// clock): closes the attempt as `lost_lease`, requeues (due now) or fails when out
    /// of attempts. Safe to run from every replica at once: each job is reaped once.
    async fn reap_expired(&self, grace: Duration) -> Result<Vec<ReapedJob>, StoreError>;

    /// Cancels a queued job. `false` if the job exists but is not queued: a running job
    /// cannot be cancelled here, because only its worker may stop its operation (it
    /// holds the lease); it finishes or fails on its own. `NotFound` if there is no such
    /// job.
    async fn cancel(&self, job_id: i64) -> Result<bool, StoreError>;

    async fn get_job(&self, id: i64) -> Result<Option<Job>, StoreError>;

    /// Jobs matching `filter`, newest (highest id) first.
    async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<Job>, StoreError>;

    /// The attempts of a job, oldest first. `NotFound` if there is no such job.
    async fn attempts(&self, job_id: i64) -> Result<Vec<Attempt>, StoreError>;

    /// Number of jobs per state; every state is present (0 if none).
    async fn counts_by_state(&self) -> Result<BTreeMap<JobState, i64>, StoreError>;

    /// The latest successful finish per (table, operation), ordered by table, operation.
    async fn last_success(&self) -> Result<Vec<LastSuccess>, StoreError>;

    /// Failed attempts per (table, operation) since its last successful attempt, whichever
    /// replica ran them; pairs without such failures are left out. Ordered by table, operation.
    async fn failure_streaks(&self) -> Result<Vec<FailureStreak>, StoreError>;

    /// The newest job of each operation on `table`, ordered by operation.
    async fn latest_jobs_for_table(&self, table: &str) -> Result<Vec<Job>, StoreError>;

    /// Running jobs, oldest start first.
    async fn running_jobs(&self) -> Result<Vec<Job>, StoreError>;

    /// Copies commits of `table` into `table_commits`. Versions already recorded (by this or
    /// another replica) are left untouched. Returns how many rows were new.
    async fn record_commits(&self, table: &str, commits: &[CommitRow]) -> Result<u64, StoreError>;

    /// The recorded history of `table`, newest first: at most `limit` (clamped to
    /// 1..=[`crate::MAX_HISTORY_LIMIT`]) commits with a version below `before`, if given.
    async fn history(
        &self,
        table: &str,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<CommitRow>, StoreError>;

    /// The versions of `table` recorded without a hole from its oldest recorded one:
    /// `(oldest, through)`. `None` when nothing is recorded. Log cleanup deletes only these.
    async fn recorded_range(&self, table: &str) -> Result<Option<(i64, i64)>, StoreError>;

    /// Version ranges (inclusive) missing from the recorded history of `table` between
    /// version 0 and the newest recorded one: commits cleaned up from the log before any
    /// replica could record them. Ascending.
    async fn history_gaps(&self, table: &str) -> Result<Vec<(i64, i64)>, StoreError>;

    /// Records stale writes: new ones are inserted; for known ones, a missing row count and
    /// the repair commit are filled in. Returns how many were new.
    async fn record_stale_writes(&self, writes: &[StaleWriteRow]) -> Result<u64, StoreError>;

    /// Recorded stale writes of `table` (every table when `None`), by table then version.
    async fn stale_writes(&self, table: Option<&str>) -> Result<Vec<StaleWriteRow>, StoreError>;

    /// Records an API pause (`true`) or resume (`false`) of a table for every replica.
    async fn set_paused(&self, table: &str, paused: bool) -> Result<(), StoreError>;

    /// Pause overrides set through the API, by table name.
    async fn paused_overrides(&self) -> Result<BTreeMap<String, bool>, StoreError>;

    async fn close(&self);
}

/// Default [`StoreOptions::call_timeout`]: far above any statement the store runs (they
/// take milliseconds), far below the kernel's TCP retransmission limit.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Connection settings shared by both backends.
#[derive(Clone)]
pub struct StoreOptions {
    /// Pool size. SQLite in-memory databases always use 1 (a second connection would
    /// see a different database).
    pub max_connections: u32,
    /// How long a call waits for a pooled connection before failing with `Unavailable`.
    pub acquire_timeout: Duration,
    /// Do not connect until the first call. `connect` then succeeds even while the
    /// database is down, and `ping` reports when it is reachable.
    pub connect_lazily: bool,
    /// Longest any call (except `migrate`) may take before it fails with `Unavailable`.
    /// sqlx has no query timeout and sets no TCP keepalive, so without this a call on a
    /// connection whose peer vanished silently (a network partition, a dropped NAT entry)
    /// would wait for the kernel to give up, which takes up to 15 minutes, holding its
    /// worker all that time. `None` waits forever.
    pub call_timeout: Option<Duration>,
    /// Told about every call (operation, duration, error): hook for metrics.
    pub observer: Option<Arc<dyn StoreObserver>>,
}

impl fmt::Debug for StoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreOptions")
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .field("connect_lazily", &self.connect_lazily)
            .field("call_timeout", &self.call_timeout)
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            // sqlx's default pool size; a replica runs a handful of workers, each holding
            // a connection only for one short statement at a time.
            max_connections: 10,
            // Short, so /readyz and the worker loops notice an outage within seconds
            // instead of queueing behind a dead database.
            acquire_timeout: Duration::from_secs(5),
            connect_lazily: false,
            call_timeout: Some(DEFAULT_CALL_TIMEOUT),
            observer: None,
        }
    }
}

/// Opens the store named by `url`:
/// `postgres://...` or `postgresql://...` → Postgres;
/// `sqlite://PATH` (created if missing, WAL mode) or `sqlite::memory:` → SQLite.
///
/// Does not migrate: call [`JobStore::migrate`]. Every call of the returned store goes
/// through one wrapper that times it and reports it to `opts.observer`.
pub async fn connect(url: &str, opts: StoreOptions) -> Result<Arc<dyn JobStore>, StoreError> {
    let observer = opts.observer.clone();
    let inner: Arc<dyn JobStore> = match scheme_of(url)? {
        Backend::Postgres => Arc::new(PgJobStore::connect(url, &opts).await?),
        Backend::Sqlite => Arc::new(SqliteJobStore::connect(url, &opts).await?),
    };
    Ok(Arc::new(ObservedStore::new(
        inner,
        observer,
        opts.call_timeout,
    )))
}

/// The backend a URL names, or a `Config` error saying which URLs work.
pub fn scheme_of(url: &str) -> Result<Backend, StoreError> {
    let url = url.trim();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else {
        let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
        let reason = if scheme.is_empty() {
            "no scheme".to_owned()
        } else {
            format!("unsupported scheme `{scheme}`")
        };
        Err(StoreError::config(url, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_pick_the_backend() {
        for url in ["postgres://u@h/db", "postgresql://u:p@h:5432/db"] {
            assert_eq!(scheme_of(url).unwrap(), Backend::Postgres);
        }
        for url in [
            "sqlite://tk.db",
            "sqlite:///var/lib/tk.db",
            "sqlite::memory:",
        ] {
            assert_eq!(scheme_of(url).unwrap(), Backend::Sqlite);
        }
        let err = scheme_of("mysql://u:secret@h/db").unwrap_err().to_string();
        assert!(err.contains("unsupported scheme `mysql`"), "{err}");
        assert!(!err.contains("secret"), "{err}");
        assert!(scheme_of("/var/lib/tk.db")
            .unwrap_err()
            .to_string()
            .contains("no scheme"));
    }
}
