//! The cost counters (DESIGN "Metrics"): CPU, object-store requests, bytes and the dollar
//! estimate of the maintenance this replica ran, per owner and operation (`probe` for the
//! probes), with no table label so a fleet's series stay a handful per owner.
//!
//! Each replica counts the work it ran itself: a job's own planning and run, each task it
//! ran (whoever coordinated the job), and its probes. Summed over the replicas, the
//! increase matches the costs the job store's results hold for the same runs.

use prometheus::{CounterVec, IntCounterVec, Registry};
use tablekeeper_vocab::{Cost, REQUEST_KINDS};

use super::naming::opts;

#[derive(Debug, Clone)]
pub(super) struct CostCounters {
    cpu_seconds: CounterVec,
    requests: IntCounterVec,
    bytes: IntCounterVec,
    usd: CounterVec,
}

impl CostCounters {
    pub(super) fn new(registry: &Registry) -> prometheus::Result<Self> {
        let owner_op = &["owner", "operation"];
        let counters = CostCounters {
            cpu_seconds: CounterVec::new(
                opts(
                    "maintenance_cpu_seconds_total",
                    "Measured CPU of maintenance jobs and probes",
                ),
                owner_op,
            )?,
            requests: IntCounterVec::new(
                opts(
                    "object_store_requests_total",
                    "Object-store requests of maintenance jobs and probes, by kind",
                ),
                &["owner", "operation", "kind"],
            )?,
            bytes: IntCounterVec::new(
                opts(
                    "object_store_bytes_total",
                    "Bytes maintenance jobs and probes read from and wrote to object storage",
                ),
                &["owner", "operation", "direction"],
            )?,
            usd: CounterVec::new(
                opts(
                    "maintenance_estimated_cost_usd_total",
                    "Measured CPU and requests of maintenance at the configured prices",
                ),
                owner_op,
            )?,
        };
        registry.register(Box::new(counters.cpu_seconds.clone()))?;
        registry.register(Box::new(counters.requests.clone()))?;
        registry.register(Box::new(counters.bytes.clone()))?;
        registry.register(Box::new(counters.usd.clone()))?;
        Ok(counters)
    }

    /// Adds `cost` (priced) to `owner`'s `operation`.
    pub(super) fn count(&self, owner: &str, operation: &str, cost: &Cost) {
        let labels = [owner, operation];
        self.cpu_seconds
            .with_label_values(&labels)
            .inc_by(cost.cpu_seconds.max(0.0));
        self.usd
            .with_label_values(&labels)
            .inc_by(cost.estimated_usd.max(0.0));
        for kind in REQUEST_KINDS {
            self.requests
                .with_label_values(&[owner, operation, kind.as_str()])
                .inc_by(cost.requests.of(kind));
        }
        self.bytes
            .with_label_values(&[owner, operation, "read"])
            .inc_by(cost.bytes_read);
        self.bytes
            .with_label_values(&[owner, operation, "written"])
            .inc_by(cost.bytes_written);
    }
}
