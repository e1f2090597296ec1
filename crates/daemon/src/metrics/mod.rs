//! Every Prometheus metric tablekeeper exports, defined and registered in one place, and
//! written only through the typed methods below: counters and fleet-wide gauges in a
//! prometheus registry, the per-table state gauges as compact rows (`table_gauges.rs`), fed
//! the plain figures of `figures.rs`.
//!
//! Names, types and labels are a public contract (DESIGN.md "Metrics"): alert rules and
//! dashboards depend on them. Label values come only from the inventory (`table`, `owner`)
//! or from closed enums (`operation`, `outcome`, `state`, `kind`, `op`), never from paths,
//! error strings or job ids, so series counts stay bounded by the fleet size. This module
//! knows nothing of the fleet's state: the publisher (`publish.rs`) hands it plain figures.

mod cost;
mod figures;
mod naming;
pub(crate) mod publish;
mod table_gauges;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Registry, TextEncoder,
};
use tablekeeper_inventory::TableSpec;
use tablekeeper_store::{Backend, StoreError, StoreObserver, StoreOp};
use tablekeeper_vocab::{
    AttemptOutcome, DriftKind, JobState, Operation, ProbeFailureKind, TaskState,
};

use cost::CostCounters;
pub(crate) use figures::{ErasureFigures, OperationFigures, RetainedFigures, TableFigures};
use naming::{histogram, opts};
use table_gauges::TableGauges;

/// Job-duration buckets in seconds: maintenance runs from sub-second checkpoints on small
/// tables to multi-hour compactions (the default job timeout is 2h), so the buckets span
/// 0.1 s to 4 h roughly geometrically.
const DURATION_BUCKETS: &[f64] = &[
    0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0,
];

/// Store-call buckets in seconds: statements take milliseconds; the top buckets catch a
/// database that stalls up to the 30 s call timeout.
const STORE_CALL_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0];

/// Brings a table's counter that follows a count in the job store up to `recorded`: it never
/// goes down, and a replica that already counted some adds only the rest.
fn raise_to(counter: &IntCounterVec, table: &str, recorded: u64) {
    let counter = counter.with_label_values(&[table]);
    let current = counter.get();
    if recorded > current {
        counter.inc_by(recorded - current);
    }
}

/// What the latest budget round found: deferred candidates per (operation, reason) (every
/// pair given, zeros included) and the window's limit and spend, in CPU-seconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BudgetFigures<'a> {
    pub deferred: &'a [(Operation, &'a str, i64)],
    pub limit: f64,
    pub spent: f64,
}

/// The registry and handles of all tablekeeper metrics.
#[derive(Debug, Clone)]
pub(crate) struct Metrics {
    registry: Registry,
    /// Every table's state gauges (info, figures, staleness, streaks, drift, erasure).
    tables: Arc<TableGauges>,
    jobs_total: IntCounterVec,
    commit_conflicts_total: IntCounterVec,
    concurrency_key_waits_total: IntCounterVec,
    job_duration_seconds: HistogramVec,
    jobs: IntGaugeVec,
    tasks: IntGaugeVec,
    table_probe_failures_total: IntCounterVec,
    bytes_rewritten_total: IntCounterVec,
    bytes_reclaimed_total: IntCounterVec,
    stale_writes_total: IntCounterVec,
    foreign_rewrites_total: IntCounterVec,
    inventory_tables: IntGauge,
    inventory_reload_failures_total: IntCounter,
    build_info: IntGaugeVec,
    /// Due candidates the latest budget round deferred (shadow mode: would defer), by
    /// operation and reason (`budget`, `owner_budget`), fleet-wide from the job store.
    deferred: IntGaugeVec,
    /// The current budget window's `limit` and `spent` CPU-seconds, fleet-wide.
    budget_cpu_seconds: GaugeVec,
    /// Not in the contract table but useful to operators: seconds since the Unix epoch at
    /// which this replica started.
    start_time_seconds: Gauge,
    /// Not in the contract table: job store call latency and errors by call, per replica.
    store_call_duration_seconds: HistogramVec,
    store_call_errors_total: IntCounterVec,
    /// What maintenance cost, per owner and operation (`cost.rs`).
    cost: CostCounters,
}

