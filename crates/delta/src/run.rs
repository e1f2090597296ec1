//! How every operation runs: cancellable, retried on commit conflicts, and recognisable in the log.
//!
//! Owns three mechanics the operation modules share:
//! - [`cancellable`]: races a step against the caller's `CancellationToken` and drops the step
//!   when the token fires. The worker cancels when it cannot renew its job lease, so another
//!   replica may soon take the job over; dropping the future before its commit is what keeps two
//!   compactions of one table from both committing (DESIGN.md hazard 1). A commit that was
//!   already written cannot be undone: cancellation only stops work that has not committed yet.
//! - [`ConflictRetry`]: reruns an attempt after a lost commit race, with backoff and jitter,
//!   up to the caller's limit, counting each conflict.
//! - run markers: every commit tablekeeper writes carries `commitInfo.tablekeeper.runId`, because
//!   deltalake does not say which version its commit became (`CommitInfo` has no version and
//!   the returned table is already refreshed past concurrent commits).

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use deltalake::logstore::LogStore;
use futures::FutureExt as _;
use rand::Rng;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::error::{is_commit_conflict, DeltaError};
use crate::log::read::{commits_after, read_commits, Commit, MARKER_KEY};
use tablekeeper_vocab::Operation;

/// First backoff after a conflict; doubled per retry. Commits take tens of milliseconds on
/// object stores, so a quarter second lets the winning writer finish its post-commit work.
const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// Ceiling for one backoff step, so a job never sleeps longer than a lease renewal interval.
const BACKOFF_MAX: Duration = Duration::from_secs(10);

/// Runs `step` unless `cancel` fires first; a cancelled step is dropped before it can commit.
pub(crate) async fn cancellable<T>(
    cancel: &CancellationToken,
    table: &str,
    operation: Operation,
    step: impl Future<Output = Result<T, DeltaError>>,
) -> Result<T, DeltaError> {
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(DeltaError::Cancelled { table: table.to_owned(), operation }),
        result = step => result,
    }
}

/// Runs `work`, turning a panic inside it (tablekeeper's, or a dependency's on this task: the
/// Delta kernel re-raises its engine's panics on the caller's thread) into
/// [`DeltaError::Panicked`] naming the table and the operation, so no panic leaves an
/// operation or a probe. Every public operation runs in it, at the boundary where its future
/// is boxed.
pub(crate) async fn unwound<T>(
    table: &str,
    operation: impl std::fmt::Display,
    work: impl Future<Output = Result<T, DeltaError>>,
) -> Result<T, DeltaError> {
    match std::panic::AssertUnwindSafe(work).catch_unwind().await {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            tracing::error!(table, operation = %operation, message = %message, "operation panicked");
            Err(DeltaError::Panicked {
                table: table.to_owned(),
                operation: operation.to_string(),
                message,
            })
        }
    }
}

/// Backoff before retry number `retry` (0-based): exponential, capped, with full jitter so two
/// maintenance jobs that collided do not collide again in lockstep.
pub(crate) fn backoff(retry: u32) -> Duration {
    let exp = BACKOFF_BASE.saturating_mul(2u32.saturating_pow(retry.min(16)));
    let cap = exp.min(BACKOFF_MAX);
    let millis = u64::try_from(cap.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(rand::rng().random_range(millis / 2..=millis.max(1)))
}

/// Counts lost commit races of one operation and decides whether to try again.
#[derive(Debug)]
pub(crate) struct ConflictRetry {
    max_retries: u32,
    /// Conflicts met so far.
    pub conflicts: u32,
}

impl ConflictRetry {
    pub(crate) fn new(max_retries: u32) -> Self {
        ConflictRetry {
            max_retries,
            conflicts: 0,
        }
    }

    /// Handles a failed attempt: for a commit conflict within the limit, waits a backoff and
    /// returns `Ok(())` (try again); otherwise returns the error to give up with, turning an
    /// exhausted conflict into [`DeltaError::Conflict`].
    pub(crate) async fn after_failure(
        &mut self,
        err: DeltaError,
        cancel: &CancellationToken,
        table: &str,
        operation: Operation,
    ) -> Result<(), DeltaError> {
        let source = match err {
            DeltaError::Delta { source, .. } if is_commit_conflict(&source) => source,
            other => return Err(other),
        };
        self.conflicts += 1;
        if self.conflicts > self.max_retries {
            return Err(DeltaError::Conflict {
                table: table.to_owned(),
                operation,
                attempts: self.conflicts,
                source,
            });
        }
        let pause = backoff(self.conflicts - 1);
        tracing::info!(
            table,
            %operation,
            conflicts = self.conflicts,
            pause_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX),
            error = %source,
            "commit conflict, retrying"
        );
        cancellable(cancel, table, operation, async {
            tokio::time::sleep(pause).await;
            Ok(())
        })
        .await
    }
}

