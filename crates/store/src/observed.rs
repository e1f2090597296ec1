//! The one wrapper every store call goes through: it times the call, logs failures with
//! structured fields, and tells an optional [`StoreObserver`] (the daemon's metrics).
//!
//! It owns the closed list of store operations ([`StoreOp`]), whose names are bounded
//! metric label values. It never changes what a call does, with one exception: a call
//! that has not answered within the call timeout is dropped and fails as `Unavailable`
//! (see [`crate::StoreOptions::call_timeout`]); a dropped call's transaction never
//! commits half-way, and a claim or renewal it might still have made lands on a lease the
//! worker no longer counts on.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::error::StoreError;
use crate::history::{CommitRow, StaleWriteRow};
use crate::model::{
    Attempt, ClaimOutcome, Enqueued, FailOutcome, FailureKind, FailureStreak, Job, JobFilter,
    JobState, LastSuccess, NewJob, ReapedJob,
};
use crate::retry::RetryPolicy;
use crate::store::{Backend, JobStore};

/// A store call, for timing and error counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StoreOp {
    Migrate,
    Ping,
    Enqueue,
    Claim,
    Heartbeat,
    Complete,
    Fail,
    Release,
    ReapExpired,
    Cancel,
    GetJob,
    ListJobs,
    Attempts,
    CountsByState,
    LastSuccess,
    LatestJobsForTable,
    RunningJobs,
    SetPaused,
    PausedOverrides,
    Defer,
    FailureStreaks,
    RecordCommits,
    History,
    RecordedRange,
    HistoryGaps,
    RecordStaleWrites,
    StaleWrites,
}

impl StoreOp {
    pub const ALL: &'static [StoreOp] = &[
        Self::Migrate,
        Self::Ping,
        Self::Enqueue,
        Self::Claim,
        Self::Heartbeat,
        Self::Complete,
        Self::Fail,
        Self::Release,
        Self::ReapExpired,
        Self::Cancel,
        Self::GetJob,
        Self::ListJobs,
        Self::Attempts,
        Self::CountsByState,
        Self::LastSuccess,
        Self::LatestJobsForTable,
        Self::RunningJobs,
        Self::SetPaused,
        Self::PausedOverrides,
        Self::Defer,
        Self::FailureStreaks,
        Self::RecordCommits,
        Self::History,
        Self::RecordedRange,
        Self::HistoryGaps,
        Self::RecordStaleWrites,
        Self::StaleWrites,
    ];

    /// Snake-case name, usable as a metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Migrate => "migrate",
            Self::Ping => "ping",
            Self::Enqueue => "enqueue",
            Self::Claim => "claim",
            Self::Heartbeat => "heartbeat",
            Self::Complete => "complete",
            Self::Fail => "fail",
            Self::Release => "release",
            Self::ReapExpired => "reap_expired",
            Self::Cancel => "cancel",
            Self::GetJob => "get_job",
            Self::ListJobs => "list_jobs",
            Self::Attempts => "attempts",
            Self::CountsByState => "counts_by_state",
            Self::LastSuccess => "last_success",
            Self::LatestJobsForTable => "latest_jobs_for_table",
            Self::RunningJobs => "running_jobs",
            Self::SetPaused => "set_paused",
            Self::PausedOverrides => "paused_overrides",
            Self::Defer => "defer",
            Self::FailureStreaks => "failure_streaks",
            Self::RecordCommits => "record_commits",
            Self::History => "history",
            Self::RecordedRange => "recorded_range",
            Self::HistoryGaps => "history_gaps",
            Self::RecordStaleWrites => "record_stale_writes",
            Self::StaleWrites => "stale_writes",
        }
    }
}

/// Receives every store call's duration and error. Implement it to export metrics; it is
/// called on the caller's task, so keep it cheap and non-blocking.
pub trait StoreObserver: Send + Sync + std::fmt::Debug {
    fn observe(&self, backend: Backend, op: StoreOp, elapsed: Duration, error: Option<&StoreError>);
}

/// Wraps a backend; built by [`crate::connect`].
#[derive(Debug)]
pub(crate) struct ObservedStore {
    inner: Arc<dyn JobStore>,
    observer: Option<Arc<dyn StoreObserver>>,
    call_timeout: Option<Duration>,
}

impl ObservedStore {
    pub(crate) fn new(
        inner: Arc<dyn JobStore>,
        observer: Option<Arc<dyn StoreObserver>>,
        call_timeout: Option<Duration>,
    ) -> Self {
        Self {
            inner,
            observer,
            call_timeout,
        }
    }

    async fn observe<T>(
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
        let backend = self.inner.backend();
        if let Err(err) = &result {
            tracing::warn!(
                backend = backend.as_str(),
                op = op.as_str(),
                elapsed_ms = elapsed.as_millis() as u64,
                retryable = err.is_retryable(),
                error = %err,
                "job store call failed"
            );
        } else {
            tracing::trace!(
                backend = backend.as_str(),
                op = op.as_str(),
                elapsed_ms = elapsed.as_millis() as u64,
                "job store call"
            );
        }
        if let Some(observer) = &self.observer {
            observer.observe(backend, op, elapsed, result.as_ref().err());
        }
        result
    }
}

#[async_trait]
impl JobStore for ObservedStore {
    fn backend(&self) -> Backend {
        self.inner.backend()
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        self.observe(StoreOp::Migrate, self.inner.migrate()).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.observe(StoreOp::Ping, self.inner.ping()).await
    }

    async fn enqueue(&self, job: NewJob) -> Result<Enqueued, StoreError> {
        self.observe(StoreOp::Enqueue, self.inner.enqueue(job))
            .await
    }