impl Metrics {
    /// Creates and registers every metric. Fails only on a programming error (a duplicate
    /// or malformed name), which the unit tests below catch. One declaration per metric: a
    /// list that grows with the metrics, not logic.
    pub(crate) fn new() -> prometheus::Result<Self> {
        let table_op = &["table", "operation"];
        let table = &["table"];
        let registry = Registry::new();
        let m = Self {
            cost: CostCounters::new(&registry)?,
            registry,
            tables: Arc::default(),
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
            job_duration_seconds: HistogramVec::new(
                histogram("job_duration_seconds", "Wall time of job attempts", DURATION_BUCKETS),
                &["operation"],
            )?,
            jobs: IntGaugeVec::new(
                opts("jobs", "Jobs in the job table by state (fleet-wide)"),
                &["state"],
            )?,
            tasks: IntGaugeVec::new(
                opts(
                    "tasks",
                    "Tasks of running rewrite jobs by state (fleet-wide, from job_tasks)",
                ),
                &["state"],
            )?,
            table_probe_failures_total: IntCounterVec::new(
                opts(
                    "table_probe_failures_total",
                    "Failed table probes by kind: transient (storage did not answer) or unreadable (missing files or log, damaged log, denied access)",
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
            foreign_rewrites_total: IntCounterVec::new(
                opts(
                    "foreign_rewrites_total",
                    "Rewrite commits (OPTIMIZE, Z-order, REORG, ...) by engines other than tablekeeper, from the job store",
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
            deferred: IntGaugeVec::new(
                opts(
                    "deferred",
                    "Due maintenance the budget defers now (in shadow mode: would defer), by reason",
                ),
                &["operation", "reason"],
            )?,
            budget_cpu_seconds: GaugeVec::new(
                opts(
                    "budget_cpu_seconds",
                    "The current budget window's CPU-seconds: its limit and what the jobs started in it spent (fleet-wide)",
                ),
                &["state"],
            )?,
            start_time_seconds: Gauge::with_opts(opts(
                "start_time_seconds",
                "Unix time at which this replica started",
            ))?,
            store_call_duration_seconds: HistogramVec::new(
                histogram(
                    "store_call_duration_seconds",
                    "Wall time of job store calls on this replica, by call",
                    STORE_CALL_BUCKETS,
                ),
                &["op"],
            )?,
            store_call_errors_total: IntCounterVec::new(
                opts(
                    "store_call_errors_total",
                    "Job store calls that failed on this replica, by call",
                ),
                &["op"],
            )?,
        };
        m.register_all()?;
        m.set_starting_values();
        Ok(m)
    }

    /// The series that exist from the start: build info, start time, the fleet-wide job and
    /// task counts at zero, and every operation's and store call's series.
    fn set_starting_values(&self) {
        let m = self;
        m.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        m.start_time_seconds.set(Utc::now().timestamp() as f64);
        for state in [JobState::Queued, JobState::Running] {
            m.jobs.with_label_values(&[state.as_str()]).set(0);
        }
        for state in TaskState::ALL {
            m.tasks.with_label_values(&[state.as_str()]).set(0);
        }
        // every operation's attempt count exists from the start, so `increase()` in the
        // alert rules sees the first attempt after a restart (one series set per operation,
        // not per table)
        for op in Operation::ALL {
            let _ = m.job_duration_seconds.with_label_values(&[op.as_str()]);
        }
        for op in StoreOp::ALL {
            let _ = m
                .store_call_duration_seconds
                .with_label_values(&[op.as_str()]);
            m.store_call_errors_total
                .with_label_values(&[op.as_str()])
                .inc_by(0);
        }
    }

    fn register_all(&self) -> prometheus::Result<()> {
        let r = &self.registry;
        r.register(Box::new(self.jobs_total.clone()))?;
        r.register(Box::new(self.commit_conflicts_total.clone()))?;
        r.register(Box::new(self.concurrency_key_waits_total.clone()))?;
        r.register(Box::new(self.job_duration_seconds.clone()))?;
        r.register(Box::new(self.jobs.clone()))?;
        r.register(Box::new(self.tasks.clone()))?;
        r.register(Box::new(self.table_probe_failures_total.clone()))?;
        r.register(Box::new(self.bytes_rewritten_total.clone()))?;
        r.register(Box::new(self.bytes_reclaimed_total.clone()))?;
        r.register(Box::new(self.stale_writes_total.clone()))?;
        r.register(Box::new(self.foreign_rewrites_total.clone()))?;
        r.register(Box::new(self.inventory_tables.clone()))?;
        r.register(Box::new(self.inventory_reload_failures_total.clone()))?;
        r.register(Box::new(self.build_info.clone()))?;
        r.register(Box::new(self.deferred.clone()))?;
        r.register(Box::new(self.budget_cpu_seconds.clone()))?;
        r.register(Box::new(self.start_time_seconds.clone()))?;
        r.register(Box::new(self.store_call_duration_seconds.clone()))?;
        r.register(Box::new(self.store_call_errors_total.clone()))?;
        Ok(())
    }

    // ------------------------------------------------------------ table lifecycle

    /// A table is in the inventory (again after every reload, so an owner change replaces
    /// its `table_info` series). Only the series every table needs from the start are
    /// created here: `table_info` (the join target of every rule), the average file size
    /// threshold and the declared erasure deadline. Series of operations the inventory disabled are dropped so a disabled
    /// operation never looks stale. Everything else appears with its first figure or event
    /// (README "Metrics": which series exist when).
    pub(crate) fn table_added(&self, spec: &TableSpec) {
        let name = spec.name.as_str();
        self.tables.update(name, |row| {
            row.owner = Some(spec.owner.clone());
            row.erasure_deadline_seconds = spec.retention.erasure_deadline.map(|d| d.as_secs_f64());
            row.operations.retain(|op| spec.operation_enabled(op));
        });
        for op in Operation::SCHEDULED {
            if !spec.operation_enabled(op) {
                for counter in [
                    &self.commit_conflicts_total,
                    &self.concurrency_key_waits_total,
                ] {
                    let _ = counter.remove_label_values(&[name, op.as_str()]);
                }
            }
        }
    }

    /// Drops the gauges of an operation that does not apply to a table (disabled, or purge
    /// of a table without deletion vectors), so it never looks stale or failing.
    pub(crate) fn hide_operation(&self, table: &str, op: Operation) {
        self.tables.update_existing(table, |row| {
            row.operations.remove(op);
        });
    }

    /// Removes every series labelled with `table` (a table left the inventory), so a
    /// removed table stops alerting instead of going stale forever.
    pub(crate) fn forget_table(&self, table: &str) {
        self.tables.remove(table);
        for op in Operation::ALL {
            let labels = [table, op.as_str()];
            for counter in [
                &self.commit_conflicts_total,
                &self.concurrency_key_waits_total,
            ] {
                let _ = counter.remove_label_values(&labels);
            }
            for outcome in AttemptOutcome::ALL {
                let _ =
                    self.jobs_total
                        .remove_label_values(&[table, op.as_str(), outcome.as_str()]);
            }
        }
        for counter in [
            &self.bytes_rewritten_total,
            &self.bytes_reclaimed_total,
            &self.stale_writes_total,
            &self.foreign_rewrites_total,
        ] {
            let _ = counter.remove_label_values(&[table]);
        }
        for kind in ProbeFailureKind::ALL {
            let _ = self
                .table_probe_failures_total
                .remove_label_values(&[table, kind.as_str()]);
        }
    }

    pub(crate) fn set_inventory_size(&self, tables: usize) {
        self.inventory_tables.set(tables as i64);
    }

    pub(crate) fn count_inventory_reload_failure(&self) {
        self.inventory_reload_failures_total.inc();
    }

    // ------------------------------------------------------------ table figures

    /// The size figures of a table's latest probe (the erasure gauges only where
    /// `figures.erasure` says erasure is a question).
    pub(crate) fn set_table_figures(&self, table: &str, figures: TableFigures) {
        self.tables.update(table, |row| row.figures = Some(figures));
    }

    /// Drift series exist only for the kinds that drifted (value 1): a fleet in line with
    /// its inventory exports none.
    pub(crate) fn set_drift(&self, table: &str, drifted: &[DriftKind]) {
        self.tables.update(table, |row| {
            row.drift.clear();
            row.drift.extend_from_slice(drifted);
        });
    }

    /// An operation's staleness and last success (kept when not known now), and its failure
    /// streak (a series only while there is one; the rule fires on >= 3).
    pub(crate) fn set_operation(&self, table: &str, op: Operation, figures: OperationFigures) {
        self.tables.update(table, |row| {
            row.operations.entry(op).update(figures);
        });
    }

    pub(crate) fn count_probe_failure(&self, table: &str, kind: ProbeFailureKind) {
        self.table_probe_failures_total
            .with_label_values(&[table, kind.as_str()])
            .inc();
    }

    /// Brings `tablekeeper_stale_writes_total{table}` up to `recorded`, the number of stale
    /// writes the job store holds for the table, and sets when the latest was detected.
    /// Both series appear with the table's first stale write (on a restarted replica, once
    /// the store was read) at the fleet-wide figures, so every replica exports the same
    /// values and a restart neither repeats nor loses one. The alert reads the detection
    /// time: a counter born at 1 is no `increase()`.
    pub(crate) fn set_stale_writes(
        &self,
        table: &str,
        recorded: u64,
        last_detected: Option<DateTime<Utc>>,
    ) {
        if recorded == 0 {
            return;
        }
        raise_to(&self.stale_writes_total, table, recorded);
        if let Some(at) = last_detected {
            self.tables.update(table, |row| {
                row.last_stale_write_seconds = Some(at.timestamp() as f64);
            });
        }
    }

    /// Brings `tablekeeper_foreign_rewrites_total{table}` up to `recorded`, the rewrites by
    /// other engines `table_commits` holds for the table, and, when tablekeeper owns the
    /// table's rewrites (`alert`), sets when the latest was committed. Like the stale-write
    /// series, both appear with the first one at the fleet-wide figures; a table whose
    /// rewrites belong to another engine (`writers.rewrites: external`) keeps its count and
    /// exports no time, so its owner is not paged for what the inventory declared.
    pub(crate) fn set_foreign_rewrites(
        &self,
        table: &str,
        recorded: u64,
        last_at: Option<DateTime<Utc>>,
        alert: bool,
    ) {
        if recorded == 0 {
            return;
        }
        raise_to(&self.foreign_rewrites_total, table, recorded);
        let at = last_at.filter(|_| alert).map(|t| t.timestamp() as f64);
        self.tables
            .update(table, |row| row.last_foreign_rewrite_seconds = at);
    }

    // ------------------------------------------------------------ jobs

    /// Fleet-wide job counts per state.
    pub(crate) fn set_job_counts(&self, counts: &BTreeMap<JobState, i64>) {
        for (state, n) in counts {
            self.jobs.with_label_values(&[state.as_str()]).set(*n);
        }
    }

    /// Fleet-wide task counts per state (tasks of running jobs).
    /// The latest budget round (see [`BudgetFigures`]). `None`: the inventory has no
    /// budget, and the budget's series are removed.
    pub(crate) fn set_budget(&self, round: Option<BudgetFigures<'_>>) {
        match round {
            Some(BudgetFigures {
                deferred,
                limit,
                spent,
            }) => {
                for (op, reason, n) in deferred {
                    self.deferred
                        .with_label_values(&[op.as_str(), reason])
                        .set(*n);
                }
                self.budget_cpu_seconds
                    .with_label_values(&["limit"])
                    .set(limit);
                self.budget_cpu_seconds
                    .with_label_values(&["spent"])
                    .set(spent);
            }
            None => {
                self.deferred.reset();
                self.budget_cpu_seconds.reset();
            }
        }
    }

    pub(crate) fn set_task_counts(&self, counts: &BTreeMap<TaskState, i64>) {
        for (state, n) in counts {
            self.tasks.with_label_values(&[state.as_str()]).set(*n);
        }
    }

    /// An attempt ended on this replica (or was reaped by it).
    pub(crate) fn count_attempt(&self, table: &str, op: Operation, outcome: AttemptOutcome) {
        self.jobs_total
            .with_label_values(&[table, op.as_str(), outcome.as_str()])
            .inc();
    }

    pub(crate) fn observe_attempt_duration(&self, op: Operation, elapsed: Duration) {
        self.job_duration_seconds
            .with_label_values(&[op.as_str()])
            .observe(elapsed.as_secs_f64());
    }

    pub(crate) fn count_conflicts(&self, table: &str, op: Operation, conflicts: u32) {
        self.commit_conflicts_total
            .with_label_values(&[table, op.as_str()])
            .inc_by(u64::from(conflicts));
    }

    pub(crate) fn count_key_wait(&self, table: &str, op: Operation) {
        self.concurrency_key_waits_total
            .with_label_values(&[table, op.as_str()])
            .inc();
    }

    /// Adds what a job, a task or a period of probes cost (priced) to `owner`'s
    /// `operation` (an operation's name, or [`tablekeeper_vocab::PROBE_OPERATION`]).
    pub(crate) fn count_cost(&self, owner: &str, operation: &str, cost: &tablekeeper_vocab::Cost) {
        self.cost.count(owner, operation, cost);
    }

    pub(crate) fn count_bytes_rewritten(&self, table: &str, bytes: u64) {
        self.bytes_rewritten_total
            .with_label_values(&[table])
            .inc_by(bytes);
    }

    pub(crate) fn count_bytes_reclaimed(&self, table: &str, bytes: u64) {
        self.bytes_reclaimed_total
            .with_label_values(&[table])
            .inc_by(bytes);
    }

    /// The Prometheus text exposition of every registered metric.
    pub(crate) fn render(&self) -> Result<String, prometheus::Error> {
        let mut buf = Vec::new();
        TextEncoder::new().encode(&self.registry.gather(), &mut buf)?;
        self.tables.encode(&mut buf)?;
        String::from_utf8(buf).map_err(|e| prometheus::Error::Msg(e.to_string()))
    }
}

/// Every job store call is timed and its errors counted by call.
impl StoreObserver for Metrics {
    fn observe(
        &self,
        _backend: Backend,
        op: StoreOp,
        elapsed: Duration,
        error: Option<&StoreError>,
    ) {
        self.store_call_duration_seconds
            .with_label_values(&[op.as_str()])
            .observe(elapsed.as_secs_f64());
        if error.is_some() {
            self.store_call_errors_total
                .with_label_values(&[op.as_str()])
                .inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str) -> TableSpec {
        let yaml = format!("tables:\n  - name: {name}\n    path: /data/{name}\n    owner: owner\n");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inventory.yaml");
        std::fs::write(&path, yaml).unwrap();
        let inventory = tablekeeper_inventory::Inventory::load(&path).unwrap();
        inventory.tables[0].clone()
    }

    /// Every series a table can have, created through the methods the daemon uses.
    fn touch_every_series(m: &Metrics, table: &str) {
        m.table_added(&spec(table));
        for op in Operation::ALL {
            m.set_operation(
                table,
                op,
                OperationFigures {
                    last_success: Some(Utc::now()),
                    staleness: Some(chrono::Duration::seconds(1)),
                    consecutive_failures: 1,
                },
            );
            m.count_conflicts(table, op, 1);
            m.count_key_wait(table, op);
            for outcome in AttemptOutcome::ALL {
                m.count_attempt(table, op, outcome);
            }
        }
        m.set_table_figures(
            table,
            TableFigures {
                erasure: Some(ErasureFigures::default()),
                ..TableFigures::default()
            },
        );
        m.set_drift(table, &DriftKind::ALL);
        m.count_bytes_rewritten(table, 1);
        m.count_bytes_reclaimed(table, 1);
        m.set_stale_writes(table, 2, Some(Utc::now()));
        for kind in ProbeFailureKind::ALL {
            m.count_probe_failure(table, kind);
        }
    }

    #[test]
    fn forgetting_a_table_removes_every_series_labelled_with_it() {
        let m = Metrics::new().unwrap();
        touch_every_series(&m, "gone");
        touch_every_series(&m, "kept");
        let before = m.render().unwrap();
        assert!(before.contains("table=\"gone\""));
        m.forget_table("gone");
        let left = series_of(&m, "gone");
        assert!(left.is_empty(), "series of a removed table left: {left:?}");
        assert!(m.render().unwrap().contains("table=\"kept\""));
    }

    #[test]
    fn every_contract_metric_is_registered_with_its_name() {
        let m = Metrics::new().unwrap();
        m.table_added(&spec("t"));
        m.set_table_figures(
            "t",
            TableFigures {
                // the history is read: nothing is pending
                erasure: Some(ErasureFigures {
                    pending: Some(Duration::ZERO),
                    ..ErasureFigures::default()
                }),
                ..TableFigures::default()
            },
        );
        let text = m.render().unwrap();
        for name in [
            "tablekeeper_table_info",
            "tablekeeper_build_info",
            "tablekeeper_jobs",
            "tablekeeper_tasks",
            "tablekeeper_inventory_tables",
            "tablekeeper_inventory_reload_failures_total",
            "tablekeeper_store_call_duration_seconds",
            "tablekeeper_store_call_errors_total",
            "tablekeeper_table_deleted_rows",
            "tablekeeper_erasure_pending_seconds",
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} missing from:\n{text}"
            );
        }
    }

    fn series_of(m: &Metrics, table: &str) -> Vec<String> {
        let label = format!("table=\"{table}\"");
        m.render()
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains(&label))
            .map(|l| {
                l.rsplit_once(' ')
                    .map_or(l, |(series, _)| series)
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn flags_and_streaks_exist_only_while_they_are_raised() {
        let m = Metrics::new().unwrap();
        m.table_added(&spec("t"));
        m.set_drift("t", &[DriftKind::Retention]);
        let failing = OperationFigures {
            last_success: None,
            staleness: Some(chrono::Duration::seconds(5)),
            consecutive_failures: 3,
        };
        m.set_operation("t", Operation::Compact, failing);
        let raised = series_of(&m, "t");
        assert!(raised.contains(&r#"tablekeeper_drift{kind="retention",table="t"}"#.to_owned()));
        assert!(raised.contains(
            &r#"tablekeeper_consecutive_failures{operation="compact",table="t"}"#.to_owned()
        ));
        m.set_drift("t", &[]);
        m.set_operation(
            "t",
            Operation::Compact,
            OperationFigures {
                consecutive_failures: 0,
                ..failing
            },
        );
        let cleared = series_of(&m, "t");
        assert!(
            !cleared
                .iter()
                .any(|s| s.contains("drift") || s.contains("consecutive_failures")),
            "{cleared:#?}"
        );
    }

    #[test]
    fn store_calls_are_timed_and_their_errors_counted_by_call() {
        let m = Metrics::new().unwrap();
        let err = StoreError::InvalidInput("x".into());
        m.observe(
            Backend::Sqlite,
            StoreOp::Claim,
            Duration::from_millis(3),
            None,
        );
        m.observe(
            Backend::Sqlite,
            StoreOp::Claim,
            Duration::from_millis(3),
            Some(&err),
        );
        let text = m.render().unwrap();
        assert!(
            text.contains("tablekeeper_store_call_errors_total{op=\"claim\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("tablekeeper_store_call_duration_seconds_count{op=\"claim\"} 2"),
            "{text}"
        );
    }
}