/// The commit metadata that marks a commit as written by run `run_id`.
pub(crate) fn run_marker(run_id: &str, operation: Operation) -> HashMap<String, Value> {
    HashMap::from([(
        MARKER_KEY.to_owned(),
        json!({ "runId": run_id, "operation": operation.as_str() }),
    )])
}

/// The commits after `after_version` carrying `run_id`, in version order.
///
/// Finds them by listing `_delta_log` from `after_version` on, not by asking for the version
/// after it: another writer's log cleanup may delete `after_version` itself (and any older
/// commit) right after our commit, which must not turn a commit that landed into an error.
pub(crate) async fn run_commits(
    log_store: &dyn LogStore,
    table: &str,
    after_version: u64,
    run_id: &str,
) -> Result<Vec<Commit>, DeltaError> {
    let versions =
        commits_after(log_store.object_store(None).as_ref(), table, after_version).await?;
    let commits = read_commits(log_store, table, versions).await?;
    Ok(commits
        .into_iter()
        .filter_map(|(_, commit)| commit)
        .filter(|commit| commit.run_id() == Some(run_id))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_inside_an_operation_becomes_an_error_naming_table_and_operation() {
        let work = async {
            tokio::task::yield_now().await;
            let parts: Vec<u8> = Vec::new();
            // a dependency's assertion, as deltalake's kernel raises them
            Ok::<u8, DeltaError>(parts[3])
        };
        let err = unwound("s3://lake/t", Operation::Compact, work)
            .await
            .expect_err("the panic is an error");
        let DeltaError::Panicked {
            ref operation,
            ref message,
            ..
        } = err
        else {
            panic!("expected Panicked, got {err:?}");
        };
        assert_eq!(operation, "compact");
        assert!(message.contains("index out of bounds"), "{message}");
        let text = err.to_string();
        assert!(
            text.starts_with("compact on `s3://lake/t` panicked: index out of bounds"),
            "{text}"
        );
        assert_eq!(err.class(), crate::error::ErrorClass::Transient, "retried");
        assert_eq!(
            unwound("t", "probe", async { Ok::<_, DeltaError>(7) })
                .await
                .ok(),
            Some(7)
        );
    }
    use deltalake::kernel::transaction::{CommitConflictError, TransactionError};
    use deltalake::DeltaTableError;

    fn conflict() -> DeltaError {
        DeltaError::delta(
            "/t",
            "optimize",
            DeltaTableError::Transaction {
                source: TransactionError::CommitConflict(CommitConflictError::ConcurrentDeleteRead),
            },
        )
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        assert!(backoff(0) <= BACKOFF_BASE);
        assert!(backoff(0) >= BACKOFF_BASE / 2);
        assert!(backoff(30) <= BACKOFF_MAX);
        assert!(backoff(30) >= BACKOFF_MAX / 2);
    }

    #[tokio::test]
    async fn conflicts_are_retried_then_reported_as_conflict() {
        let cancel = CancellationToken::new();
        let mut retry = ConflictRetry::new(1);
        retry
            .after_failure(conflict(), &cancel, "/t", Operation::Compact)
            .await
            .expect("first conflict is retried");
        let err = retry
            .after_failure(conflict(), &cancel, "/t", Operation::Compact)
            .await
            .expect_err("second conflict exceeds the limit");
        assert_eq!(retry.conflicts, 2);
        assert!(matches!(err, DeltaError::Conflict { attempts: 2, .. }));
        assert_eq!(err.class(), crate::error::ErrorClass::Conflict);
    }

    #[tokio::test]
    async fn other_errors_are_not_retried() {
        let cancel = CancellationToken::new();
        let mut retry = ConflictRetry::new(5);
        let err = retry
            .after_failure(
                DeltaError::NotADeltaTable { table: "/t".into() },
                &cancel,
                "/t",
                Operation::Compact,
            )
            .await
            .expect_err("not retried");
        assert!(matches!(err, DeltaError::NotADeltaTable { .. }));
        assert_eq!(retry.conflicts, 0);
    }

    #[tokio::test]
    async fn cancellation_drops_the_step() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let result = cancellable(&cancel, "/t", Operation::Vacuum, async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(())
        })
        .await;
        assert!(matches!(result, Err(DeltaError::Cancelled { .. })));
    }
}
