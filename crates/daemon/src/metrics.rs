//! Every Prometheus metric tablekeeper exports, defined and registered in one place.
//!
//! Names, types and labels are a public contract (DESIGN.md "Metrics"): alert rules and
//! dashboards depend on them. Label values come only from the inventory (`table`,
//! `owner`) or from closed enums (`operation`, `outcome`, `state`, `kind`) — never from
//! paths, error strings or job ids, so series counts stay bounded by the fleet size.

use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Job-duration buckets in seconds: maintenance runs from sub-second checkpoints on small
/// tables to multi-hour compactions (the default job timeout is 2h), so the buckets span
/// 0.1 s to 4 h roughly geometrically.
const DURATION_BUCKETS: &[f64] = &[
    0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0,
];

/// The registry and handles of all tablekeeper metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    pub table_info: IntGaugeVec,
    pub last_success_timestamp_seconds: GaugeVec,
    pub staleness_seconds: GaugeVec,
    pub jobs_total: IntCounterVec,
    pub commit_conflicts_total: IntCounterVec,
    pub concurrency_key_waits_total: IntCounterVec,
    pub consecutive_failures: IntGaugeVec,
    pub job_duration_seconds: HistogramVec,
    pub jobs: IntGaugeVec,
    pub table_files: IntGaugeVec,
    pub table_size_bytes: IntGaugeVec,
    pub table_small_files: IntGaugeVec,
    pub table_version: IntGaugeVec,
    pub table_commits_since_checkpoint: IntGaugeVec,
    pub table_commits_per_hour: GaugeVec,
    pub table_probe_failures_total: IntCounterVec,
    pub drift: IntGaugeVec,
    pub bytes_rewritten_total: IntCounterVec,
    pub bytes_reclaimed_total: IntCounterVec,
    stale_writes_total: IntCounterVec,
    pub inventory_tables: IntGauge,
    pub inventory_reload_failures_total: IntCounter,
    pub build_info: IntGaugeVec,
    /// Not in the contract table but useful to operators: seconds since the Unix epoch at
    /// which this replica started.
    pub start_time_seconds: Gauge,
}

fn opts(name: &str, help: &str) -> Opts {
    Opts::new(name, help).namespace("tablekeeper")
}

impl Metrics {
    /// Creates and registers every metric. Fails only on a programming error (a duplicate
    /// or malformed name), which the unit test below catches.
    pub fn new() -> prometheus::Result<Self> {
        let registry = Registry::new();
        let table_op = &["table", "operation"];
        let table = &["table"];
        let m = Self {
            table_info: IntGaugeVec::new(
                opts("table_info", "Always 1; joins tables to their owners for alert routing"),
                &["table", "owner"],
            )?,
            last_success_timestamp_seconds: GaugeVec::new(
                opts(
                    "last_success_timestamp_seconds",
                    "Unix time of the last successful run of an operation on a table (Delta log or job table)",
                ),
                table_op,
            )?,
            staleness_seconds: GaugeVec::new(
                opts(
                    "staleness_seconds",
                    "Seconds since the last successful run of an operation; since table creation if never",
                ),
                table_op,
            )?,
            jobs_total: IntCounterVec::new(
                opts("jobs_total", "Finished job attempts by outcome"),
                &["table", "operation", "outcome"],
            )?,
            commit_conflicts_total: IntCounterVec::new(
                opts(
                    "commit_conflicts_total",
                    "Delta commit conflicts met by maintenance commits",
                ),
                table_op,
            )?,
            concurrency_key_waits_total: IntCounterVec::new(
                opts(
                    "concurrency_key_waits_total",
                    "Claims deferred because the job's concurrency key was held",
                ),
                table_op,
            )?,
            consecutive_failures: IntGaugeVec::new(
                opts(
                    "consecutive_failures",
                    "Failed attempts of an operation on a table since its last success, fleet-wide from the job table (every replica exports the same value)",
                ),
                table_op,
            )?,
            job_duration_seconds: HistogramVec::new(
                HistogramOpts::new("job_duration_seconds", "Wall time of job attempts")
                    .namespace("tablekeeper")
                    .buckets(DURATION_BUCKETS.to_vec()),
                &["operation"],
            )?,
            jobs: IntGaugeVec::new(
                opts("jobs", "Jobs in the job table by state (fleet-wide)"),
                &["state"],
            )?,
            table_files: IntGaugeVec::new(
                opts("table_files", "Active data files, from the Delta log"),
                table,
            )?,
            table_size_bytes: IntGaugeVec::new(
                opts("table_size_bytes", "Bytes in active data files, from the Delta log"),
                table,
            )?,
            table_small_files: IntGaugeVec::new(
                opts("table_small_files", "Active data files under the small-file threshold"),
                table,
            )?,
            table_version: IntGaugeVec::new(opts("table_version", "Current Delta table version"), table)?,
            table_commits_since_checkpoint: IntGaugeVec::new(
                opts(
                    "table_commits_since_checkpoint",
                    "Commits since the last checkpoint",
                ),
                table,
            )?,
            table_commits_per_hour: GaugeVec::new(
                opts(
                    "table_commits_per_hour",
                    "Commits in the last hour; compare with writers.commit_budget_per_hour",
                ),
                table,
            )?,
            table_probe_failures_total: IntCounterVec::new(
                opts(
                    "table_probe_failures_total",
                    "Failed table probes by kind: transient (storage did not answer) or unreadable (missing files or log, damaged log, denied access)",
                ),
                &["table", "kind"],
            )?,
            drift: IntGaugeVec::new(
                opts(
                    "drift",
                    "1 when the live table disagrees with the inventory (kind: retention, protocol, partitioning)",
                ),
                &["table", "kind"],
            )?,
            bytes_rewritten_total: IntCounterVec::new(
                opts("bytes_rewritten_total", "Bytes written by compaction and Z-order"),
                table,
            )?,
            bytes_reclaimed_total: IntCounterVec::new(
                opts("bytes_reclaimed_total", "Bytes deleted from storage by VACUUM"),
                table,
            )?,
            stale_writes_total: IntCounterVec::new(
                opts(
                    "stale_writes_total",
                    "Commits by other writers planned on a snapshot older than a tablekeeper rewrite (their intent lost until repaired), from the job store",
                ),
                table,
            )?,
            inventory_tables: IntGauge::with_opts(opts(
                "inventory_tables",
                "Tables in the loaded inventory",
            ))?,
            inventory_reload_failures_total: IntCounter::with_opts(opts(
                "inventory_reload_failures_total",
                "Inventory reloads rejected by validation (the last good inventory stays loaded)",
            ))?,
            build_info: IntGaugeVec::new(
                opts("build_info", "Always 1; the running tablekeeper version"),
                &["version"],
            )?,
            start_time_seconds: Gauge::with_opts(opts(
                "start_time_seconds",
                "Unix time at which this replica started",
            ))?,
            registry,
        };
        m.register_all()?;
        m.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        for state in ["queued", "running"] {
            m.jobs.with_label_values(&[state]).set(0);
        }
        // every operation's attempt count exists from the start, so `increase()` in the
        // alert rules sees the first attempt after a restart (one series set per operation,
        // not per table)
        for op in tablekeeper_inventory::Operation::ALL {
            let _ = m.job_duration_seconds.with_label_values(&[op.as_str()]);
        }
        Ok(m)
    }

