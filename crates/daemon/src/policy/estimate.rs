//! What a due candidate (table × operation) would cost and what it would buy, before it runs,
//! and how the cost side learns from what this fleet's own jobs measured.
//!
//! **Cost** is CPU-seconds, object-store requests and bytes read. The work an operation
//! touches ([`Work`]: bytes and files) comes from the table's probe; what that work costs in
//! CPU comes from a model per operation kind ([`Rates`]: a fixed part and a part per unit of
//! work, the priors below, taken from BENCHMARKS.md), corrected by what this fleet's jobs
//! measured: every finished job's measured `cost` joins a pooled ratio of measured to modelled
//! CPU ([`Rates::learn`], [`Throughput::factor`]), in which the prior counts as
//! [`PRIOR_CPU_SECONDS`] the model got right. Requests and bytes follow from the work itself.
//!
//! **Benefit** is one unit for every operation, the *point*: one file a full scan of the
//! table no longer opens. Operations that save something else are converted at documented
//! rates:
//! - compaction: the small files it removes (small files in the partitions it rewrites, less
//!   the files it writes);
//! - Z-order: the files written since the last Z-order, times [`ZORDER_SKIP_SHARE`] (the share
//!   of them a selective query stops opening once the data is clustered);
//! - VACUUM: the bytes it may reclaim, [`POINTS_PER_RECLAIMED_GIB`] points a GiB;
//! - checkpoint: the commits every snapshot load replays, a point each (one JSON file opened);
//! - purge: the files carrying deletion vectors times the share of their rows deleted (rows
//!   every scan reads and filters out);
//! - repair: the table's files (a repair is never weighed against the budget: it always runs).
//!
//! Pure: no I/O, no clock. The planner, the daemon's selection and the budget simulation all
//! call the same functions.

use serde::{Deserialize, Serialize};
use tablekeeper_delta::Probe;
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_vocab::{Cost, Outcome};

/// The share of the files written since the last Z-order that a selective query stops
/// opening once they are clustered.
pub(crate) const ZORDER_SKIP_SHARE: f64 = 0.5;

/// Points per GiB a VACUUM may reclaim: storing a GiB for a month (about $0.023 on S3
/// Standard) is weighed like ten files every scan opens.
pub(crate) const POINTS_PER_RECLAIMED_GIB: f64 = 10.0;

/// How much CPU the prior counts for once measured jobs join it: after jobs that measured
/// this many CPU-seconds, the measurements outweigh the prior.
pub(crate) const PRIOR_CPU_SECONDS: f64 = 5.0;

const GIB: f64 = (1u64 << 30) as f64;

/// What an operation would read and touch on a table.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Work {
    /// Bytes of data files the operation reads (rewrites) or lists past (VACUUM, checkpoint:
    /// none).
    pub bytes: u64,
    /// Files it reads, lists or records.
    pub files: u64,
}

/// A candidate's estimated cost, in the units the job's measured `cost` uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct EstimatedCost {
    pub cpu_seconds: f64,
    pub requests: u64,
    pub bytes: u64,
}

/// A candidate's estimate: what it costs and what it buys (in points, see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct Estimate {
    pub cost: EstimatedCost,
    pub benefit: f64,
}

/// CPU model of one operation kind: `fixed` CPU-seconds a job plus `per_unit` a unit of work,
/// the unit being a GiB read for rewrites and a thousand files for VACUUM and checkpoints,
/// times a correction this fleet's jobs teach ([`Throughput::factor`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Throughput {
    pub fixed: f64,
    pub per_unit: f64,
    /// Measured CPU-seconds, and what the model said for the same work, summed over the jobs
    /// learnt from.
    measured_cpu: f64,
    modelled_cpu: f64,
    pub jobs: u64,
}

impl Throughput {
    const fn prior(fixed: f64, per_unit: f64) -> Self {
        Throughput {
            fixed,
            per_unit,
            measured_cpu: 0.0,
            modelled_cpu: 0.0,
            jobs: 0,
        }
    }

    fn model(&self, units: f64) -> f64 {
        self.fixed + self.per_unit * units
    }

    /// Measured ÷ modelled CPU over the jobs learnt from, the prior counting as
    /// [`PRIOR_CPU_SECONDS`] of CPU the model got exactly right.
    pub(crate) fn factor(&self) -> f64 {
        (self.measured_cpu + PRIOR_CPU_SECONDS) / (self.modelled_cpu + PRIOR_CPU_SECONDS)
    }

