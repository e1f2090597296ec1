//! What a database gives the store's one driver (`store.rs`): its statement texts (the
//! [`Statements`] this module names and each dialect fills), how it binds the driver's neutral
//! arguments, how it turns rows into neutral records, and short transactions. The driver
//! depends on this module; this module never imports the driver.
//!
//! The driver writes every store call once against this interface; a dialect supplies SQL
//! and type mapping only and must never decide anything about jobs (no retries, no lifecycle
//! rules, no fencing): those live in the driver, so both databases behave the same by
//! construction.

use std::fmt;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::StoreError;

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

/// The statements the driver runs; each dialect supplies the texts. Arguments are numbered
/// as bound (`$n` on Postgres, `?n` on SQLite); "job columns" means the columns of `jobs` in
/// the order `Job` has them. Durations are bound as whole microseconds.
#[derive(Debug)]
pub(crate) struct Statements {
    /// 1 table, 2 operation, 3 key, 4 trigger, 5 priority, 6 run_at or NULL (= now),
    /// 7 max_attempts, 8 scheduled_for or NULL. Job columns; no row when the (table,
    /// operation) already has a queued job or the tick already has its job.
    pub insert_queued: &'static str,
    /// The job of one cron tick. 1 table, 2 operation, 3 scheduled_for. Job columns.
    pub select_tick: &'static str,
    /// A manual request joining the queued job: due no later than asked, at least as
    /// urgent. 1 table, 2 operation, 3 run_at or NULL (= now), 4 priority. Job columns.
    pub join_queued_manual: &'static str,
    /// 1 table, 2 operation. Job columns of the queued job.
    pub select_queued: &'static str,
    /// The best due job whose key is free (locked, skipping rows other claimers hold,
    /// where the database has row locks). 1 ids to skip. Column `id`.
    pub claim_candidate: &'static str,
    /// [`Statements::claim_candidate`] among the jobs a budget round admitted
    /// (`budget_class` set). A statement of its own: a parameter deciding the filter would
    /// cost the plain claim its index plan.
    pub claim_candidate_admitted: &'static str,
    /// Takes the running-key slot. 1 id, 2 worker, 3 token, 4 lease. Column `attempt`.
    pub claim_update: &'static str,
    /// Closes attempts still open on a job being claimed. 1 job id, 2 error.
    pub close_stray_attempts: &'static str,
    /// Opens the attempt and stamps the job's start and lease from one clock reading.
    /// 1 job id, 2 attempt, 3 worker, 4 token, 5 lease.
    pub start_attempt: &'static str,
    /// Due queued jobs whose key is held, ranked ahead of the claimed job (1 id,
    /// 2 priority, 3 run_at; all NULL when nothing was claimed), at most 4. Columns `id`,
    /// `table_name`, `operation`, `concurrency_key`.
    pub key_waits: &'static str,
    /// 1 id, 2 token, 3 lease. Column `lease_expires_at`; no row when the lease is lost.
    pub heartbeat: &'static str,
    /// 1 id, 2 token, 3 result (JSON). Column `id`; no row when the lease is lost.
    pub complete: &'static str,
    /// Keeps what an unfinished attempt spent in the job's result. 1 id, 2 token, 3 result
    /// (JSON). Column `id`; no row when the lease is lost.
    pub keep_spent: &'static str,
    /// Did this token's attempt already succeed? 1 job id, 2 token. Column `id`.
    pub completed_by_token: &'static str,
    /// Closes the open attempt. 1 job id, 2 outcome, 3 error or NULL.
    pub close_attempt: &'static str,
    /// Locks the job if 2 (token) holds its lease. 1 id. Job columns.
    pub lock_leased: &'static str,
    /// Another queued job for the same (table, operation)? 1 table, 2 operation, 3 id.
    /// Column `id`.
    pub other_queued: &'static str,
    /// 1 id, 2 delay, 3 attempts to give back (0 or 1), 4 error or NULL (keep).
    /// Column `run_at`.
    pub requeue: &'static str,
    /// Terminal state without success. 1 id, 2 state, 3 error.
    pub finish: &'static str,
    /// 1 grace, 2 limit. Column `id`, oldest expiry first.
    pub reap_candidates: &'static str,
    /// Locks the job if its lease is still expired (skipping it when another reaper holds
    /// it). 1 id, 2 grace. Job columns.
    pub lock_expired: &'static str,
    /// 1 id, 2 error. Cancels the job if queued.
    pub cancel_queued: &'static str,
    /// 1 id. Job columns.
    pub get_job: &'static str,
    /// 1 table or NULL, 2 state or NULL, 3 limit. Job columns, newest first.
    pub list_jobs: &'static str,
    /// 1 job id. Attempt columns, oldest first.
    pub attempts: &'static str,
    /// Columns `state`, `n`.
    pub counts_by_state: &'static str,
    /// Jobs per state, queued and running only (state, n).
    pub active_counts: &'static str,
    /// Columns `table_name`, `operation`, `finished_at`.
    pub last_success: &'static str,
    /// Attempts that ended failed or conflict after the newest succeeded attempt of the
    /// same (table, operation). Columns `table_name`, `operation`, `failures`,
    /// `last_failed_at`, `last_error`.
    pub failure_streaks: &'static str,
    /// Upsert of an API pause override. 1 table, 2 paused.
    pub set_paused: &'static str,
    /// Columns `table_name`, `paused`.
    pub paused_overrides: &'static str,
    /// Upsert of a pin. 1 table, 2 version, 3 until, 4 reason, 5 created by. Pin columns.
    pub add_pin: &'static str,
    /// 1 table or NULL. Pin columns, by table then version.
    pub pins: &'static str,
    /// 1 table, 2 version. Deletes the pin.
    pub remove_pin: &'static str,
    /// 1 table, 2 version, 3 timestamp, 4 operation, 5 parameters, 6 metrics, 7 engine,
    /// 8 user, 9 blind append. A version already recorded is left as it is.
    pub insert_commit: &'static str,
    /// 1 table, 2 before (exclusive) or NULL, 3 limit. Commit columns, newest first.
    pub history: &'static str,
    /// Per table: how many recorded commits are rewrites by another engine, and the newest
    /// (table, count, version, time, operation, engine), from `table_status`.
    pub foreign_rewrites: &'static str,
    /// Per table: how many stale writes are recorded, and when the newest was detected, from
    /// `table_status` (table, stale_writes, stale_write_detected_at).
    pub stale_write_counts: &'static str,
    /// 1 table. Columns `oldest` (recorded) and `through` (end of the run of versions
    /// recorded without a hole from it).
    pub recorded_range: &'static str,
    /// 1 table. Columns `gap_from`, `gap_to`: missing versions between 0 and the newest.
    pub history_gaps: &'static str,
    /// 1 table … 11 repaired_by, in `StaleWriteRow` order, 12 kind. A known one is left as it is.
    pub insert_stale_write: &'static str,
    /// 1 table, 2 version, 3 rows, 4 repaired_by: fills in what was not known yet.
    pub update_stale_write: &'static str,
    /// 1 table or NULL for all. Stale write columns, by table then version.
    pub stale_writes: &'static str,
    /// 1 replica id. Marks the replica seen now.
    pub beat_replica: &'static str,
    /// 1 age in microseconds. Forgets replicas not seen for that long.
    pub forget_replicas: &'static str,
    /// 1 age in microseconds. Column `replica_id` of the replicas seen within it, by id.
    pub live_replicas: &'static str,
    /// 1 replica id.
    pub leave_replica: &'static str,
    /// 1 table, 2 replica, 3 probed_at, 4 probe JSON or NULL (keeps the stored one),
    /// 5 error or NULL, 6 error kind or NULL. Ignored when a newer probe is stored.
    pub record_probe: &'static str,
    /// 1 updated after, or NULL for all; 2 a replica whose rows are left out, or NULL for
    /// none. Probe columns, oldest update first.
    pub probes_since: &'static str,
    /// 1 table, 2 probed_at, 3 version, 4 files, 5 small files, 6 size bytes, 7 erasure pending
    /// since or NULL, 8 quiet since. A row of `table_figures`, unless the table's newest row is
    /// not older than 2, or is newer than 8 and holds the same figures.
    pub record_figures: &'static str,
    /// 1 table, 2 rows kept minus one. Deletes the table's rows older than the ones kept.
    pub prune_figures: &'static str,
    /// 1 table, 2 since. Figure columns (`probed_at`, `version`, `files`, `small_files`,
    /// `size_bytes`, `erasure_pending_since`), oldest first.
    pub figures: &'static str,
    /// 1 hour, 2 counts (JSON). The hour's row, unless one is stored.
    pub record_fleet_health: &'static str,
    /// 1 before. Deletes the hours before it.
    pub prune_fleet_health: &'static str,
    /// 1 since. Columns `hour`, `counts`, oldest first.
    pub fleet_health: &'static str,
    /// 1 table or NULL, 2 owner (the result's) or NULL, 3 operation or NULL, 4 finished at
    /// or after, or NULL, 5 limit. Job columns of finished jobs, newest finish first.
    pub finished_jobs: &'static str,
    /// 1 table, 2 owner, 3 replica, 4 day, 5 CPU microseconds, 6–10 get, put, list, head and
    /// delete requests, 11 bytes read, 12 bytes written. Adds to the day's row.
    pub record_probe_costs: &'static str,
    /// 1 since (a day). Columns `table_name`, `owner`, `day`, `cpu_micros`, `get_requests`,
    /// `put_requests`, `list_requests`, `head_requests`, `delete_requests`, `bytes_read`,
    /// `bytes_written`, summed over replicas per table, owner and day.
    pub probe_costs: &'static str,
    /// Serialises budget rounds across replicas until the transaction ends (Postgres: an
    /// advisory lock; SQLite: its write transaction already does). No arguments.
    pub budget_lock: &'static str,
    /// The due queued jobs a budget round ranks. Columns `id`, `table_name`, `operation`,
    /// `trigger`, `created_at`, `estimate`, oldest first.
    pub budget_queued: &'static str,
    /// 1 window start, 2 window end. Columns `owner` (the estimate's) and `cpu_micros`: what
    /// the jobs a round admitted within the budget (`budget_class = 'budget'`) and started
    /// in the window spent, measured for finished jobs, estimated for the others, per owner.
    pub budget_spent: &'static str,
    /// 1 verdicts (JSON array of `{id, class, reason, note}`). Writes each queued job's
    /// verdict; `deferred_at` is set the first time it is deferred.
    pub budget_verdicts: &'static str,
    /// 1 window start, 2 window end, 3 limit (CPU microseconds), 4 mode. Upserts the window.
    pub budget_window: &'static str,
    /// 1 window start, 2 mode, 3 deferrals (JSON array of `{id, table, operation, reason,
    /// rank, ranked}`). One row per job and window, the rank updated.
    pub budget_deferrals: &'static str,
    /// 1 job id, 2 estimate (JSON). The estimate of a queued job.
    pub set_estimate: &'static str,
    /// The queued jobs' budget verdicts. Columns `table_name`, `operation`, `budget_class`,
    /// `budget_reason`, `budget_note`, `estimate`, `deferred_at`.
    pub budget_queue: &'static str,
    /// 1 since. Per window from `since`: `window_start`, `window_end`, `limit_micros`,
    /// `mode`, `spent_micros`, `runs` (jobs started in it with a verdict), `deferrals` and
    /// `would_defer` (deferred by an enforced budget, and recorded in shadow mode),
    /// `longest_wait_seconds` (of the jobs deferred in it, until they started or now).
    pub budget_report: &'static str,
    /// 1 since. Finished jobs since then with both an estimate and a measured cost:
    /// `operation`, `estimated_micros`, `measured_micros` (CPU).
    pub estimates_and_costs: &'static str,
    /// 1 job id, 2 task, 3 max_attempts, 4 input (JSON). A new queued task.
    pub insert_task: &'static str,
    /// 1 job id. Column `next`: the number after the job's last task (0 when none).
    pub next_task: &'static str,
    /// 1 job id. Task columns, in task order.
    pub job_tasks: &'static str,
    /// A queued task of a running job (of 1 job id, or any when NULL), oldest job's first
    /// task first; locked, skipping rows other claimers hold where the database has row locks.
    /// Columns `job_id`, `task`.
    pub claim_task_candidate: &'static str,
    /// 1 job id, 2 task, 3 worker, 4 token, 5 lease. Task columns; no row when no longer queued.
    pub claim_task_update: &'static str,
    /// 1 job id, 2 task, 3 token, 4 lease. Column `lease_expires_at`; no row when the task's
    /// lease is lost or its job is not running.
    pub heartbeat_task: &'static str,
    /// Locks the task if 3 (token) holds its lease. 1 job id, 2 task. Task columns.
    pub lock_task: &'static str,
    /// Ends a running task: clears the lease, 1 job id, 2 task, 3 state, 4 result or NULL,
    /// 5 error or NULL, 6 attempts to give back (0 or 1). Finished now unless queued again.
    pub end_task: &'static str,
    /// 1 grace, 2 limit. Columns `job_id`, `task` of running tasks expired that long ago.
    pub reap_task_candidates: &'static str,
    /// Locks the task if its lease is still expired. 1 job id, 2 task, 3 grace. Task columns
    /// and `job_state`.
    pub lock_expired_task: &'static str,
    /// 1 error. Cancels the queued tasks of jobs in a terminal state.
    pub cancel_orphan_tasks: &'static str,
    /// Tasks of running jobs: columns `state`, `n`.
    pub task_counts: &'static str,
}

