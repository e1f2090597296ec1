//! What a replica does so its resident memory stays near what it holds. glibc's malloc keeps
//! what a thread frees in an arena for reuse and returns pages to the system only from the top
//! of an arena, so after a first round over thousands of tables (snapshots loaded and dropped,
//! logs read, on every runtime thread) a replica would stay near the round's high-water mark
//! for as long as it runs. Two measures, both measured in BENCHMARKS.md ("Idle RSS at 10,000
//! tables: arenas and trims"):
//! - one malloc arena per core ([`cap_arenas`], at start-up; `MALLOC_ARENA_MAX` set by the
//!   operator wins): glibc's default is eight per core, each holding on to the free space of
//!   the threads that used it. Measured at 10,000 tables: 14 MB less idle RSS, 27 MB less
//!   peak, and a first probe round about a third slower (threads share fewer arenas);
//! - `malloc_trim(0)` (every arena walked, each whole free page released) when the probe
//!   rounds go idle, and at most once a minute while they run ([`Trim`]).
//!
//! With another allocator (musl, other systems) both do nothing.

use std::time::{Duration, Instant};

/// The least time between two trims: a trim locks each arena in turn while it walks it.
const TRIM_EVERY: Duration = Duration::from_secs(60);

/// When the heap was last trimmed, and whether tables were probed since.
#[derive(Debug, Default)]
pub(crate) struct Trim {
    last: Option<Instant>,
    probed_since: bool,
}

impl Trim {
    /// After a probe round that probed `probed` tables: trims the heap when the rounds go
    /// idle (none probed now, some since the last trim), and while they run once
    /// [`TRIM_EVERY`] has passed since the last trim.
    pub(crate) async fn after_round(&mut self, probed: usize) {
        if !self.due(probed, Instant::now()) {
            return;
        }
        // off the runtime's workers: the walk takes milliseconds on a large heap
        if let Err(err) = tokio::task::spawn_blocking(release_free_heap).await {
            tracing::warn!(error = %err, "trimming the heap did not finish");
        }
    }

    /// Whether to trim after a round that probed `probed` tables at `now` (taken as done).
    fn due(&mut self, probed: usize, now: Instant) -> bool {
        self.probed_since |= probed > 0;
        let recent = self
            .last
            .is_some_and(|at| now.saturating_duration_since(at) < TRIM_EVERY);
        if !self.probed_since || (probed > 0 && recent) {
            return false;
        }
        self.last = Some(now);
        self.probed_since = false;
        true
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(
    unsafe_code,
    reason = "malloc_trim is a C function; it has no safe binding"
)]
fn release_free_heap() {
    let started = Instant::now();
    // SAFETY: malloc_trim takes no pointer and touches only glibc's own free lists, under
    // the locks every malloc and free take.
    let released = unsafe { libc::malloc_trim(0) } == 1;
    tracing::debug!(
        released,
        elapsed_ms = started.elapsed().as_millis(),
        "returned the freed heap to the system"
    );
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_heap() {}

/// Lets glibc's malloc create at most one arena per core (at least two), unless the operator
/// chose a number (`MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max` in `GLIBC_TUNABLES`).
/// Called before the process starts any thread.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(
    unsafe_code,
    reason = "mallopt is a C function; it has no safe binding"
)]
pub(crate) fn cap_arenas() {
    let chosen = std::env::var_os("MALLOC_ARENA_MAX").is_some()
        || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
    if chosen {
        return;
    }
    let cores = std::thread::available_parallelism()
        .map_or(2, usize::from)
        .max(2);
    let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt takes no pointer; M_ARENA_MAX only bounds arenas created from now on.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn cap_arenas() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_when_the_rounds_go_idle_and_at_most_once_a_minute_while_they_run() {
        let start = Instant::now();
        let mut trim = Trim::default();
        // nothing probed yet: nothing to give back
        assert!(!trim.due(0, start));
        // the first busy round trims; the next busy rounds within a minute do not
        assert!(trim.due(10_000, start));
        assert!(!trim.due(8, start + Duration::from_secs(5)));
        assert!(!trim.due(8, start + Duration::from_secs(59)));
        // the rounds go idle: one trim, then none while they stay idle
        assert!(trim.due(0, start + Duration::from_secs(60)));
        assert!(!trim.due(0, start + Duration::from_secs(65)));
        // busy again after a minute: trims at once
        assert!(trim.due(3, start + Duration::from_secs(125)));
    }
}