    fn register_all(&self) -> prometheus::Result<()> {
        let r = &self.registry;
        r.register(Box::new(self.table_info.clone()))?;
        r.register(Box::new(self.last_success_timestamp_seconds.clone()))?;
        r.register(Box::new(self.staleness_seconds.clone()))?;
        r.register(Box::new(self.jobs_total.clone()))?;
        r.register(Box::new(self.commit_conflicts_total.clone()))?;
        r.register(Box::new(self.concurrency_key_waits_total.clone()))?;
        r.register(Box::new(self.consecutive_failures.clone()))?;
        r.register(Box::new(self.job_duration_seconds.clone()))?;
        r.register(Box::new(self.jobs.clone()))?;
        r.register(Box::new(self.table_files.clone()))?;
        r.register(Box::new(self.table_size_bytes.clone()))?;
        r.register(Box::new(self.table_small_files.clone()))?;
        r.register(Box::new(self.table_version.clone()))?;
        r.register(Box::new(self.table_commits_since_checkpoint.clone()))?;
        r.register(Box::new(self.table_commits_per_hour.clone()))?;
        r.register(Box::new(self.table_probe_failures_total.clone()))?;
        r.register(Box::new(self.drift.clone()))?;
        r.register(Box::new(self.bytes_rewritten_total.clone()))?;
        r.register(Box::new(self.bytes_reclaimed_total.clone()))?;
        r.register(Box::new(self.stale_writes_total.clone()))?;
        r.register(Box::new(self.inventory_tables.clone()))?;
        r.register(Box::new(self.inventory_reload_failures_total.clone()))?;
        r.register(Box::new(self.build_info.clone()))?;
        r.register(Box::new(self.start_time_seconds.clone()))?;
        Ok(())
    }

