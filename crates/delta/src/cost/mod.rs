//! What Delta work costs, measured where it happens (README "What maintenance costs"): the
//! [`Meter`] a job, a task or a table's probes add up into, the object-store wrapper that
//! counts every request underneath deltalake and tablekeeper's own readers
//! ([`store::MeteredStore`]), and the scope that tells both which meter the running work
//! belongs to ([`scope`]).
//!
//! Attribution: a table opened while a meter is current ([`scope::current`]) counts every
//! request sent through its stores into that meter, from whatever thread the request is
//! polled on (deltalake's kernel reads the log on tasks of its own). CPU is counted per
//! thread: either for a whole thread's life (the threads of a runtime that runs one job,
//! [`scope::enter_thread`]) or per poll of a [`scope::Metered`] future (probes, which share
//! one runtime). This module only counts; pricing and publishing are the daemon's.

pub mod scope;
pub(crate) mod store;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tablekeeper_vocab::{Cost, RequestKind, Requests};

/// Counters one unit of work adds its CPU, requests and bytes into; shared by every thread
/// and store working for it.
#[derive(Debug, Default)]
pub struct Meter {
    cpu_nanos: AtomicU64,
    get: AtomicU64,
    put: AtomicU64,
    list: AtomicU64,
    head: AtomicU64,
    delete: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl Meter {
    pub fn new() -> Arc<Meter> {
        Arc::new(Meter::default())
    }

    pub fn add_cpu(&self, spent: Duration) {
        let nanos = u64::try_from(spent.as_nanos()).unwrap_or(u64::MAX);
        self.cpu_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn count(&self, kind: RequestKind, requests: u64) {
        self.counter(kind).fetch_add(requests, Ordering::Relaxed);
    }

    pub fn read(&self, bytes: u64) {
        self.bytes_read.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn written(&self, bytes: u64) {
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    }

    fn counter(&self, kind: RequestKind) -> &AtomicU64 {
        match kind {
            RequestKind::Get => &self.get,
            RequestKind::Put => &self.put,
            RequestKind::List => &self.list,
            RequestKind::Head => &self.head,
            RequestKind::Delete => &self.delete,
        }
    }

    /// What was counted so far, with `wall` as its wall time (unpriced).
    pub fn cost(&self, wall: Duration) -> Cost {
        self.cost_with(wall, |counter| counter.load(Ordering::Relaxed))
    }

    /// What was counted since the last call, the counters set back to zero (each separately,
    /// so nothing counted meanwhile is lost): how a long-lived meter is read in periods.
    pub fn take(&self) -> Cost {
        self.cost_with(Duration::ZERO, |counter| counter.swap(0, Ordering::Relaxed))
    }

    fn cost_with(&self, wall: Duration, read: impl Fn(&AtomicU64) -> u64) -> Cost {
        Cost {
            cpu_seconds: read(&self.cpu_nanos) as f64 / 1e9,
            wall_seconds: wall.as_secs_f64(),
            requests: Requests {
                get: read(&self.get),
                put: read(&self.put),
                list: read(&self.list),
                head: read(&self.head),
                delete: read(&self.delete),
            },
            bytes_read: read(&self.bytes_read),
            bytes_written: read(&self.bytes_written),
            estimated_usd: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_reads_a_period_and_starts_the_next() {
        let meter = Meter::new();
        meter.count(RequestKind::Get, 3);
        meter.read(100);
        meter.add_cpu(Duration::from_millis(1500));
        let first = meter.take();
        assert_eq!(first.requests.get, 3);
        assert_eq!(first.bytes_read, 100);
        assert!((first.cpu_seconds - 1.5).abs() < 1e-9);
        meter.count(RequestKind::Delete, 1);
        let second = meter.take();
        assert_eq!(second.requests.get, 0);
        assert_eq!(second.requests.delete, 1);
        assert_eq!(meter.cost(Duration::from_secs(2)).wall_seconds, 2.0);
    }
}