/// The columns of `job_tasks` in the order `Task` has them, as a literal for `concat!`.
macro_rules! task_columns {
    () => {
        "job_id, task, state, worker_id, attempt, max_attempts, input, result, error, \
         lease_expires_at, created_at, started_at, finished_at"
    };
}
pub(crate) use task_columns;

/// A bound statement argument, in a form both databases can take. Each dialect maps it to its
/// column types (SQLite stores times, uuids and JSON as text).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Arg {
    Int(Option<i64>),
    Int32(Option<i32>),
    Text(Option<String>),
    Bool(Option<bool>),
    Time(Option<DateTime<Utc>>),
    Uuid(Uuid),
    Json(Option<serde_json::Value>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}

impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}

impl From<i32> for Arg {
    fn from(v: i32) -> Self {
        Arg::Int32(Some(v))
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}

impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_owned))
    }
}

impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(Some(v))
    }
}

impl From<Option<bool>> for Arg {
    fn from(v: Option<bool>) -> Self {
        Arg::Bool(v)
    }
}

impl From<DateTime<Utc>> for Arg {
    fn from(v: DateTime<Utc>) -> Self {
        Arg::Time(Some(v))
    }
}

impl From<Option<DateTime<Utc>>> for Arg {
    fn from(v: Option<DateTime<Utc>>) -> Self {
        Arg::Time(v)
    }
}

