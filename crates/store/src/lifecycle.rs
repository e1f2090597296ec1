//! The decisions the driver takes when an attempt ends without success, and the texts
//! they record, kept in one place so Postgres and SQLite cannot drift apart.
//!
//! Pure: no I/O, no clock. The driver executes a [`Plan`] inside one short transaction.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use rand::Rng;
use tablekeeper_vocab::JobId;

use crate::model::FailureKind;
use crate::retry::RetryPolicy;

/// What to do with a job whose attempt just ended without success.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Queue it again, due `delay` after the database's now. `give_back_attempt` undoes
    /// the claim's `attempt + 1` (a graceful release did not really try).
    ///
    /// If a newer queued job exists for the same (table, operation), the backends cancel
    /// this job as superseded instead: only one queued job per (table, operation) may
    /// exist, and the newer one will do the same work.
    Requeue {
        delay: Duration,
        give_back_attempt: bool,
    },
    /// Out of attempts: finish as `failed`.
    Fail,
}

/// What a backend did with a [`Plan`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Applied {
    Requeued { run_at: DateTime<Utc> },
    Failed,
    Superseded { queued_job_id: JobId },
}

/// After a worker reported failure of attempt `attempt` (1-based) out of `max_attempts`.
pub(crate) fn after_failure(
    kind: FailureKind,
    attempt: i32,
    max_attempts: i32,
    retry: &RetryPolicy,
    rng: &mut impl Rng,
) -> Plan {
    if kind != FailureKind::Permanent && attempt < max_attempts {
        Plan::Requeue {
            delay: retry.delay(attempt, rng),
            give_back_attempt: false,
        }
    } else {
        Plan::Fail
    }
}

/// After the reaper found the lease of attempt `attempt` expired. The attempt counts:
/// a job that keeps crashing its workers must end up `failed`, not loop forever. It is
/// due again at once: the crash was the worker's, not the table's.
pub(crate) fn after_lost_lease(attempt: i32, max_attempts: i32) -> Plan {
    if attempt < max_attempts {
        Plan::Requeue {
            delay: Duration::ZERO,
            give_back_attempt: false,
        }
    } else {
        Plan::Fail
    }
}

/// After a graceful release (shutdown): due again at once, attempt given back.
pub(crate) const AFTER_RELEASE: Plan = after_deferral(Duration::ZERO);

/// After a worker deferred its job (it may not run before `delay` from now): attempt given
/// back, due again then.
pub(crate) const fn after_deferral(delay: Duration) -> Plan {
    Plan::Requeue {
        delay,
        give_back_attempt: true,
    }
}

/// `jobs.error` of a job cancelled because a newer queued job took its place.
pub(crate) fn superseded_error(queued_job_id: JobId) -> String {
    format!("superseded by queued job {queued_job_id}")
}

/// `job_attempts.error` of an attempt closed by the reaper.
pub(crate) fn lost_lease_error(worker_id: &str, lease_expires_at: DateTime<Utc>) -> String {
    format!(
        "lease lost: worker `{worker_id}` did not renew its lease, which expired at {}",
        lease_expires_at.to_rfc3339_opts(SecondsFormat::Millis, true)
    )
}

/// `jobs.error` of a job failed by the reaper after its last attempt.
pub(crate) fn lost_lease_exhausted_error(
    attempt_error: &str,
    attempt: i32,
    max_attempts: i32,
) -> String {
    format!("{attempt_error}; no attempts left ({attempt} of {max_attempts} used)")
}

/// `jobs.error` of a job cancelled while queued.
pub(crate) const CANCELLED_WHILE_QUEUED: &str = "cancelled while queued";

/// `job_attempts.error` for an attempt found still open when its job was claimed again
/// (someone requeued a running job by hand).
pub(crate) const STRAY_ATTEMPT_ERROR: &str =
    "attempt was still open when its job was claimed again (the job was requeued outside tablekeeper)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_retry_until_the_last_attempt() {
        let retry = RetryPolicy {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(1),
        };
        let mut rng = rand::rng();
        assert!(matches!(
            after_failure(FailureKind::Failed, 1, 3, &retry, &mut rng),
            Plan::Requeue { give_back_attempt: false, delay } if delay <= Duration::from_secs(1)
        ));
        assert!(matches!(
            after_failure(FailureKind::Failed, 2, 3, &retry, &mut rng),
            Plan::Requeue { .. }
        ));
        assert_eq!(
            after_failure(FailureKind::Failed, 3, 3, &retry, &mut rng),
            Plan::Fail
        );
        // a permanent failure never retries, however many attempts are left
        assert_eq!(
            after_failure(FailureKind::Permanent, 1, 3, &retry, &mut rng),
            Plan::Fail
        );
    }

    #[test]
    fn lost_leases_consume_attempts_and_retry_at_once() {
        assert_eq!(
            after_lost_lease(1, 2),
            Plan::Requeue {
                delay: Duration::ZERO,
                give_back_attempt: false
            }
        );
        assert_eq!(after_lost_lease(2, 2), Plan::Fail);
    }

    #[test]
    fn texts_name_what_operators_look_for() {
        assert_eq!(superseded_error(JobId(42)), "superseded by queued job 42");
        let expiry = DateTime::parse_from_rfc3339("2026-11-05T10:00:00.5Z")
            .unwrap()
            .with_timezone(&Utc);
        let text = lost_lease_error("replica-a/3", expiry);
        assert!(text.contains("replica-a/3"), "{text}");
        assert!(text.contains("2026-11-05T10:00:00.500Z"), "{text}");
    }
}
