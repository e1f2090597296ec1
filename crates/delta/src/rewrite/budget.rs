//! The replica's memory budget for rewrites: one figure for the whole process, because every
//! compaction, Z-order and purge a replica runs at once shares its memory.
//!
//! Owns the budget and its accounting. A compaction bin reserves its estimate before it reads
//! anything ([`crate::rewrite::bins`]), and what it holds is bounded by construction (copied bins fetch
//! and upload in bounded pieces; decoded bins write row groups of at most 64 MiB). Z-order
//! reserves a writer's share and a minimum sort run per partition, and grows its runs while the
//! budget has room (up to half of it), spilling to local disk when it has not
//! ([`crate::rewrite::cluster`]). A reservation larger than the
//! whole budget is cut to the whole budget, so one rewrite always runs: the budget bounds
//! parallelism, never whether work gets done.

use std::sync::OnceLock;

use tokio::sync::{Semaphore, SemaphorePermit};

/// The budget when the daemon sets none: 512 MiB, so a replica with 1 GiB of memory keeps half
/// for its probes, API and the allocator's slack.
pub const DEFAULT_REWRITE_MEMORY_BUDGET: u64 = 512 * 1024 * 1024;

/// Reservations are counted in MiB.
const UNIT: u64 = 1024 * 1024;

static BUDGET: OnceLock<Budget> = OnceLock::new();

/// The process's rewrite memory budget.
#[derive(Debug)]
pub(crate) struct Budget {
    bytes: u64,
    units: Semaphore,
}

/// Sets the process's rewrite memory budget, in bytes. The first call (or the first rewrite,
/// which takes [`DEFAULT_REWRITE_MEMORY_BUDGET`]) fixes it; returns `false` when it was fixed
/// already at another figure.
pub fn set_rewrite_memory_budget(bytes: u64) -> bool {
    budget_or(bytes).bytes == bytes
}

fn budget_or(bytes: u64) -> &'static Budget {
    BUDGET.get_or_init(|| Budget::new(bytes))
}

/// The process's budget.
pub(crate) fn budget() -> &'static Budget {
    budget_or(DEFAULT_REWRITE_MEMORY_BUDGET)
}

fn units(bytes: u64) -> usize {
    usize::try_from(bytes.div_ceil(UNIT))
        .unwrap_or(usize::MAX)
        .clamp(1, Semaphore::MAX_PERMITS)
}

impl Budget {
    /// A budget of `bytes` of its own (the process's is [`budget`]).
    pub(crate) fn new(bytes: u64) -> Self {
        Budget {
            bytes,
            units: Semaphore::new(units(bytes)),
        }
    }

    /// The budget in bytes.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Waits until `bytes` (at most the whole budget) are free, and holds them until the
    /// returned permit drops.
    pub(crate) async fn reserve(&self, bytes: u64) -> SemaphorePermit<'_> {
        let wanted = units(bytes).min(units(self.bytes));
        let wanted = u32::try_from(wanted).unwrap_or(u32::MAX);
        match self.units.acquire_many(wanted).await {
            Ok(permit) => permit,
            // the semaphore is never closed
            Err(_) => unreachable!("the rewrite budget's semaphore is never closed"),
        }
    }

    /// Takes `bytes` (in whole MiB, at least one) if they are free now, without waiting.
    pub(crate) fn try_reserve(&self, bytes: u64) -> Option<SemaphorePermit<'_>> {
        let wanted = u32::try_from(units(bytes)).unwrap_or(u32::MAX);
        self.units.try_acquire_many(wanted).ok()
    }
}