impl From<Uuid> for Arg {
    fn from(v: Uuid) -> Self {
        Arg::Uuid(v)
    }
}

/// Statement arguments in binding order, each converted with `Arg::from`:
/// `args!(table, version, Arg::Json(value))`.
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        vec![$($crate::dialect::Arg::from($arg)),*]
    };
}
pub(crate) use args;

/// `SELECT <job columns> FROM jobs <rest>`: the columns of `jobs` in `Job` order, what every
/// statement returning "job columns" reads.
macro_rules! select_jobs {
    ($($rest:expr),+) => {
        concat!(
            "SELECT id, table_name, operation, concurrency_key, state, \"trigger\", priority, \
             run_at, attempt, max_attempts, worker_id, lease_token, lease_expires_at, \
             created_at, started_at, finished_at, result, error, estimate FROM jobs ",
            $($rest),+
        )
    };
}
pub(crate) use select_jobs;

/// `<statement> RETURNING <job columns>`.
macro_rules! returning_job {
    ($($statement:expr),+) => {
        concat!(
            $($statement),+,
            " RETURNING id, table_name, operation, concurrency_key, state, \"trigger\", \
             priority, run_at, attempt, max_attempts, worker_id, lease_token, lease_expires_at, \
             created_at, started_at, finished_at, result, error, estimate"
        )
    };
}
pub(crate) use returning_job;

