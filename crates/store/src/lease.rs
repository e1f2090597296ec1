//! Lease timing: when a worker heartbeats, when it must give up, and when the reaper may
//! take a job over. The store enforces the database side (fenced writes, expiry on the
//! database clock); this module states the worker side as functions so the daemon and the
//! tests use the same numbers. It must never read a wall clock: workers measure with
//! their local monotonic clock ([`Instant`]), the database with its own.
//!
//! # Why this matters
//!
//! Two compactions of one table that overlap both commit and duplicate rows (DESIGN.md,
//! "Known hazards"). The concurrency key keeps a second job off a key while the first is
//! `running`; after a crash the reaper must hand the key to someone else. So a worker that
//! cannot reach the job table must stop its operation **before** the reaper can take the
//! job over, without talking to anyone.
//!
//! # The rules, for a lease of length `L`
//!
//! - The worker renews every [`heartbeat_interval`] = `L/4`.
//! - The worker records the local monotonic time at which it **sent** each renewal (and
//!   the claim, which is the first renewal). It must abandon its operation once
//!   [`abandon_deadline`] = (send time of the last renewal that succeeded) + `3L/4` has
//!   passed without a newer successful renewal. A renewal that returns "lease lost"
//!   means abandon at once. An error (database unreachable) is not a success.
//! - The database sets `lease_expires_at = db_now + L` when it *processes* a renewal.
//! - The reaper takes a job over only when `lease_expires_at + grace < db_now`, with
//!   `grace` = [`default_reap_grace`] = `L/4` unless configured otherwise.
//!
//! # Why abandon always comes strictly before takeover
//!
//! Let `s` be the send time of the worker's last renewal that it saw succeed. The database
//! processed that renewal at some real time `p >= s` (a reply cannot precede its request),
//! so the lease it wrote expires no earlier than `p + L >= s + L`. Renewals processed
//! later (including ones whose reply the worker never saw) only push the expiry further.
//! The reaper needs `db_now > expiry + grace`, i.e. real time `> s + L + grace`.
//! The worker stops at `s + 3L/4`. The gap is
//!
//! ```text
//! takeover - abandon  >=  (s + L + grace) - (s + 3L/4)  =  L/4 + grace  =  L/2  (default)
//! ```
//!
//! however late the renewal's request or reply was: delays make the worker's view of
//! `s` older (it abandons earlier), never newer. A renewal that arrives after the reaper
//! has taken over finds a different (or no) lease token and fails, so it cannot revive a
//! lease. Only the *rate* of the two clocks matters, never their offset: the worker
//! measures `3L/4` on its own clock, the database measures `L + grace` on its own.
//!
//! The `L/2` margin exists for what the proof idealizes: the worker's watchdog firing
//! late (a busy runtime), the operation taking time to stop after being told to (an
//! in-flight Delta commit must not be *started* after the deadline, and one started
//! before it must finish within the margin), clock rate error, and a step of the
//! database host's clock (Postgres' `clock_timestamp()` follows the system clock; a
//! forward step of `X` shortens every lease by `X`). Choose `L` so that `L/2` comfortably
//! covers the longest Delta commit.
//!
//! With renewals every `L/4` the worker gets two more tries (at `L/4` and `L/2` after the
//! last success) before it must give up at `3L/4`.

use std::time::{Duration, Instant};

/// Renewals per lease length: heartbeat every `L / HEARTBEATS_PER_LEASE`. Four gives a
/// worker two retries before [`ABANDON_QUARTERS`] quarters have passed (see module docs).
pub const HEARTBEATS_PER_LEASE: u32 = 4;

/// A worker abandons after this many quarters of the lease without a successful renewal.
pub const ABANDON_QUARTERS: u32 = 3;

/// Default reap grace in quarters of the lease.
pub const GRACE_QUARTERS: u32 = 1;

/// How often a worker renews a lease of length `lease`: `lease / 4`.
pub fn heartbeat_interval(lease: Duration) -> Duration {
    lease / HEARTBEATS_PER_LEASE
}

/// How long after sending its last successful renewal a worker may keep working:
/// `3 * lease / 4`.
pub fn abandon_after(lease: Duration) -> Duration {
    lease / 4 * ABANDON_QUARTERS
}

/// The instant by which a worker must have abandoned its operation if no renewal sent
/// after `renewal_sent_at` has succeeded. `renewal_sent_at` is when the worker SENT its
/// last successful renewal (or the claim), on its local monotonic clock.
pub fn abandon_deadline(renewal_sent_at: Instant, lease: Duration) -> Instant {
    renewal_sent_at + abandon_after(lease)
}

/// The reaper's default grace after lease expiry: `lease / 4`.
pub fn default_reap_grace(lease: Duration) -> Duration {
    lease / 4 * GRACE_QUARTERS
}

