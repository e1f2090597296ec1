//! The gauges that describe a table's state (`table_info`, the size figures, staleness, last
//! success, failure streaks, drift, erasure), kept as one compact row per table and written
//! out at scrape time, one metric family after the other.
//!
//! These series make up nearly all of `/metrics` (ten per healthy table). As prometheus
//! gauge vectors each series cost about 440 bytes of heap (its label pairs as owned strings,
//! an atomic, a hash map entry), 44 MB at 10,000 tables, and a scrape gathered all of them
//! into one more copy before encoding (another 30 MB at the peak). A row holds the same
//! figures in a few hundred bytes, and the scrape builds one family at a time. Names, types,
//! labels and help texts are those of the contract (DESIGN.md "Metrics"); which series exist
//! when is decided by the setters in `metrics/mod.rs`, written down in README "Metrics".

use std::collections::BTreeMap;
use std::sync::RwLock;

use prometheus::proto::{Gauge, LabelPair, Metric, MetricFamily, MetricType};
use prometheus::{Encoder, TextEncoder};
use tablekeeper_vocab::{DriftKind, Operation};

use super::figures::{OperationFigures, TableFigures};

/// What one table exports, as the setters left it.
#[derive(Debug, Default)]
pub(super) struct Row {
    /// `table_info`'s owner label, while the table is in the inventory.
    pub owner: Option<String>,
    pub figures: Option<TableFigures>,
    pub operations: OperationRows,
    pub drift: Vec<DriftKind>,
    pub erasure_deadline_seconds: Option<f64>,
    pub last_stale_write_seconds: Option<f64>,
    /// Set only for tables whose rewrites tablekeeper owns: the alert reads it.
    pub last_foreign_rewrite_seconds: Option<f64>,
}

/// A table's operation rows, by operation. A sorted vector: a table has a few, and a
/// `BTreeMap` node costs about 550 bytes of heap whatever it holds (5 MB at 10,000 tables).
#[derive(Debug, Default)]
pub(super) struct OperationRows(Vec<(Operation, OperationRow)>);

impl OperationRows {
    /// The row of `op`, created empty if missing.
    pub fn entry(&mut self, op: Operation) -> &mut OperationRow {
        let at = match self.0.binary_search_by_key(&op, |(o, _)| *o) {
            Ok(at) => at,
            Err(at) => {
                self.0.insert(at, (op, OperationRow::default()));
                at
            }
        };
        &mut self.0[at].1
    }

    pub fn remove(&mut self, op: Operation) {
        self.0.retain(|(o, _)| *o != op);
    }

    pub fn retain(&mut self, mut keep: impl FnMut(Operation) -> bool) {
        self.0.retain(|(o, _)| keep(*o));
    }

    /// The rows in operation order.
    pub fn iter(&self) -> impl Iterator<Item = (Operation, &OperationRow)> {
        self.0.iter().map(|(o, row)| (*o, row))
    }
}

/// One operation's series of a table; `None` where the series does not exist.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct OperationRow {
    pub last_success_seconds: Option<f64>,
    pub staleness_seconds: Option<f64>,
    /// A series only while > 0.
    pub consecutive_failures: Option<i64>,
}

impl OperationRow {
    /// Applies new figures: a figure not known keeps the value exported before.
    pub fn update(&mut self, figures: OperationFigures) {
        if let Some(at) = figures.last_success {
            self.last_success_seconds = Some(at.timestamp() as f64);
        }
        if let Some(stale) = figures.staleness {
            self.staleness_seconds = Some(stale.num_seconds() as f64);
        }
        self.consecutive_failures =
            (figures.consecutive_failures > 0).then_some(figures.consecutive_failures);
    }
}

/// The rows of every table, by table name.
#[derive(Debug, Default)]
pub(super) struct TableGauges {
    rows: RwLock<BTreeMap<String, Row>>,
}

impl TableGauges {
    /// Changes the row of `table` (created empty if missing).
    pub fn update(&self, table: &str, change: impl FnOnce(&mut Row)) {
        let mut rows = self.rows.write().unwrap_or_else(|e| e.into_inner());
        match rows.get_mut(table) {
            Some(row) => change(row),
            None => change(rows.entry(table.to_owned()).or_default()),
        }
    }

    /// Changes the row of `table` only if it has one.
    pub fn update_existing(&self, table: &str, change: impl FnOnce(&mut Row)) {
        let mut rows = self.rows.write().unwrap_or_else(|e| e.into_inner());
        if let Some(row) = rows.get_mut(table) {
            change(row);
        }
    }