/// The sqlx plumbing both dialects share: running a bound statement on the pool or inside a
/// transaction, migrating, closing. Generated per database because sqlx's executor traits
/// are per database; what differs (connecting, binding, decoding, how a write transaction
/// begins) stays in each dialect's module, which invokes this with its pool type.
macro_rules! sqlx_dialect {
    (
        $dialect:ident, $db:ty, $tx:ident,
        backend: $backend:expr, begin: $begin:literal, store_as: $store_as:path
    ) => {
        /// Binds `args` in order, each first mapped to the form this database stores.
        fn bind(
            sql: &str,
            args: Vec<$crate::dialect::Arg>,
        ) -> sqlx::query::Query<'_, $db, <$db as sqlx::Database>::Arguments<'_>> {
            use $crate::dialect::Arg;
            args.into_iter()
                .map($store_as)
                .fold(sqlx::query(sql), |query, arg| match arg {
                    Arg::Int(v) => query.bind(v),
                    Arg::Int32(v) => query.bind(v),
                    Arg::Text(v) => query.bind(v),
                    Arg::Bool(v) => query.bind(v),
                    Arg::Time(v) => query.bind(v),
                    Arg::Uuid(v) => query.bind(v),
                    Arg::Json(v) => query.bind(v.map(sqlx::types::Json)),
                })
        }

        async fn fetch<'e>(
            executor: impl sqlx::Executor<'e, Database = $db>,
            sql: &'e str,
            args: Vec<$crate::dialect::Arg>,
        ) -> Result<Vec<$crate::dialect::Record>, $crate::error::StoreError> {
            bind(sql, args)
                .fetch_all(executor)
                .await?
                .iter()
                .map(record)
                .collect()
        }

        async fn execute<'e>(
            executor: impl sqlx::Executor<'e, Database = $db>,
            sql: &'e str,
            args: Vec<$crate::dialect::Arg>,
        ) -> Result<u64, $crate::error::StoreError> {
            Ok(bind(sql, args).execute(executor).await?.rows_affected())
        }

        #[async_trait::async_trait]
        impl $crate::dialect::Dialect for $dialect {
            fn backend(&self) -> $crate::dialect::Backend {
                $backend
            }

            fn statements(&self) -> &'static $crate::dialect::Statements {
                &sql::STATEMENTS
            }

            async fn migrate(&self) -> Result<(), $crate::error::StoreError> {
                Ok(MIGRATOR.run(&self.pool).await?)
            }

            async fn begin(
                &self,
            ) -> Result<Box<dyn $crate::dialect::Tx>, $crate::error::StoreError> {
                Ok(Box::new($tx(self.pool.begin_with($begin).await?)))
            }

            async fn fetch(
                &self,
                sql: &'static str,
                args: Vec<$crate::dialect::Arg>,
            ) -> Result<Vec<$crate::dialect::Record>, $crate::error::StoreError> {
                fetch(&self.pool, sql, args).await
            }

            async fn execute(
                &self,
                sql: &'static str,
                args: Vec<$crate::dialect::Arg>,
            ) -> Result<u64, $crate::error::StoreError> {
                execute(&self.pool, sql, args).await
            }

            async fn close(&self) {
                self.pool.close().await;
            }
        }

        struct $tx(sqlx::Transaction<'static, $db>);

        #[async_trait::async_trait]
        impl $crate::dialect::Tx for $tx {
            async fn fetch(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::dialect::Arg>,
            ) -> Result<Vec<$crate::dialect::Record>, $crate::error::StoreError> {
                fetch(&mut *self.0, sql, args).await
            }

            async fn execute(
                &mut self,
                sql: &'static str,
                args: Vec<$crate::dialect::Arg>,
            ) -> Result<u64, $crate::error::StoreError> {
                execute(&mut *self.0, sql, args).await
            }

            async fn commit(self: Box<Self>) -> Result<(), $crate::error::StoreError> {
                Ok(self.0.commit().await?)
            }

            async fn rollback(self: Box<Self>) -> Result<(), $crate::error::StoreError> {
                Ok(self.0.rollback().await?)
            }
        }
    };
}
pub(crate) use sqlx_dialect;

