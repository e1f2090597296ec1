//! Retry backoff for failed attempts: exponential with a cap and full jitter.
//!
//! Owns the delay computation only; the store adds the delay to the database clock. It
//! must never sleep.

use std::time::Duration;

use rand::Rng;

/// How long a failed job waits before its next attempt.
///
/// The delay after attempt `n` (1-based) is drawn uniformly from
/// `[0, min(cap, base * 2^(n-1))]` ("full jitter", from the AWS Architecture Blog
/// "Exponential Backoff And Jitter"): replicas whose jobs failed together (a store
/// outage) spread their retries instead of returning in lockstep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    /// Base 1 minute: a burst of conflicting writer commits or a throttled object store
    /// usually clears within a minute. Cap 1 hour: a table failing overnight still gets
    /// several attempts before its next daily schedule.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(60),
            cap: Duration::from_secs(3600),
        }
    }
}

impl RetryPolicy {
    /// The upper bound of the delay after attempt `attempt` (1-based; 0 is treated as 1):
    /// `min(cap, base * 2^(attempt-1))`.
    pub fn ceiling(&self, attempt: i32) -> Duration {
        let doublings = attempt.saturating_sub(1).clamp(0, 31) as u32;
        self.base
            .checked_mul(1_u32 << doublings)
            .unwrap_or(self.cap)
            .min(self.cap)
    }

    /// A delay drawn uniformly from `[0, ceiling(attempt)]`, in whole microseconds (the
    /// precision of Postgres timestamps).
    pub fn delay(&self, attempt: i32, rng: &mut impl Rng) -> Duration {
        let ceiling = u64::try_from(self.ceiling(attempt).as_micros()).unwrap_or(u64::MAX);
        Duration::from_micros(rng.random_range(0..=ceiling))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn ceiling_doubles_up_to_the_cap() {
        let policy = RetryPolicy {
            base: Duration::from_secs(10),
            cap: Duration::from_secs(100),
        };
        let ceilings: Vec<u64> = (0..8).map(|a| policy.ceiling(a).as_secs()).collect();
        assert_eq!(ceilings, [10, 10, 20, 40, 80, 100, 100, 100]);
        // Large attempt numbers saturate instead of overflowing.
        assert_eq!(policy.ceiling(i32::MAX), policy.cap);
    }

    #[test]
    fn delays_stay_within_the_ceiling_and_are_spread() {
        let policy = RetryPolicy::default();
        let mut rng = StdRng::seed_from_u64(42);
        for attempt in 1..=10 {
            let ceiling = policy.ceiling(attempt);
            let delays: Vec<Duration> = (0..200).map(|_| policy.delay(attempt, &mut rng)).collect();
            assert!(delays.iter().all(|d| *d <= ceiling));
            // Full jitter: both halves of the range are used.
            assert!(delays.iter().any(|d| *d < ceiling / 2));
            assert!(delays.iter().any(|d| *d > ceiling / 2));
        }
    }

    #[test]
    fn zero_base_means_retry_at_once() {
        let policy = RetryPolicy {
            base: Duration::ZERO,
            cap: Duration::from_secs(1),
        };
        assert_eq!(policy.delay(3, &mut rand::rng()), Duration::ZERO);
    }
}
