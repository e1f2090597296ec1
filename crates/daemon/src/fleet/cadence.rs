//! When each table is probed next: tables whose log moves are probed every
//! `probe_interval`; a table whose version did not change since its last probe waits twice
//! as long after each such probe, up to `max_probe_interval`. A fleet of mostly idle tables
//! then costs a few requests per table per hour instead of one per minute, and a commit to
//! an idle table is still seen within `max_probe_interval`.
//!
//! Pure: the fleet keeps each table's [`Cadence`] and asks [`Cadence::after_probe`] when the
//! next probe is due.

use std::time::Duration;

use tokio::time::Instant;

/// Built-in default for `max_probe_interval`.
pub(crate) const DEFAULT_MAX_PROBE_INTERVAL: Duration = Duration::from_secs(15 * 60);

/// A table's probing rhythm.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cadence {
    /// Probes in a row that found the version unchanged.
    pub idle_probes: u32,
    /// When the next probe is due; `None` until the first probe.
    pub next_probe_at: Option<Instant>,
}

/// The intervals a fleet probes at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProbeIntervals {
    /// For tables whose log moved since their previous probe (and for every first probe).
    pub active: Duration,
    /// The longest an unchanged table waits.
    pub max: Duration,
}

/// What a probe found, as far as the rhythm is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// The same version as the previous probe.
    Unchanged,
    /// A new version, a first probe, or a failed probe (retried at the active interval).
    Moved,
    /// The table's first damage check or first history read still runs beside the probe:
    /// probed again after [`CHECK_FOLLOW_UP`] (or the active interval, when shorter) to take
    /// its result, so damage present at start-up is reported within seconds of the listing's
    /// end, and the operations held for the history wait no longer than that.
    CheckPending,
}

/// How soon a table whose first damage check is still running is probed again: each such
/// probe costs one LIST of its log.
pub(crate) const CHECK_FOLLOW_UP: Duration = Duration::from_secs(5);

impl Cadence {
    /// The rhythm after a probe at `now`.
    pub(crate) fn after_probe(self, seen: Seen, now: Instant, intervals: ProbeIntervals) -> Self {
        let idle_probes = match seen {
            Seen::Unchanged => self.idle_probes.saturating_add(1),
            Seen::Moved | Seen::CheckPending => 0,
        };
        let wait = match seen {
            Seen::CheckPending => CHECK_FOLLOW_UP.min(intervals.active),
            Seen::Unchanged | Seen::Moved => wait(idle_probes, intervals),
        };
        Cadence {
            idle_probes,
            // an interval so long it overflows the clock means "not in this process's life"
            next_probe_at: Some(
                now.checked_add(wait)
                    .unwrap_or(now + Duration::from_secs(100 * 365 * 86_400)),
            ),
        }
    }

    /// Whether a probe is due at `now` (always before the first probe).
    pub(crate) fn due(self, now: Instant) -> bool {
        self.next_probe_at.is_none_or(|at| at <= now)
    }
}

/// The clock probe timing reads: tokio's, moved forward by whatever a test adds to it (an
/// injected clock: a simulated day of probing passes in a minute).
#[derive(Debug, Clone, Default)]
pub(crate) struct Clock {
    /// Milliseconds added to tokio's clock; `None` in production.
    skew: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

impl Clock {
    pub(crate) fn now(&self) -> Instant {
        let now = Instant::now();
        match &self.skew {
            Some(skew) => {
                now + Duration::from_millis(skew.load(std::sync::atomic::Ordering::SeqCst))
            }
            None => now,
        }
    }

    /// A clock that moves only when [`Clock::advance`] moves it (besides real time).
    #[cfg(test)]
    pub(crate) fn manual() -> Self {
        Clock {
            skew: Some(std::sync::Arc::default()),
        }
    }

    #[cfg(test)]
    pub(crate) fn advance(&self, by: Duration) {
        if let Some(skew) = &self.skew {
            let millis = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
            skew.fetch_add(millis, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// `active × 2^idle_probes`, capped at `max` (and never under `active`).
fn wait(idle_probes: u32, intervals: ProbeIntervals) -> Duration {
    let factor = 1u32.checked_shl(idle_probes.min(31)).unwrap_or(u32::MAX);
    intervals
        .active
        .saturating_mul(factor)
        .min(intervals.max)
        .max(intervals.active)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVALS: ProbeIntervals = ProbeIntervals {
        active: Duration::from_secs(60),
        max: Duration::from_secs(900),
    };

    #[test]
    fn a_pending_first_check_is_followed_up_within_seconds_and_resets_idling() {
        let start = Instant::now();
        let idle = Cadence {
            idle_probes: 3,
            next_probe_at: None,
        };
        let pending = idle.after_probe(Seen::CheckPending, start, INTERVALS);
        assert_eq!(pending.idle_probes, 0);
        assert_eq!(pending.next_probe_at, Some(start + CHECK_FOLLOW_UP));
        let short = ProbeIntervals {
            active: Duration::from_secs(1),
            max: Duration::from_secs(10),
        };
        let pending = idle.after_probe(Seen::CheckPending, start, short);
        assert_eq!(pending.next_probe_at, Some(start + Duration::from_secs(1)));
    }

    #[test]
    fn an_idle_table_waits_twice_as_long_each_time_up_to_the_max() {
        let start = Instant::now();
        let mut cadence = Cadence::default();
        assert!(cadence.due(start));
        let mut waits = Vec::new();
        for _ in 0..7 {
            let next = cadence.after_probe(Seen::Unchanged, start, INTERVALS);
            waits.push((next.next_probe_at.unwrap() - start).as_secs());
            cadence = next;
        }
        assert_eq!(waits, [120, 240, 480, 900, 900, 900, 900]);
        assert!(!cadence.due(start + Duration::from_secs(899)));
        assert!(cadence.due(start + Duration::from_secs(900)));
    }

    #[test]
    fn a_new_version_brings_the_table_back_to_the_active_interval() {
        let start = Instant::now();
        let idle = Cadence {
            idle_probes: 12,
            next_probe_at: None,
        };
        let moved = idle.after_probe(Seen::Moved, start, INTERVALS);
        assert_eq!(moved.idle_probes, 0);
        assert_eq!(moved.next_probe_at, Some(start + Duration::from_secs(60)));
    }

    #[test]
    fn a_max_under_the_active_interval_never_probes_faster_than_active() {
        let intervals = ProbeIntervals {
            active: Duration::from_secs(60),
            max: Duration::from_secs(10),
        };
        let next = Cadence::default().after_probe(Seen::Unchanged, Instant::now(), intervals);
        assert_eq!(next.idle_probes, 1);
        assert!(next.next_probe_at.is_some());
        assert_eq!(wait(40, intervals), Duration::from_secs(60));
    }
}
