//! The values that cross the `JobStore` boundary: rows of `jobs` and `job_attempts` and the
//! arguments and outcomes of the store calls, shared by both databases.
//!
//! The closed sets stored in them (operation, state, trigger, outcome) are the vocabulary
//! crate's; this module must never talk to a database.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tablekeeper_vocab::{AttemptOutcome, JobId, JobState, Lease, Operation, Trigger};
use uuid::Uuid;

use crate::error::StoreError;

/// One row of `jobs`.
///
/// Serialized for the JSON API with RFC 3339 UTC times. `lease_token` is not serialized:
/// it is the fencing credential of the running worker and no API reader needs it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Job {
    pub id: JobId,
    pub table_name: String,
    pub operation: Operation,
    pub concurrency_key: String,
    pub state: JobState,
    pub trigger: Trigger,
    /// Higher runs first among due jobs.
    pub priority: i32,
    /// Not before.
    pub run_at: DateTime<Utc>,
    /// Attempts consumed so far.
    pub attempt: i32,
    pub max_attempts: i32,
    /// Worker of the latest attempt.
    pub worker_id: Option<String>,
    #[serde(skip_serializing, default)]
    #[schemars(skip)]
    pub lease_token: Option<Uuid>,
    /// Set only while running.
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// Start of the latest attempt.
    pub started_at: Option<DateTime<Utc>>,
    /// Set in terminal states.
    pub finished_at: Option<DateTime<Utc>>,
    /// JSON metrics of a successful run.
    pub result: Option<serde_json::Value>,
    /// Error of the latest failed attempt, or why the job was failed or cancelled.
    pub error: Option<String>,
    /// What the daemon estimated the job would cost and buy when it was queued (DESIGN.md
    /// "Budget"), beside what it measured (`result.cost`, `result.outcome`).
    #[serde(default)]
    pub estimate: Option<serde_json::Value>,
}

/// One row of `job_attempts`. An open attempt (its job is running) has `finished_at`
/// and `outcome` both `None`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub id: i64,
    pub job_id: JobId,
    pub attempt: i32,
    pub worker_id: String,
    #[serde(skip_serializing, default)]
    pub lease_token: Option<Uuid>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub outcome: Option<AttemptOutcome>,
    pub error: Option<String>,
}

/// A request to run `operation` on `table_name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewJob {
    pub table_name: String,
    pub operation: Operation,
    pub concurrency_key: String,
    pub trigger: Trigger,
    pub priority: i32,
    /// Not before; `None` = now (database clock).
    pub run_at: Option<DateTime<Utc>>,
    /// At least 1.
    pub max_attempts: i32,
    /// The cron tick this job is for (schedule triggers): one job per tick across every
    /// replica, even after it started. `None` for manual and automatic jobs.
    pub scheduled_for: Option<DateTime<Utc>>,
}

impl NewJob {
    /// A job due now with priority 0, the default key `table:<name>` and 3 attempts
    /// (the inventory's documented default `max_attempts`).
    pub fn new(table_name: impl Into<String>, operation: Operation, trigger: Trigger) -> Self {
        let table_name = table_name.into();
        Self {
            concurrency_key: format!("table:{table_name}"),
            table_name,
            operation,
            trigger,
            priority: 0,
            run_at: None,
            max_attempts: 3,
            scheduled_for: None,
        }
    }

    /// Marks the job as the one for the cron tick at `tick`.
    pub fn for_tick(mut self, tick: DateTime<Utc>) -> Self {
        self.scheduled_for = Some(tick);
        self
    }

    pub fn with_concurrency_key(mut self, key: impl Into<String>) -> Self {
        self.concurrency_key = key.into();
        self
    }

    pub fn with_priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }

    pub fn with_run_at(mut self, run_at: DateTime<Utc>) -> Self {
        self.run_at = Some(run_at);
        self
    }

    pub fn with_max_attempts(mut self, max_attempts: i32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Refuses values the database would refuse, with a message saying what is accepted.
    pub(crate) fn validate(&self) -> Result<(), StoreError> {
        let mut problems = Vec::new();
        if self.table_name.trim().is_empty() {
            problems.push("`table_name` must not be empty".to_owned());
        }
        if self.concurrency_key.trim().is_empty() {
            problems.push("`concurrency_key` must not be empty".to_owned());
        }
        if self.max_attempts < 1 {
            problems.push(format!(
                "`max_attempts` is {}; it must be at least 1",
                self.max_attempts
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(StoreError::InvalidInput(problems.join("; ")))
        }
    }
}

/// Result of [`crate::JobStore::enqueue`].
#[derive(Clone, Debug, PartialEq)]
pub struct Enqueued {
    /// The queued job: the new one, or the existing queued job this request joined.
    pub job: Job,
    /// True if a new row was inserted, false if the request coalesced into a queued job.
    pub created: bool,
}

/// A job this worker now holds a lease on. Every later write of the worker takes `lease`.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimedJob {
    pub job: Job,
    pub lease: Lease,
    /// Database clock.
    pub lease_expires_at: DateTime<Utc>,
}

/// A due queued job a claim skipped because a running job held its concurrency key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyWait {
    pub job_id: JobId,
    pub table_name: String,
    pub operation: Operation,
    pub concurrency_key: String,
}