/// A decoded column value. Postgres hands out typed values; SQLite integers and text, which
/// the [`Record`] accessors read as the type the driver asks for.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Bool(bool),
    Time(DateTime<Utc>),
    Uuid(Uuid),
    Json(serde_json::Value),
}

/// One result row, by column name. Every accessor fails with `Corrupt` naming the column
/// rather than panicking: people edit the job table by hand.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Record {
    columns: Vec<(String, Value)>,
}

impl Record {
    pub(crate) fn new(columns: Vec<(String, Value)>) -> Self {
        Record { columns }
    }

    fn value(&self, column: &str) -> Result<&Value, StoreError> {
        self.columns
            .iter()
            .find(|(name, _)| name == column)
            .map(|(_, value)| value)
            .ok_or_else(|| StoreError::Corrupt(format!("the result has no column `{column}`")))
    }

    fn wrong(column: &str, expected: &str, found: &Value) -> StoreError {
        StoreError::Corrupt(format!("`{column}` holds {found:?}, expected {expected}"))
    }

    pub(crate) fn opt_int(&self, column: &str) -> Result<Option<i64>, StoreError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            Value::Int(v) => Ok(Some(*v)),
            other => Err(Self::wrong(column, "an integer", other)),
        }
    }

    pub(crate) fn int(&self, column: &str) -> Result<i64, StoreError> {
        self.opt_int(column)?
            .ok_or_else(|| Self::wrong(column, "an integer", &Value::Null))
    }

    pub(crate) fn int32(&self, column: &str) -> Result<i32, StoreError> {
        let v = self.int(column)?;
        i32::try_from(v).map_err(|_| Self::wrong(column, "a 32-bit integer", &Value::Int(v)))
    }

    pub(crate) fn opt_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            Value::Text(v) => Ok(Some(v.clone())),
            other => Err(Self::wrong(column, "text", other)),
        }
    }

    pub(crate) fn text(&self, column: &str) -> Result<String, StoreError> {
        self.opt_text(column)?
            .ok_or_else(|| Self::wrong(column, "text", &Value::Null))
    }

    /// A closed-set column (`state`, `operation`, ...): an unknown value is `Corrupt`.
    pub(crate) fn parsed<T: std::str::FromStr>(&self, column: &str) -> Result<T, StoreError> {
        let text = self.text(column)?;
        text.parse()
            .map_err(|_| StoreError::Corrupt(format!("`{column}` holds unknown value `{text}`")))
    }

    pub(crate) fn opt_parsed<T: std::str::FromStr>(
        &self,
        column: &str,
    ) -> Result<Option<T>, StoreError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            _ => self.parsed(column).map(Some),
        }
    }

    pub(crate) fn bool(&self, column: &str) -> Result<bool, StoreError> {
        self.opt_bool(column)?
            .ok_or_else(|| Self::wrong(column, "a boolean", &Value::Null))
    }

    pub(crate) fn opt_bool(&self, column: &str) -> Result<Option<bool>, StoreError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            Value::Bool(v) => Ok(Some(*v)),
            Value::Int(v) => Ok(Some(*v != 0)),
            other => Err(Self::wrong(column, "a boolean", other)),
        }
    }

    pub(crate) fn opt_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            Value::Time(v) => Ok(Some(*v)),
            Value::Text(text) => parse_time(text)
                .map(Some)
                .ok_or_else(|| Self::wrong(column, "a time", &Value::Text(text.clone()))),
            other => Err(Self::wrong(column, "a time", other)),
        }
    }

    pub(crate) fn time(&self, column: &str) -> Result<DateTime<Utc>, StoreError> {
        self.opt_time(column)?
            .ok_or_else(|| Self::wrong(column, "a time", &Value::Null))
    }

    pub(crate) fn opt_uuid(&self, column: &str) -> Result<Option<Uuid>, StoreError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            Value::Uuid(v) => Ok(Some(*v)),
            Value::Text(text) => Uuid::parse_str(text)
                .map(Some)
                .map_err(|_| Self::wrong(column, "a uuid", &Value::Text(text.clone()))),
            other => Err(Self::wrong(column, "a uuid", other)),
        }
    }

    pub(crate) fn opt_json(&self, column: &str) -> Result<Option<serde_json::Value>, StoreError> {
        match self.value(column)? {
            Value::Null => Ok(None),
            Value::Json(v) => Ok(Some(v.clone())),
            Value::Text(text) => serde_json::from_str(text)
                .map(Some)
                .map_err(|err| StoreError::Corrupt(format!("`{column}` is not JSON: {err}"))),
            other => Err(Self::wrong(column, "JSON", other)),
        }
    }

    /// A JSON column decoded into `T`; `Corrupt` when it does not fit.
    pub(crate) fn json_as<T: serde::de::DeserializeOwned>(
        &self,
        column: &str,
    ) -> Result<T, StoreError> {
        let value = self
            .opt_json(column)?
            .ok_or_else(|| Self::wrong(column, "JSON", &Value::Null))?;
        serde_json::from_value(value).map_err(|err| {
            StoreError::Corrupt(format!("`{column}` has an unexpected shape: {err}"))
        })
    }
}