    fn learn(&mut self, cpu_seconds: f64, units: f64) {
        if !(cpu_seconds.is_finite() && units.is_finite()) || cpu_seconds <= 0.0 || units < 0.0 {
            return;
        }
        self.measured_cpu += cpu_seconds;
        self.modelled_cpu += self.model(units);
        self.jobs += 1;
    }
}

/// The throughput of every operation kind: priors, then what this fleet's jobs measured.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rates {
    compact: Throughput,
    zorder: Throughput,
    purge: Throughput,
    repair: Throughput,
    vacuum: Throughput,
    checkpoint: Throughput,
}

impl Default for Rates {
    /// The priors, from BENCHMARKS.md (one core of the CI machine, release build):
    /// - compaction 8 CPU-s a GiB: the copy path rewrites at 260–580 MB/s, the decoded path
    ///   at about 90 MB/s ("Rewrite speed and memory", "Decoded compaction");
    /// - Z-order 12 CPU-s a GiB: it sorts as well ("Z-order's own sort");
    /// - purge and repair 10 CPU-s a GiB: decoded rewrites with deletion vectors applied;
    /// - VACUUM 0.5 CPU-s a thousand files: a listing and a log replay;
    /// - checkpoint 1 CPU-s a thousand files: one add action written per file.
    fn default() -> Self {
        Rates {
            compact: Throughput::prior(0.2, 8.0),
            zorder: Throughput::prior(0.2, 12.0),
            purge: Throughput::prior(0.2, 10.0),
            repair: Throughput::prior(0.2, 10.0),
            vacuum: Throughput::prior(0.1, 0.5),
            checkpoint: Throughput::prior(0.1, 1.0),
        }
    }
}

impl Rates {
    pub(crate) fn of(&self, op: Operation) -> &Throughput {
        match op {
            Operation::Compact => &self.compact,
            Operation::Zorder => &self.zorder,
            Operation::Purge => &self.purge,
            Operation::Repair => &self.repair,
            Operation::Vacuum => &self.vacuum,
            Operation::Checkpoint => &self.checkpoint,
        }
    }

    fn of_mut(&mut self, op: Operation) -> &mut Throughput {
        match op {
            Operation::Compact => &mut self.compact,
            Operation::Zorder => &mut self.zorder,
            Operation::Purge => &mut self.purge,
            Operation::Repair => &mut self.repair,
            Operation::Vacuum => &mut self.vacuum,
            Operation::Checkpoint => &mut self.checkpoint,
        }
    }

    /// Learns from one finished job of `op`: its measured `cost`, and the table's figures
    /// before it ran (`outcome.before`) for the operations whose unit is files.
    pub(crate) fn learn(&mut self, op: Operation, cost: &Cost, outcome: &Outcome) {
        let units = match unit_kind(op) {
            Unit::GibRead => cost.bytes_read as f64 / GIB,
            Unit::ThousandFiles => outcome.before.files.unwrap_or(0) as f64 / 1000.0,
        };
        self.of_mut(op).learn(cost.cpu_seconds, units);
    }

    /// CPU-seconds `work` of `op` costs: the model, corrected by what jobs measured.
    pub(crate) fn cpu_seconds(&self, op: Operation, work: Work) -> f64 {
        let t = self.of(op);
        t.model(units(op, work)) * t.factor()
    }

    /// Rates whose every model is `fixed` + `per_unit` as given, nothing learnt (the budget
    /// simulation's true costs).
    #[cfg(test)]
    pub(crate) fn exactly(models: &[(Operation, f64, f64)]) -> Rates {
        let mut rates = Rates::default();
        for &(op, fixed, per_unit) in models {
            *rates.of_mut(op) = Throughput::prior(fixed, per_unit);
        }
        rates
    }
}

enum Unit {
    GibRead,
    ThousandFiles,
}

fn unit_kind(op: Operation) -> Unit {
    if op.rewrites() || op == Operation::Repair {
        Unit::GibRead
    } else {
        Unit::ThousandFiles
    }
}

fn units(op: Operation, work: Work) -> f64 {
    match unit_kind(op) {
        Unit::GibRead => work.bytes as f64 / GIB,
        Unit::ThousandFiles => work.files as f64 / 1000.0,
    }
}

/// The average data file's size, at least one byte.
fn average_file_bytes(probe: &Probe) -> u64 {
    (probe.size_bytes / probe.files.max(1)).max(1)
}

