//! Giving back to the operating system the heap a probe round freed. glibc's malloc keeps what
//! a thread frees in that thread's arena for reuse and returns pages to the system only from
//! the top of an arena, so after a first round over thousands of tables (snapshots loaded and
//! dropped, logs read, on every runtime thread) a replica would stay near the round's
//! high-water mark for as long as it runs. `malloc_trim(0)` walks every arena and releases
//! each whole free page. The refresher asks for it after a round that probed tables, at most
//! once a minute ([`Trim`]); with another allocator (musl, other systems) it does nothing.

use std::time::{Duration, Instant};

/// The least time between two trims: a trim locks each arena in turn while it walks it.
const TRIM_EVERY: Duration = Duration::from_secs(60);

/// When the heap was last trimmed.
#[derive(Debug, Default)]
pub(crate) struct Trim {
    last: Option<Instant>,
}

impl Trim {
    /// After a probe round that probed `probed` tables: trims the heap, unless nothing was
    /// probed or the last trim is under [`TRIM_EVERY`] old.
    pub(crate) async fn after_round(&mut self, probed: usize) {
        if probed == 0 || self.last.is_some_and(|at| at.elapsed() < TRIM_EVERY) {
            return;
        }
        self.last = Some(Instant::now());
        // off the runtime's workers: the walk takes milliseconds on a large heap
        if let Err(err) = tokio::task::spawn_blocking(release_free_heap).await {
            tracing::warn!(error = %err, "trimming the heap did not finish");
        }
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