/// Reads the time forms found in SQLite: RFC 3339 (what tablekeeper writes) and the
/// `YYYY-MM-DD HH:MM:SS[.fff]` form of `datetime('now')`, which an operator may type.
fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.with_timezone(&Utc));
    }
    chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc())
}

/// A database the driver can run on.
#[async_trait]
pub(crate) trait Dialect: Send + Sync + fmt::Debug {
    fn backend(&self) -> Backend;

    /// The texts of every statement the driver runs, in this database's SQL.
    fn statements(&self) -> &'static Statements;

    /// Applies the embedded migrations (idempotent).
    async fn migrate(&self) -> Result<(), StoreError>;

    /// Starts a write transaction. SQLite takes its write lock here (`BEGIN IMMEDIATE`).
    async fn begin(&self) -> Result<Box<dyn Tx>, StoreError>;

    /// Runs one statement on a pooled connection and returns its rows.
    async fn fetch(&self, sql: &'static str, args: Vec<Arg>) -> Result<Vec<Record>, StoreError>;

    /// Runs one statement on a pooled connection and returns the number of rows changed.
    async fn execute(&self, sql: &'static str, args: Vec<Arg>) -> Result<u64, StoreError>;

    async fn close(&self);
}

/// An open transaction. Dropping it without [`Tx::commit`] rolls it back.
#[async_trait]
pub(crate) trait Tx: Send {
    async fn fetch(&mut self, sql: &'static str, args: Vec<Arg>)
        -> Result<Vec<Record>, StoreError>;

    async fn execute(&mut self, sql: &'static str, args: Vec<Arg>) -> Result<u64, StoreError>;

    async fn commit(self: Box<Self>) -> Result<(), StoreError>;

    async fn rollback(self: Box<Self>) -> Result<(), StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(value: Value) -> Record {
        Record::new(vec![("c".to_owned(), value)])
    }

    #[test]
    fn sqlite_text_and_integers_read_as_typed_values() {
        let t = record(Value::Text("2024-05-01T10:00:00.250Z".into()))
            .time("c")
            .unwrap();
        assert_eq!(t.to_rfc3339(), "2024-05-01T10:00:00.250+00:00");
        let typed = record(Value::Text("2024-05-01 10:00:00".into()))
            .time("c")
            .unwrap();
        assert_eq!(typed.to_rfc3339(), "2024-05-01T10:00:00+00:00");
        assert!(record(Value::Int(1)).bool("c").unwrap());
        let id = Uuid::new_v4();
        assert_eq!(
            record(Value::Text(id.to_string())).opt_uuid("c").unwrap(),
            Some(id)
        );
        assert_eq!(
            record(Value::Text("{\"a\":1}".into()))
                .opt_json("c")
                .unwrap(),
            Some(serde_json::json!({"a": 1}))
        );
    }

    #[test]
    fn bad_values_are_corrupt_and_name_the_column() {
        for (value, what) in [
            (Value::Text("yesterday".into()), "time"),
            (Value::Int(3), "time"),
        ] {
            let err = record(value).time("c").unwrap_err();
            assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
            assert!(err.to_string().contains("`c`"), "{what}: {err}");
        }
        let err = record(Value::Text("paused".into()))
            .parsed::<tablekeeper_vocab::JobState>("c")
            .unwrap_err();
        assert!(err.to_string().contains("`c` holds unknown value `paused`"));
        assert!(record(Value::Null).int("c").is_err());
        assert!(Record::default().int("missing").is_err());
        assert!(record(Value::Int(i64::MAX)).int32("c").is_err());
    }
}