/// What `op` would read and touch on the table as `probe` saw it.
pub(crate) fn work(spec: &TableSpec, op: Operation, probe: &Probe) -> Work {
    let average = average_file_bytes(probe);
    match op {
        Operation::Compact => {
            let files: u64 = crate::policy::planner::compactable_partitions(spec, probe)
                .map(|(_, n)| *n)
                .sum();
            // the small files' own average size; a probe from before it was kept: the
            // table's average when smaller, else half the threshold
            let each = if probe.small_file_bytes > 0 && probe.small_files > 0 {
                probe.small_file_bytes / probe.small_files
            } else {
                average.min(probe.small_file_threshold_bytes / 2)
            }
            .max(1);
            Work {
                bytes: files.saturating_mul(each),
                files,
            }
        }
        Operation::Zorder => Work {
            bytes: probe.size_bytes,
            files: probe.files,
        },
        Operation::Purge => Work {
            bytes: probe.files_with_deletion_vectors.saturating_mul(average),
            files: probe.files_with_deletion_vectors,
        },
        Operation::Repair => {
            let files: u64 = probe.pending_stale_writes().map(|w| w.files).sum();
            Work {
                bytes: files.saturating_mul(average),
                files,
            }
        }
        Operation::Vacuum | Operation::Checkpoint => Work {
            bytes: 0,
            files: probe.files,
        },
    }
}

/// Object-store requests `work` of `op` needs: reads of each input file's footer and body and
/// one write per output file for rewrites, a LIST page per thousand files for VACUUM, the log's
/// commits and one checkpoint write for checkpoints, plus the log's own reads.
fn requests(spec: &TableSpec, op: Operation, work: Work, probe: &Probe) -> u64 {
    const LOG: u64 = 4;
    match unit_kind(op) {
        Unit::GibRead => {
            let outputs = work.bytes.div_ceil(spec.compaction.target_file_size.max(1));
            2 * work.files + outputs + LOG
        }
        Unit::ThousandFiles if op == Operation::Vacuum => work.files.div_ceil(1000) + LOG,
        Unit::ThousandFiles => probe.commits_since_checkpoint + 1 + LOG,
    }
}

/// What the operation buys, in points (see the module doc).
pub(crate) fn benefit(spec: &TableSpec, op: Operation, probe: &Probe, work: Work) -> f64 {
    match op {
        Operation::Compact => {
            let written = work
                .bytes
                .div_ceil(spec.compaction.target_file_size.max(1))
                .max(1);
            work.files.saturating_sub(written) as f64
        }
        Operation::Zorder => {
            let since = match probe.history.last_zorder_version {
                None => 1.0,
                Some(z) => {
                    let newer = (probe.version - z).max(0) as f64;
                    (newer / (probe.version + 1).max(1) as f64).min(1.0)
                }
            };
            probe.files as f64 * since * ZORDER_SKIP_SHARE
        }
        Operation::Vacuum => {
            // files a rewrite or delete removed since the last VACUUM, at the average size:
            // commits since then (from the commit rate), at most the table's own file count
            let hours = match probe.history.last_vacuum_at {
                Some(v) => (probe.probed_at - v).num_seconds().max(0) as f64 / 3600.0,
                None => {
                    (probe.probed_at - probe.history.created_at.unwrap_or(probe.probed_at))
                        .num_seconds()
                        .max(0) as f64
                        / 3600.0
                }
            };
            let removed = (probe.history.commits_per_hour as f64 * hours).min(probe.files as f64);
            removed * average_file_bytes(probe) as f64 / GIB * POINTS_PER_RECLAIMED_GIB
        }
        Operation::Checkpoint => probe.commits_since_checkpoint as f64,
        Operation::Purge => {
            let rows = probe
                .rows_in_files_with_deletion_vectors
                .max(probe.deleted_rows)
                .max(1);
            probe.files_with_deletion_vectors as f64 * probe.deleted_rows as f64 / rows as f64
        }
        Operation::Repair => probe.files as f64,
    }
}

/// The estimate for `op` on the table as `probe` saw it, at `rates`.
pub(crate) fn estimate(spec: &TableSpec, op: Operation, probe: &Probe, rates: &Rates) -> Estimate {
    let work = work(spec, op, probe);
    Estimate {
        cost: EstimatedCost {
            cpu_seconds: rates.cpu_seconds(op, work),
            requests: requests(spec, op, work, probe),
            bytes: work.bytes,
        },
        benefit: benefit(spec, op, probe, work),
    }
}

/// How far estimates were from what jobs measured: the mean of |ln(measured ÷ estimated)|
/// over the jobs, reported as a factor (1.0: exact; 2.0: typically off by two either way).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct EstimateError {
    sum_abs_log: f64,
    pub jobs: u64,
}