    /// Drops every series of `table`.
    pub fn remove(&self, table: &str) {
        let mut rows = self.rows.write().unwrap_or_else(|e| e.into_inner());
        rows.remove(table);
    }

    /// Appends every family that has a series, in the text exposition format.
    pub fn encode(&self, out: &mut Vec<u8>) -> prometheus::Result<()> {
        let rows = self.rows.read().unwrap_or_else(|e| e.into_inner());
        for family in Family::ALL {
            let mut metrics = Vec::new();
            for (table, row) in rows.iter() {
                family.samples(row, |labels, value| {
                    metrics.push(metric(table, labels, value));
                });
            }
            if metrics.is_empty() {
                continue;
            }
            let mut mf = MetricFamily::default();
            mf.set_name(family.name().to_owned());
            mf.set_help(family.help().to_owned());
            mf.set_field_type(MetricType::GAUGE);
            mf.set_metric(metrics);
            TextEncoder::new().encode(&[mf], out)?;
        }
        Ok(())
    }
}

/// A gauge sample with the `table` label and `labels`, label names in alphabetical order
/// (as the prometheus crate writes its own series).
fn metric(table: &str, labels: &[(&'static str, &str)], value: f64) -> Metric {
    let mut pairs: Vec<LabelPair> = labels
        .iter()
        .chain(std::iter::once(&("table", table)))
        .map(|(name, value)| {
            let mut pair = LabelPair::default();
            pair.set_name((*name).to_owned());
            pair.set_value((*value).to_owned());
            pair
        })
        .collect();
    pairs.sort_by(|a, b| a.name().cmp(b.name()));
    let mut gauge = Gauge::default();
    gauge.set_value(value);
    let mut m = Metric::from_gauge(gauge);
    m.set_label(pairs);
    m
}

/// The families written from the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Info,
    LastSuccess,
    Staleness,
    ConsecutiveFailures,
    Files,
    SizeBytes,
    SmallFiles,
    Version,
    CommitsSinceCheckpoint,
    CommitsPerHour,
    DeletedRows,
    ErasurePending,
    ErasureDeadline,
    AverageFileSizeLow,
    UnrestorableVersions,
    RetainedBytes,
    Drift,
    LastStaleWrite,
    LastForeignRewrite,
}

impl Family {
    const ALL: [Family; 19] = [
        Family::Info,
        Family::LastSuccess,
        Family::Staleness,
        Family::ConsecutiveFailures,
        Family::Files,
        Family::SizeBytes,
        Family::SmallFiles,
        Family::Version,
        Family::CommitsSinceCheckpoint,
        Family::CommitsPerHour,
        Family::DeletedRows,
        Family::ErasurePending,
        Family::ErasureDeadline,
        Family::AverageFileSizeLow,
        Family::UnrestorableVersions,
        Family::RetainedBytes,
        Family::Drift,
        Family::LastStaleWrite,
        Family::LastForeignRewrite,
    ];

    fn name(self) -> &'static str {
        match self {
            Family::Info => "tablekeeper_table_info",
            Family::LastSuccess => "tablekeeper_last_success_timestamp_seconds",
            Family::Staleness => "tablekeeper_staleness_seconds",
            Family::ConsecutiveFailures => "tablekeeper_consecutive_failures",
            Family::Files => "tablekeeper_table_files",
            Family::SizeBytes => "tablekeeper_table_size_bytes",
            Family::SmallFiles => "tablekeeper_table_small_files",
            Family::Version => "tablekeeper_table_version",
            Family::CommitsSinceCheckpoint => "tablekeeper_table_commits_since_checkpoint",
            Family::CommitsPerHour => "tablekeeper_table_commits_per_hour",
            Family::DeletedRows => "tablekeeper_table_deleted_rows",
            Family::ErasurePending => "tablekeeper_erasure_pending_seconds",
            Family::ErasureDeadline => "tablekeeper_erasure_deadline_seconds",
            Family::AverageFileSizeLow => "tablekeeper_table_average_file_size_low",
            Family::UnrestorableVersions => "tablekeeper_table_unrestorable_versions",
            Family::RetainedBytes => "tablekeeper_table_retained_bytes",
            Family::Drift => "tablekeeper_drift",
            Family::LastStaleWrite => "tablekeeper_last_stale_write_timestamp_seconds",
            Family::LastForeignRewrite => "tablekeeper_last_foreign_rewrite_timestamp_seconds",
        }
    }

    fn help(self) -> &'static str {
        match self {
            Family::Info => "Always 1; joins tables to their owners for alert routing",
            Family::LastSuccess => "Unix time of the last successful run of an operation on a table (Delta log or job table)",
            Family::Staleness => "Seconds since the last successful run of an operation; since table creation if never",
            Family::ConsecutiveFailures => "Failed attempts of an operation on a table since its last success, fleet-wide from the job table (every replica exports the same value)",
            Family::Files => "Active data files, from the Delta log",
            Family::SizeBytes => "Bytes in active data files, from the Delta log",
            Family::SmallFiles => "Active data files under the small-file threshold",
            Family::Version => "Current Delta table version",
            Family::CommitsSinceCheckpoint => "Commits since the last checkpoint",
            Family::CommitsPerHour => "Commits in the last hour; compare with writers.commit_budget_per_hour",
            Family::DeletedRows => "Rows marked deleted by deletion vectors but still inside active files (from the log)",
            Family::ErasurePending => "Age of the oldest deletion whose rows are still physically on storage (in a file with a deletion vector, a removed file not yet vacuumed, or a change-data file); 0 when none",
            Family::ErasureDeadline => "The inventory's retention.erasure_deadline: deleted rows must be physically gone within it",
            Family::AverageFileSizeLow => "1 while the average active file size (size_bytes / files) is under layout.min_average_file_size and compaction could raise it (a partition holds compaction.min_small_files small files or more); no series otherwise",
            Family::UnrestorableVersions => "Versions owed (pins, clones, the window's oldest) that the last restore drill could not restore; a series only while > 0",
            Family::RetainedBytes => "Bytes kept on storage only because of the VACUUM window, a pin or a clone (reason), from the last restore drill; a series only while > 0",
            Family::Drift => "1 when the live table disagrees with the inventory (kind: retention, protocol, partitioning)",
            Family::LastStaleWrite => "When the job store first recorded the table's latest stale write (any replica)",
            Family::LastForeignRewrite => "Commit time of the latest rewrite by another engine of a table tablekeeper rewrites, from the job store (any replica)",
        }
    }

    /// Calls `emit` with the extra labels and the value of each series `row` has in this
    /// family.
    fn samples(self, row: &Row, mut emit: impl FnMut(&[(&'static str, &str)], f64)) {
        let count = |n: u64| n as f64;
        match self {
            Family::Info => {
                if let Some(owner) = &row.owner {
                    emit(&[("owner", owner)], 1.0);
                }
            }
            Family::LastSuccess | Family::Staleness | Family::ConsecutiveFailures => {
                for (op, o) in row.operations.iter() {
                    let value = match self {
                        Family::LastSuccess => o.last_success_seconds,
                        Family::Staleness => o.staleness_seconds,
                        _ => o.consecutive_failures.map(|n| n as f64),
                    };
                    if let Some(value) = value {
                        emit(&[("operation", op.as_str())], value);
                    }
                }
            }
            Family::Drift => {
                for kind in &row.drift {
                    emit(&[("kind", kind.as_str())], 1.0);
                }
            }
            Family::ErasureDeadline => {
                if let Some(seconds) = row.erasure_deadline_seconds {
                    emit(&[], seconds);
                }
            }
            Family::LastStaleWrite => {
                if let Some(at) = row.last_stale_write_seconds {
                    emit(&[], at);
                }
            }
            Family::LastForeignRewrite => {
                if let Some(at) = row.last_foreign_rewrite_seconds {
                    emit(&[], at);
                }
            }
            Family::RetainedBytes => {
                let Some(f) = &row.figures else { return };
                let r = f.retained_bytes;
                for (reason, bytes) in [("window", r.window), ("pin", r.pin), ("clone", r.clone)] {
                    if bytes > 0 {
                        emit(&[("reason", reason)], count(bytes));
                    }
                }
            }
            figure => {
                let Some(f) = &row.figures else { return };
                let value = match figure {
                    Family::Files => Some(count(f.files)),
                    Family::SizeBytes => Some(count(f.size_bytes)),
                    Family::SmallFiles => Some(count(f.small_files)),
                    Family::Version => Some(f.version as f64),
                    Family::CommitsSinceCheckpoint => Some(count(f.commits_since_checkpoint)),
                    Family::CommitsPerHour => f.commits_per_hour.map(count),
                    Family::DeletedRows => f.erasure.map(|e| count(e.deleted_rows)),
                    Family::ErasurePending => {
                        f.erasure.and_then(|e| e.pending).map(|p| p.as_secs_f64())
                    }
                    Family::AverageFileSizeLow => f.average_file_size_low.then_some(1.0),
                    Family::UnrestorableVersions => {
                        (f.unrestorable_versions > 0).then(|| count(f.unrestorable_versions))
                    }
                    _ => None,
                };
                if let Some(value) = value {
                    emit(&[], value);
                }
            }
        }
    }
}