    async fn claim(&self, worker_id: &str, lease: Duration) -> Result<ClaimOutcome, StoreError> {
        self.observe(StoreOp::Claim, self.inner.claim(worker_id, lease))
            .await
    }

    async fn heartbeat(
        &self,
        job_id: i64,
        lease_token: Uuid,
        lease: Duration,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.observe(
            StoreOp::Heartbeat,
            self.inner.heartbeat(job_id, lease_token, lease),
        )
        .await
    }

    async fn complete(
        &self,
        job_id: i64,
        lease_token: Uuid,
        result: serde_json::Value,
    ) -> Result<bool, StoreError> {
        self.observe(
            StoreOp::Complete,
            self.inner.complete(job_id, lease_token, result),
        )
        .await
    }

    async fn fail(
        &self,
        job_id: i64,
        lease_token: Uuid,
        kind: FailureKind,
        error: &str,
        retry: &RetryPolicy,
    ) -> Result<FailOutcome, StoreError> {
        self.observe(
            StoreOp::Fail,
            self.inner.fail(job_id, lease_token, kind, error, retry),
        )
        .await
    }

    async fn release(
        &self,
        job_id: i64,
        lease_token: Uuid,
        reason: &str,
    ) -> Result<bool, StoreError> {
        self.observe(
            StoreOp::Release,
            self.inner.release(job_id, lease_token, reason),
        )
        .await
    }

    async fn reap_expired(&self, grace: Duration) -> Result<Vec<ReapedJob>, StoreError> {
        self.observe(StoreOp::ReapExpired, self.inner.reap_expired(grace))
            .await
    }

    async fn cancel(&self, job_id: i64) -> Result<bool, StoreError> {
        self.observe(StoreOp::Cancel, self.inner.cancel(job_id))
            .await
    }

    async fn get_job(&self, id: i64) -> Result<Option<Job>, StoreError> {
        self.observe(StoreOp::GetJob, self.inner.get_job(id)).await
    }

    async fn list_jobs(&self, filter: &JobFilter) -> Result<Vec<Job>, StoreError> {
        self.observe(StoreOp::ListJobs, self.inner.list_jobs(filter))
            .await
    }

    async fn attempts(&self, job_id: i64) -> Result<Vec<Attempt>, StoreError> {
        self.observe(StoreOp::Attempts, self.inner.attempts(job_id))
            .await
    }

    async fn counts_by_state(&self) -> Result<BTreeMap<JobState, i64>, StoreError> {
        self.observe(StoreOp::CountsByState, self.inner.counts_by_state())
            .await
    }

    async fn last_success(&self) -> Result<Vec<LastSuccess>, StoreError> {
        self.observe(StoreOp::LastSuccess, self.inner.last_success())
            .await
    }

    async fn latest_jobs_for_table(&self, table: &str) -> Result<Vec<Job>, StoreError> {
        self.observe(
            StoreOp::LatestJobsForTable,
            self.inner.latest_jobs_for_table(table),
        )
        .await
    }

    async fn running_jobs(&self) -> Result<Vec<Job>, StoreError> {
        self.observe(StoreOp::RunningJobs, self.inner.running_jobs())
            .await
    }

    async fn set_paused(&self, table: &str, paused: bool) -> Result<(), StoreError> {
        self.observe(StoreOp::SetPaused, self.inner.set_paused(table, paused))
            .await
    }

    async fn paused_overrides(&self) -> Result<BTreeMap<String, bool>, StoreError> {
        self.observe(StoreOp::PausedOverrides, self.inner.paused_overrides())
            .await
    }

    async fn defer(
        &self,
        job_id: i64,
        lease_token: Uuid,
        reason: &str,
        delay: Duration,
    ) -> Result<bool, StoreError> {
        self.observe(
            StoreOp::Defer,
            self.inner.defer(job_id, lease_token, reason, delay),
        )
        .await
    }

    async fn failure_streaks(&self) -> Result<Vec<FailureStreak>, StoreError> {
        self.observe(StoreOp::FailureStreaks, self.inner.failure_streaks())
            .await
    }

    async fn record_commits(&self, table: &str, commits: &[CommitRow]) -> Result<u64, StoreError> {
        self.observe(
            StoreOp::RecordCommits,
            self.inner.record_commits(table, commits),
        )
        .await
    }

    async fn history(
        &self,
        table: &str,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<CommitRow>, StoreError> {
        self.observe(StoreOp::History, self.inner.history(table, before, limit))
            .await
    }

    async fn recorded_range(&self, table: &str) -> Result<Option<(i64, i64)>, StoreError> {
        self.observe(StoreOp::RecordedRange, self.inner.recorded_range(table))
            .await
    }

    async fn history_gaps(&self, table: &str) -> Result<Vec<(i64, i64)>, StoreError> {
        self.observe(StoreOp::HistoryGaps, self.inner.history_gaps(table))
            .await
    }

    async fn record_stale_writes(&self, writes: &[StaleWriteRow]) -> Result<u64, StoreError> {
        self.observe(
            StoreOp::RecordStaleWrites,
            self.inner.record_stale_writes(writes),
        )
        .await
    }

    async fn stale_writes(&self, table: Option<&str>) -> Result<Vec<StaleWriteRow>, StoreError> {
        self.observe(StoreOp::StaleWrites, self.inner.stale_writes(table))
            .await
    }

    async fn close(&self) {
        self.inner.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_are_distinct_snake_case() {
        let names: std::collections::BTreeSet<&str> =
            StoreOp::ALL.iter().map(|op| op.as_str()).collect();
        assert_eq!(names.len(), StoreOp::ALL.len());
        assert!(names
            .iter()
            .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_')));
    }
}