impl EstimateError {
    pub(crate) fn record(&mut self, estimated: f64, measured: f64) {
        // a job that measured no CPU at all (a no-op) says nothing about the estimate
        if estimated > 0.0 && measured > 0.0 {
            self.sum_abs_log += (measured / estimated).ln().abs();
            self.jobs += 1;
        }
    }

    /// The typical factor between estimate and measurement; `None` before any job.
    pub(crate) fn factor(&self) -> Option<f64> {
        (self.jobs > 0).then(|| (self.sum_abs_log / self.jobs as f64).exp())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::planner::tests::{probe, spec};
    use tablekeeper_vocab::TableFigures;

    #[test]
    fn compaction_counts_the_small_files_of_the_partitions_it_rewrites() {
        let s = spec("");
        // 30 files of 100 bytes; day=1 has 12 small files (qualifies), day=2 has 3
        let p = probe(serde_json::json!({}));
        let w = work(&s, Operation::Compact, &p);
        assert_eq!(w.files, 12);
        assert_eq!(
            w.bytes,
            12 * 50,
            "half the 100-byte threshold, under the average"
        );
        let e = estimate(&s, Operation::Compact, &p, &Rates::default());
        assert_eq!(e.benefit, 11.0, "12 files in, one out");
        assert!(e.cost.cpu_seconds >= 0.2, "{e:?}");
        assert_eq!(e.cost.requests, 2 * 12 + 1 + 4);
    }

    #[test]
    fn checkpoint_benefit_is_the_commits_replayed() {
        let s = spec("");
        let p = probe(serde_json::json!({"commits_since_checkpoint": 40}));
        let e = estimate(&s, Operation::Checkpoint, &p, &Rates::default());
        assert_eq!(e.benefit, 40.0);
        assert_eq!(e.cost.bytes, 0);
    }

    #[test]
    fn zorder_benefit_follows_the_share_written_since_the_last_zorder() {
        let s = spec("");
        let never = probe(serde_json::json!({}));
        let half = probe(serde_json::json!({"version": 9, "last_zorder_version": 4}));
        let b_never = benefit(&s, Operation::Zorder, &never, Work::default());
        let b_half = benefit(&s, Operation::Zorder, &half, Work::default());
        assert_eq!(b_never, 30.0 * ZORDER_SKIP_SHARE);
        assert_eq!(b_half, 30.0 * 0.5 * ZORDER_SKIP_SHARE);
    }

    #[test]
    fn measured_jobs_outweigh_the_prior() {
        let mut rates = Rates::default();
        let s = spec("");
        let p = probe(serde_json::json!({}));
        let before = estimate(&s, Operation::Compact, &p, &rates)
            .cost
            .cpu_seconds;
        // jobs that measured three times what the model says for a GiB read
        let model = rates.of(Operation::Compact).model(1.0);
        for _ in 0..20 {
            let cost = Cost {
                cpu_seconds: 3.0 * model,
                bytes_read: 1 << 30,
                ..Cost::default()
            };
            rates.learn(Operation::Compact, &cost, &Outcome::default());
        }
        let factor = rates.of(Operation::Compact).factor();
        assert!((factor - 3.0).abs() < 0.1, "{factor}");
        let after = estimate(&s, Operation::Compact, &p, &rates)
            .cost
            .cpu_seconds;
        assert!((after / before - factor).abs() < 1e-9);
        assert_eq!(rates.of(Operation::Compact).jobs, 20);
        // VACUUM learns per thousand files of the table before the job
        let before = Outcome {
            before: TableFigures {
                files: Some(10_000),
                ..TableFigures::default()
            },
            ..Outcome::default()
        };
        let cost = Cost {
            cpu_seconds: 30.1,
            ..Cost::default()
        };
        rates.learn(Operation::Vacuum, &cost, &before);
        assert!(rates.of(Operation::Vacuum).factor() > 1.0);
        // a job that measured no CPU teaches nothing
        rates.learn(Operation::Zorder, &Cost::default(), &Outcome::default());
        assert_eq!(rates.of(Operation::Zorder).jobs, 0);
    }

    #[test]
    fn estimate_error_is_a_symmetric_factor() {
        let mut e = EstimateError::default();
        assert_eq!(e.factor(), None);
        e.record(10.0, 20.0);
        e.record(10.0, 5.0);
        e.record(0.0, 5.0);
        assert_eq!(e.jobs, 2);
        assert!((e.factor().unwrap() - 2.0).abs() < 1e-9);
    }
}