    /// Removes every series labelled with `table` (a table left the inventory), so a
    /// removed table stops alerting instead of going stale forever.
    pub fn forget_table(&self, table: &str, owner: &str) {
        let _ = self.table_info.remove_label_values(&[table, owner]);
        for op in tablekeeper_inventory::Operation::ALL {
            let labels = [table, op.as_str()];
            let _ = self
                .last_success_timestamp_seconds
                .remove_label_values(&labels);
            let _ = self.staleness_seconds.remove_label_values(&labels);
            let _ = self.consecutive_failures.remove_label_values(&labels);
            let _ = self.commit_conflicts_total.remove_label_values(&labels);
            let _ = self
                .concurrency_key_waits_total
                .remove_label_values(&labels);
            for outcome in tablekeeper_store::AttemptOutcome::ALL {
                let _ =
                    self.jobs_total
                        .remove_label_values(&[table, op.as_str(), outcome.as_str()]);
            }
        }
        for gauge in [
            &self.table_files,
            &self.table_size_bytes,
            &self.table_small_files,
            &self.table_version,
            &self.table_commits_since_checkpoint,
        ] {
            let _ = gauge.remove_label_values(&[table]);
        }
        let _ = self.table_commits_per_hour.remove_label_values(&[table]);
        for counter in [
            &self.bytes_rewritten_total,
            &self.bytes_reclaimed_total,
            &self.stale_writes_total,
        ] {
            let _ = counter.remove_label_values(&[table]);
        }
        for kind in crate::fleet::ProbeFailureKind::ALL {
            let _ = self
                .table_probe_failures_total
                .remove_label_values(&[table, kind.as_str()]);
        }
        for kind in crate::fleet::DriftKind::ALL {
            let _ = self.drift.remove_label_values(&[table, kind.as_str()]);
        }
    }

    /// Brings `tablekeeper_stale_writes_total{table}` up to `recorded`, the number of stale
    /// writes the job store holds for the table. The series appears only once the store was
    /// read, so a restarted replica resumes at the fleet-wide count instead of counting up
    /// from 0 (which `increase()` would read as new stale writes).
    pub fn set_stale_writes(&self, table: &str, recorded: u64) {
        let counter = self.stale_writes_total.with_label_values(&[table]);
        let current = counter.get();
        if recorded > current {
            counter.inc_by(recorded - current);
        }
    }

    /// The Prometheus text exposition of every registered metric.
    pub fn render(&self) -> Result<String, prometheus::Error> {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buf)?;
        String::from_utf8(buf).map_err(|e| prometheus::Error::Msg(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every series a table can have, created through the paths the daemon uses.
    fn touch_every_series(m: &Metrics, table: &str) {
        m.table_info.with_label_values(&[table, "owner"]).set(1);
        for op in tablekeeper_inventory::Operation::ALL {
            let labels = [table, op.as_str()];
            m.last_success_timestamp_seconds
                .with_label_values(&labels)
                .set(1.0);
            m.staleness_seconds.with_label_values(&labels).set(1.0);
            m.consecutive_failures.with_label_values(&labels).set(1);
            m.commit_conflicts_total.with_label_values(&labels).inc();
            m.concurrency_key_waits_total
                .with_label_values(&labels)
                .inc();
            for outcome in tablekeeper_store::AttemptOutcome::ALL {
                m.jobs_total
                    .with_label_values(&[table, op.as_str(), outcome.as_str()])
                    .inc();
            }
        }
        for gauge in [
            &m.table_files,
            &m.table_size_bytes,
            &m.table_small_files,
            &m.table_version,
            &m.table_commits_since_checkpoint,
        ] {
            gauge.with_label_values(&[table]).set(1);
        }
        m.table_commits_per_hour
            .with_label_values(&[table])
            .set(1.0);
        m.bytes_rewritten_total.with_label_values(&[table]).inc();
        m.bytes_reclaimed_total.with_label_values(&[table]).inc();
        m.set_stale_writes(table, 2);
        for kind in crate::fleet::ProbeFailureKind::ALL {
            m.table_probe_failures_total
                .with_label_values(&[table, kind.as_str()])
                .inc();
        }
        for kind in crate::fleet::DriftKind::ALL {
            m.drift.with_label_values(&[table, kind.as_str()]).set(1);
        }
    }

    #[test]
    fn forgetting_a_table_removes_every_series_labelled_with_it() {
        let m = Metrics::new().unwrap();
        touch_every_series(&m, "gone");
        touch_every_series(&m, "kept");
        let before = m.render().unwrap();
        assert!(before.contains("table=\"gone\""));
        m.forget_table("gone", "owner");
        let families = m.registry.gather();
        let left: Vec<String> = families
            .iter()
            .filter(|f| {
                f.get_metric().iter().any(|metric| {
                    metric
                        .get_label()
                        .iter()
                        .any(|l| l.name() == "table" && l.value() == "gone")
                })
            })
            .map(|f| f.name().to_owned())
            .collect();
        assert!(left.is_empty(), "series of a removed table left: {left:?}");
        assert!(m.render().unwrap().contains("table=\"kept\""));
    }

    #[test]
    fn every_contract_metric_is_registered_with_its_name() {
        let m = Metrics::new().unwrap();
        m.table_info.with_label_values(&["t", "o"]).set(1);
        let text = m.render().unwrap();
        for name in [
            "tablekeeper_table_info",
            "tablekeeper_build_info",
            "tablekeeper_jobs",
            "tablekeeper_inventory_tables",
            "tablekeeper_inventory_reload_failures_total",
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} missing from:\n{text}"
            );
        }
    }
}