/// The earliest instant (worker's clock) at which the reaper could take over a job whose
/// last successful renewal was sent at `renewal_sent_at`: `renewal_sent_at + lease + grace`.
pub fn takeover_not_before(renewal_sent_at: Instant, lease: Duration, grace: Duration) -> Instant {
    renewal_sent_at + lease + grace
}

/// Time between a worker's abandon deadline and the earliest takeover:
/// `lease/4 + grace` (`lease/2` with the default grace).
pub fn safety_margin(lease: Duration, grace: Duration) -> Duration {
    (lease + grace).saturating_sub(abandon_after(lease))
}

/// The worker's side of one lease: when to renew next and when to give up.
///
/// Feed it the send time of the claim, then of every renewal: [`LeaseClock::renewed`]
/// when it succeeded, [`LeaseClock::renewal_failed`] when it errored (database
/// unreachable). Renewals are spaced `L/4` apart whatever their result, so a worker cut
/// off from the database tries twice more before its deadline instead of hammering it.
#[derive(Clone, Copy, Debug)]
pub struct LeaseClock {
    lease: Duration,
    last_success_sent_at: Instant,
    last_sent_at: Instant,
}

impl LeaseClock {
    /// `claim_sent_at`: when the claim request was sent (before awaiting it).
    pub fn new(claim_sent_at: Instant, lease: Duration) -> Self {
        Self {
            lease,
            last_success_sent_at: claim_sent_at,
            last_sent_at: claim_sent_at,
        }
    }

    /// Record a renewal that succeeded; `sent_at` is when it was sent. An older send time
    /// than the one recorded is ignored (replies may arrive out of order).
    pub fn renewed(&mut self, sent_at: Instant) {
        self.last_success_sent_at = self.last_success_sent_at.max(sent_at);
        self.last_sent_at = self.last_sent_at.max(sent_at);
    }

    /// Record a renewal sent at `sent_at` that failed with an error. It does not move
    /// the deadline; it only delays the next try by `L/4`. (A renewal answered with
    /// "lease lost" is not a failure to retry: abandon at once.)
    pub fn renewal_failed(&mut self, sent_at: Instant) {
        self.last_sent_at = self.last_sent_at.max(sent_at);
    }

    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// When the next renewal is due: `L/4` after the last one sent.
    pub fn next_heartbeat(&self) -> Instant {
        self.last_sent_at + heartbeat_interval(self.lease)
    }

    /// [`abandon_deadline`] of the last successful renewal.
    pub fn deadline(&self) -> Instant {
        abandon_deadline(self.last_success_sent_at, self.lease)
    }

