//! tablekeeper's job store: the `jobs` and `job_attempts` tables (DESIGN.md, "Job table
//! (contract)") and the tables that remember history, behind one driver, [`JobStore`], that
//! runs on Postgres (production, shared by every replica) or an embedded SQLite (one
//! replica).
//!
//! This crate owns the job lifecycle and its invariants. It must never run a Delta operation
//! or hold a transaction open while one runs: every method is one statement or one short
//! transaction.
//!
//! # Layout
//!
//! ```text
//! connect ──► JobStore (store.rs: every call once, measured) ──► dyn Dialect (dialect.rs)
//!                    │ lifecycle.rs, retry.rs: pure decisions        ├─ postgres/ (types, sql.rs)
//!                    │ model.rs, history.rs: the values              └─ sqlite/   (types, sql.rs)
//!                    │ budget.rs: estimates, budget rounds, the windows' history
//! ```
//!
//! # Lifecycle
//!
//! ```text
//!            enqueue (coalesces per table+operation)
//!                 │
//!                 ▼          claim (key free, run_at due)
//!   cancel ◄── queued ───────────────────────────► running ──complete──► succeeded
//!     │           ▲                                  │
//!     ▼           │ fail (attempts left, backoff)     │ fail (no attempts left) ──► failed
//! cancelled       │ release (shutdown, attempt back)  │ reap (lease expired + grace):
//!     ▲           └───────────────────────────────────┤   requeue, or failed if none left
//!     └── superseded: a requeue finds a newer queued job for its table+operation
//! ```
//!
//! - **Invariants, enforced by the database**: at most one `running` job per
//!   `concurrency_key` and at most one `queued` job per (`table_name`, `operation`)
//!   (partial unique indexes `jobs_one_running_per_key` and
//!   `jobs_one_queued_per_table_operation`; both backends).
//! - **Attempts**: a claim inserts an *open* `job_attempts` row (NULL `outcome` and
//!   `finished_at`); complete, fail, release and the reaper close it with
//!   `succeeded`, `failed`/`conflict`, `cancelled` or `lost_lease`.
//! - **Fencing**: heartbeat, complete, fail and release act only if the caller's
//!   `lease_token` still holds the lease; a stale token changes nothing.
//! - **Coalescing on requeue**: when fail, release or the reaper would requeue a job but a
//!   newer queued job exists for the same (table, operation) (a cron tick enqueued it while
//!   this one ran), the job is `cancelled` with error `superseded by queued job N`
//!   instead, and the queued job does the work.
//! - **Clock**: every lease and lifecycle timestamp is the database's clock, so replicas'
//!   clocks do not matter.
//! - **Budget**: a budget round ([`JobStore::budget_round`]) takes a lock every replica's
//!   round takes (Postgres: an advisory lock), reads the due queued jobs and the window's
//!   spend, and writes a verdict on each; under an enforced budget, claims take only the jobs
//!   the latest round admitted ([`JobStore::claim_admitted`]).
//!
//! # Leases
//!
//! See [`lease`] for the rules and the proof that a worker always abandons its operation
//! before another replica can take its job over: heartbeat every `L/4`, abandon `3L/4`
//! after sending the last successful renewal, reaper takes over after expiry + `L/4`.
//!
//! # A worker, in outline
//!
//! ```no_run
//! # use std::time::{Duration, Instant};
//! # use tablekeeper_store::{*, lease::LeaseClock};
//! # async fn work(store: &JobStore) -> Result<(), StoreError> {
//! let lease = Duration::from_secs(60);
//! let sent = Instant::now();
//! let outcome = store.claim("replica-a/worker-1", lease).await?;
//! // count outcome.key_waits in tablekeeper_concurrency_key_waits_total
//! if let Some(claimed) = outcome.job {
//!     let mut clock = LeaseClock::new(sent, lease);
//!     // run the operation; meanwhile, at clock.next_heartbeat():
//!     let sent = Instant::now();
//!     match store.heartbeat(&claimed.lease, lease).await {
//!         Ok(Some(_)) => clock.renewed(sent),
//!         Ok(None) => { /* lease lost: abandon now */ }
//!         // not a renewal: retry at clock.next_heartbeat(), abandon once
//!         // clock.must_abandon(now)
//!         Err(_) => clock.renewal_failed(sent),
//!     }
//!     // on success (fenced by the token):
//!     store.complete(&claimed.lease, serde_json::json!({})).await?;
//! }
//! # Ok(()) }
//! ```

mod budget;
mod connect;
mod costs;
mod dialect;
mod error;
mod figures;
mod history;
pub mod lease;
mod lifecycle;
mod model;
mod options;
mod pins;
mod postgres;
mod probes;
mod retry;
mod sqlite;
mod store;
mod tasks;
pub mod testing;

pub use budget::{
    BudgetWindowRow, Deferral, JobVerdict, QueuedJob, QueuedVerdict, RoundVerdicts, RoundWindow,
    WindowSpend,
};
pub use connect::{connect, scheme_of};
pub use costs::{OperationsFilter, ProbeCostRow};
pub use dialect::Backend;
pub use error::StoreError;
pub use figures::{HealthCounts, TableFigures};
pub use history::{
    CommitRow, ForeignRewriteRow, StaleWriteCount, StaleWriteRow, MAX_HISTORY_LIMIT,
};
pub use lease::{abandon_deadline, default_reap_grace, heartbeat_interval, LeaseClock};
pub use model::{
    Attempt, ClaimOutcome, ClaimedJob, Enqueued, FailOutcome, FailureKind, FailureStreak, Job,
    JobFilter, KeyWait, LastSuccess, NewJob, ReapedJob, MAX_LIST_LIMIT,
};
pub use options::{StoreOptions, DEFAULT_CALL_TIMEOUT};
pub use pins::TablePin;
pub use postgres::MIGRATOR as POSTGRES_MIGRATOR;
pub use probes::{ProbeRow, FORGET_REPLICAS_AFTER};
pub use retry::RetryPolicy;
pub use sqlite::MIGRATOR as SQLITE_MIGRATOR;
pub use store::{JobStore, StoreObserver, StoreOp};
pub use tablekeeper_vocab::{
    AttemptOutcome, JobId, JobState, Lease, Operation, TaskLease, TaskState, Trigger,
};
pub use tasks::{ClaimedTask, Progress, ReapedTask, Task, TaskEnd, TaskEnded, JOB_ENDED};