/// Result of [`crate::JobStore::claim`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimOutcome {
    pub job: Option<ClaimedJob>,
    /// Due jobs ranked ahead of the claimed one (all due jobs when nothing was claimed)
    /// whose key was held by a running job. A job blocked for a long time is reported by
    /// every claim that passes it: count these as "claims deferred", not as jobs.
    pub key_waits: Vec<KeyWait>,
}

/// Why a worker reports failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The operation failed (I/O, bad table, ...). Attempt outcome `failed`.
    Failed,
    /// The Delta commit met a concurrent commit. Attempt outcome `conflict`.
    Conflict,
    /// The operation can never succeed as configured (not a Delta table, unsupported
    /// protocol, unsafe VACUUM refused...): outcome `failed`, and the job fails at once
    /// instead of burning its remaining attempts.
    Permanent,
}

impl FailureKind {
    pub fn outcome(self) -> AttemptOutcome {
        match self {
            Self::Failed | Self::Permanent => AttemptOutcome::Failed,
            Self::Conflict => AttemptOutcome::Conflict,
        }
    }
}

/// Result of [`crate::JobStore::fail`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOutcome {
    /// Requeued; due again at `run_at` (database clock).
    Retrying { run_at: DateTime<Utc> },
    /// Out of attempts: the job is `failed`.
    Failed,
    /// Would have been requeued, but a newer queued job for the same (table, operation)
    /// exists: this job is `cancelled` with error "superseded by queued job N" and that
    /// job carries on.
    Superseded { queued_job_id: JobId },
    /// The token no longer holds the lease (the reaper took the job, or it finished):
    /// nothing changed.
    LeaseLost,
}

/// A job the reaper took back from a worker whose lease expired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReapedJob {
    pub job_id: JobId,
    pub table_name: String,
    pub operation: Operation,
    /// The worker that lost the lease.
    pub worker_id: String,
    /// The attempt that was lost.
    pub attempt: i32,
    /// The lease expiry the reaper acted on (database clock).
    pub lease_expires_at: DateTime<Utc>,
    /// True: queued again, due now. False: out of attempts (`failed`) or superseded.
    pub requeued: bool,
    /// Set when a newer queued job for the same (table, operation) took over and this
    /// job was cancelled instead of requeued.
    pub superseded_by: Option<JobId>,
}

/// Filter for [`crate::JobStore::list_jobs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobFilter {
    pub table: Option<String>,
    pub state: Option<JobState>,
    pub operation: Option<Operation>,
    /// Clamped to `1..=MAX_LIST_LIMIT`.
    pub limit: i64,
}

/// Upper bound of [`JobFilter::limit`]: keeps one API call from reading the whole table.
pub const MAX_LIST_LIMIT: i64 = 1000;

impl Default for JobFilter {
    fn default() -> Self {
        Self {
            table: None,
            state: None,
            operation: None,
            limit: 100,
        }
    }
}

impl JobFilter {
    pub(crate) fn clamped_limit(&self) -> i64 {
        self.limit.clamp(1, MAX_LIST_LIMIT)
    }
}

/// Failed attempts of an operation on a table since its last successful attempt, fleet-wide
/// (every replica's attempts, from `job_attempts`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureStreak {
    pub table_name: String,
    pub operation: Operation,
    /// Attempts that ended `failed` or `conflict` after the last `succeeded` one.
    pub failures: i64,
    /// When the newest of them ended, and its error.
    pub last_failed_at: DateTime<Utc>,
    pub last_error: Option<String>,
}

/// Latest successful finish of an operation on a table, from the job table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastSuccess {
    pub table_name: String,
    pub operation: Operation,
    pub finished_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_job_validation_lists_every_problem() {
        let job = NewJob::new("", Operation::Compact, Trigger::Manual)
            .with_concurrency_key(" ")
            .with_max_attempts(0);
        let err = job.validate().unwrap_err().to_string();
        for needle in ["table_name", "concurrency_key", "max_attempts"] {
            assert!(err.contains(needle), "{needle} missing in {err}");
        }
        assert!(
            NewJob::new("silver.events", Operation::Vacuum, Trigger::Schedule)
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn list_limit_is_clamped() {
        let none = JobFilter {
            limit: 0,
            ..JobFilter::default()
        };
        assert_eq!(none.clamped_limit(), 1);
        let huge = JobFilter {
            limit: 1_000_000,
            ..JobFilter::default()
        };
        assert_eq!(huge.clamped_limit(), MAX_LIST_LIMIT);
    }
}