    /// True once the worker must stop working on the job.
    pub fn must_abandon(&self, now: Instant) -> bool {
        now >= self.deadline()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const LEASES: [Duration; 6] = [
        Duration::from_millis(100),
        Duration::from_secs(1),
        Duration::from_secs(2),
        Duration::from_secs(30),
        Duration::from_secs(300),
        Duration::from_secs(3600),
    ];

    #[test]
    fn abandon_precedes_takeover_by_half_a_lease_with_default_grace() {
        let base = Instant::now();
        for lease in LEASES {
            let grace = default_reap_grace(lease);
            // The worker's renewal may have been processed by the database any time after
            // it was sent: the later, the later the expiry. Take the worst case (processed
            // the instant it was sent).
            for sent_offset_ms in [0_u64, 1, 250, 10_000] {
                let sent = base + Duration::from_millis(sent_offset_ms);
                let abandon = abandon_deadline(sent, lease);
                let takeover = takeover_not_before(sent, lease, grace);
                assert!(abandon < takeover, "lease {lease:?}");
                assert_eq!(takeover - abandon, lease / 2, "lease {lease:?}");
                assert_eq!(safety_margin(lease, grace), lease / 2);
            }
            assert_eq!(heartbeat_interval(lease) * 3, abandon_after(lease));
        }
    }

    #[test]
    fn margin_shrinks_with_grace_but_never_below_a_quarter_lease() {
        for lease in LEASES {
            assert_eq!(safety_margin(lease, Duration::ZERO), lease / 4);
            assert!(safety_margin(lease, Duration::ZERO) > Duration::ZERO);
        }
    }

    /// Simulates one lease under random request/reply delays and losses and checks,
    /// against the database's rules, that the worker always stops at least `L/2` before
    /// the earliest possible takeover. Times are microseconds of real time.
    #[test]
    fn abandon_precedes_takeover_under_random_delays_and_losses() {
        let mut rng = StdRng::seed_from_u64(0x7ab1e);
        for lease in LEASES {
            let l = lease.as_micros() as u64;
            let grace = default_reap_grace(lease).as_micros() as u64;
            for _ in 0..2_000 {
                let max_delay = rng.random_range(0..=l);
                simulate_one_lease(&mut rng, l, grace, max_delay);
            }
        }
    }

    fn simulate_one_lease(rng: &mut StdRng, l: u64, grace: u64, max_delay: u64) {
        // The claim was sent at 0 and processed at p0 >= 0; the worker got its reply.
        let p0 = rng.random_range(0..=max_delay);
        let hb = l / 4;
        // Each renewal sent at k * L/4 (the worker keeps its schedule even without
        // replies): processed after a random delay, or lost; reply delayed, or lost.
        struct Renewal {
            sent: u64,
            processed: Option<u64>,
            reply_delay: Option<u64>,
        }
        let renewals: Vec<Renewal> = (1..=40)
            .map(|k| {
                let sent = k * hb;
                let processed = rng
                    .random_bool(0.8)
                    .then(|| sent + rng.random_range(0..=max_delay));
                let reply_delay = rng
                    .random_bool(0.8)
                    .then(|| rng.random_range(0..=max_delay));
                Renewal {
                    sent,
                    processed,
                    reply_delay,
                }
            })
            .collect();

        // The worker sends nothing once it has stopped, and what it stops at depends on
        // which renewals succeeded: shrink the set of sent renewals until it is
        // consistent with the stop time (each pass can only move the stop earlier).
        let mut cutoff = u64::MAX;
        loop {
            let sent: Vec<&Renewal> = renewals.iter().filter(|r| r.sent < cutoff).collect();
            let (deadline, takeover) = play(&sent, p0, l, grace);
            if deadline >= cutoff {
                assert!(
                    deadline + l / 2 <= takeover,
                    "lease {l}us: worker stops at {deadline}us, takeover possible at {takeover}us"
                );
                return;
            }
            cutoff = deadline;
        }

        /// Returns (worker stop time, earliest takeover) for the renewals actually sent.
        fn play(renewals: &[&Renewal], p0: u64, l: u64, grace: u64) -> (u64, u64) {
            // Database side: renewals in processing order extend the lease until the
            // reaper finds it expired (earliest possible reaper run: expiry + grace).
            let mut processed: Vec<(u64, usize)> = renewals
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.processed.map(|p| (p, i)))
                .collect();
            processed.sort_unstable();
            let mut expiry = p0 + l;
            let mut takeover = None;
            let mut succeeded = vec![false; renewals.len()];
            for (p, i) in processed {
                if p > expiry + grace {
                    takeover = Some(expiry + grace);
                    break;
                }
                expiry = expiry.max(p + l);
                succeeded[i] = true;
            }
            let takeover = takeover.unwrap_or(expiry + grace);

            // Worker side: replies of successful renewals in arrival order move the
            // deadline; a reply arriving after the deadline comes too late.
            let abandon = abandon_after(Duration::from_micros(l)).as_micros() as u64;
            let mut replies: Vec<(u64, u64)> = renewals
                .iter()
                .enumerate()
                .filter(|(i, _)| succeeded[*i])
                .filter_map(|(_, r)| Some((r.processed? + r.reply_delay?, r.sent)))
                .collect();
            replies.sort_unstable();
            let mut deadline = abandon;
            for (arrived, sent) in replies {
                if arrived >= deadline {
                    break;
                }
                deadline = deadline.max(sent + abandon);
            }
            (deadline, takeover)
        }
    }

    #[test]
    fn lease_clock_tracks_the_latest_successful_send() {
        let t0 = Instant::now();
        let lease = Duration::from_secs(4);
        let mut clock = LeaseClock::new(t0, lease);
        assert_eq!(clock.next_heartbeat(), t0 + Duration::from_secs(1));
        assert_eq!(clock.deadline(), t0 + Duration::from_secs(3));
        assert!(!clock.must_abandon(t0 + Duration::from_millis(2999)));
        assert!(clock.must_abandon(t0 + Duration::from_secs(3)));
        clock.renewed(t0 + Duration::from_secs(2));
        // A late reply to an older renewal does not move the deadline back.
        clock.renewed(t0 + Duration::from_secs(1));
        assert_eq!(clock.deadline(), t0 + Duration::from_secs(5));
        assert!(!clock.must_abandon(t0 + Duration::from_secs(4)));

        // Failed renewals space the next try but never extend the deadline.
        clock.renewal_failed(t0 + Duration::from_secs(3));
        assert_eq!(clock.next_heartbeat(), t0 + Duration::from_secs(4));
        clock.renewal_failed(t0 + Duration::from_secs(4));
        assert_eq!(clock.deadline(), t0 + Duration::from_secs(5));
        assert!(clock.must_abandon(t0 + Duration::from_secs(5)));
    }
}
