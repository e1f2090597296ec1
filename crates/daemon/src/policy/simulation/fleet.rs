//! The simulated fleet: tables whose state is the [`Probe`] the daemon would read of them, so
//! the real planner and estimates read it unchanged, and what commits and maintenance do to it.
//!
//! Four kinds of table, drawn with a seeded generator: streaming writers committing every
//! minute, hourly and daily batches, and idle tables; large and small files per commit; most
//! partitioned by day. A few daily tables delete rows with deletion vectors under an erasure
//! deadline, a few are Z-ordered, and stale writes needing a repair happen now and then.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tablekeeper_delta::Probe;
use tablekeeper_inventory::{Inventory, Operation, TableSpec};
use tablekeeper_vocab::{Cost, Outcome, TableFigures};

use crate::policy::estimate::{self, Rates};

const MIB: u64 = 1 << 20;
/// `compaction.target_file_size` of every simulated table.
pub(super) const TARGET: u64 = 256 * MIB;
/// Files under this are small (the probe's threshold).
pub(super) const SMALL: u64 = 64 * MIB;
const ROWS_PER_MIB: u64 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Streaming,
    Hourly,
    Daily,
    Idle,
}

/// Small files of one partition, and their bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Part {
    small: u64,
    small_bytes: u64,
}

/// One simulated table.
#[derive(Debug, Clone)]
pub(super) struct SimTable {
    pub spec: TableSpec,
    /// What a probe would read now.
    pub probe: Probe,
    pub kind: Kind,
    partitioned: bool,
    /// Minute of the hour (hourly) or of the day (daily) the batch commits at.
    commit_minute: u32,
    files_per_commit: u64,
    file_bytes: u64,
    parts: BTreeMap<String, Part>,
    /// Deletes rows with deletion vectors every day (and has an erasure deadline).
    deletes: bool,
    /// The table's true CPU throughput against the fleet's, for the costs jobs measure.
    cost_noise: f64,
    /// Next schedule tick per operation.
    pub next_tick: BTreeMap<Operation, DateTime<Utc>>,
    /// Last success per operation (what the job table would say).
    pub last_success: BTreeMap<Operation, DateTime<Utc>>,
}

/// The true CPU-seconds a job costs (what jobs measure), against which the priors of
/// [`Rates::default`] are off on purpose, so the estimates have something to learn:
/// compaction 5, Z-order 15, purge 9, repair 10 CPU-s a GiB, VACUUM 0.3 and checkpoints
/// 1.5 CPU-s a thousand files, each plus 0.3 CPU-s a job.
fn true_rates() -> Rates {
    Rates::exactly(&[
        (Operation::Compact, 0.3, 5.0),
        (Operation::Zorder, 0.3, 15.0),
        (Operation::Purge, 0.3, 9.0),
        (Operation::Repair, 0.3, 10.0),
        (Operation::Vacuum, 0.3, 0.3),
        (Operation::Checkpoint, 0.3, 1.5),
    ])
}

/// The simulated fleet.
pub(super) struct Fleet {
    pub tables: Vec<SimTable>,
    truth: Rates,
    rng: StdRng,
}

impl Fleet {
    /// `n` tables drawn from `seed`, created at `start`.
    pub(super) fn new(n: usize, seed: u64, start: DateTime<Utc>) -> Fleet {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut yaml = String::from(
            "defaults:\n  compaction: { schedule: \"0 */6 * * *\", target_file_size: 256MiB, min_small_files: 10 }\n  \
             vacuum: { schedule: \"0 3 * * *\" }\n  checkpoint: { schedule: \"*/30 * * * *\", max_commits_since_checkpoint: 100 }\n  \
             zorder: { schedule: \"0 4 * * 0\" }\n  purge: { schedule: \"0 5 * * *\" }\ntables:\n",
        );
        let mut drafts = Vec::with_capacity(n);
        for i in 0..n {
            let roll: f64 = rng.random();
            let kind = match roll {
                r if r < 0.15 => Kind::Streaming,
                r if r < 0.40 => Kind::Hourly,
                r if r < 0.65 => Kind::Daily,
                _ => Kind::Idle,
            };
            let partitioned = rng.random_bool(0.7);
            let large = rng.random_bool(0.3);
            let (files_per_commit, file_mib) = match (kind, large) {
                (Kind::Streaming, false) => (1, rng.random_range(1..4)),
                (Kind::Streaming, true) => (rng.random_range(2..6), rng.random_range(2..8)),
                (Kind::Hourly, false) => (rng.random_range(2..10), rng.random_range(2..16)),
                (Kind::Hourly, true) => (rng.random_range(10..50), rng.random_range(8..40)),
                (Kind::Daily, false) => (rng.random_range(5..40), rng.random_range(4..32)),
                (Kind::Daily, true) => (rng.random_range(50..400), rng.random_range(16..60)),
                (Kind::Idle, _) => (rng.random_range(5..100), rng.random_range(1..60)),
            };
            let deletes = kind == Kind::Daily && rng.random_bool(0.1);
            let zorder = kind != Kind::Streaming && rng.random_bool(0.1);
            let importance = match rng.random_range(0..10) {
                0 => "high",
                1 | 2 => "low",
                _ => "normal",
            };
            let compaction = match kind {
                Kind::Streaming => "0 * * * *",
                Kind::Hourly => "0 */6 * * *",
                Kind::Daily | Kind::Idle => "0 2 * * *",
            };
            let mut layout = String::new();
            if partitioned {
                layout.push_str("      partition_by: [day]\n");
            }
            if zorder {
                layout.push_str("      zorder: [user_id]\n");
            }
            let layout = if layout.is_empty() {
                "    layout: {}\n".to_string()
            } else {
                format!("    layout:\n{layout}")
            };
            let retention = if deletes {
                "    retention: { erasure_deadline: 10d }\n"
            } else {
                ""
            };
            let zorder = if zorder {
                "      zorder: { enabled: true }\n"
            } else {
                ""
            };
            yaml.push_str(&format!(
                "  - name: t{i}\n    path: /sim/t{i}\n    owner: team{}\n{layout}{retention}    \
                 maintenance:\n      importance: {importance}\n      compaction: {{ schedule: \"{compaction}\" }}\n{zorder}",
                i % 20,
            ));
            drafts.push((kind, partitioned, files_per_commit, file_mib * MIB, deletes));
        }
        let inventory = Inventory::parse(Path::new("simulated.yaml"), &yaml)
            .unwrap_or_else(|e| panic!("the simulated inventory does not load: {e}"));
        let tables = inventory
            .tables
            .into_iter()
            .zip(drafts)
            .map(
                |(spec, (kind, partitioned, files_per_commit, file_bytes, deletes))| {
                    let commit_minute = match kind {
                        Kind::Hourly => rng.random_range(0..60),
                        _ => rng.random_range(0..1440),
                    };
                    let cost_noise = rng.random_range(0.7..1.4);
                    let mut t = SimTable {
                        probe: base_probe(&spec.path, start),
                        spec,
                        kind,
                        partitioned,
                        commit_minute,
                        files_per_commit,
                        file_bytes,
                        parts: BTreeMap::new(),
                        deletes,
                        cost_noise,
                        next_tick: BTreeMap::new(),
                        last_success: BTreeMap::new(),
                    };
                    // every table starts with a day of history
                    t.commit(start);
                    t
                },
            )
            .collect();
        Fleet {
            tables,
            truth: true_rates(),
            rng,
        }
    }

    /// Applies the commits of minute `now`.
    pub(super) fn commit_minute(&mut self, now: DateTime<Utc>) {
        let minute_of_day = (now.timestamp() / 60).rem_euclid(1440) as u32;
        for t in &mut self.tables {
            let commits = match t.kind {
                Kind::Streaming => true,
                Kind::Hourly => minute_of_day % 60 == t.commit_minute,
                Kind::Daily => minute_of_day == t.commit_minute,
                Kind::Idle => false,
            };
            if commits {
                t.commit(now);
                if t.deletes {
                    t.delete_rows(now);
                }
            }
        }
    }

    /// A stale write needing a repair appears on a random table about once every 12 hours.
    pub(super) fn stale_write(&mut self) -> Option<usize> {
        let n = self.tables.len();
        (self.rng.random_range(0..720) == 0).then(|| self.rng.random_range(0..n))
    }

    /// What `op` on table `i` measures when it runs (CPU at the table's true throughput).
    pub(super) fn measured(&self, i: usize, op: Operation) -> (Cost, Outcome) {
        let t = &self.tables[i];
        let work = estimate::work(&t.spec, op, &t.probe);
        let cpu = self.truth.cpu_seconds(op, work) * t.cost_noise;
        let cost = Cost {
            cpu_seconds: cpu,
            bytes_read: work.bytes,
            ..Cost::default()
        };
        let outcome = Outcome {
            before: TableFigures {
                files: Some(t.probe.files),
                small_files: Some(t.probe.small_files),
                bytes: Some(t.probe.size_bytes),
                ..TableFigures::default()
            },
            ..Outcome::default()
        };
        (cost, outcome)
    }
}

/// A probe of an empty, freshly made table.
fn base_probe(path: &str, now: DateTime<Utc>) -> Probe {
    serde_json::from_value(serde_json::json!({
        "table": path, "version": -1, "probed_at": now, "created_at": now,
        "history_from_version": 0, "read": true, "last_commit_at": null, "files": 0,
        "size_bytes": 0, "small_files": 0, "small_file_threshold_bytes": SMALL,
        "small_files_by_partition": {}, "commits_since_checkpoint": 0,
        "last_checkpoint_version": null, "last_checkpoint_at": null, "commits_per_hour": 0,
        "last_optimize_at": null, "last_zorder_at": null, "last_zorder_version": null,
        "last_vacuum_at": null, "properties": {}, "min_reader_version": 1,
        "min_writer_version": 2, "reader_features": [], "writer_features": [],
        "partition_columns": [], "deletion_vectors_enabled": false
    }))
    .unwrap_or_else(|e| panic!("the simulated probe does not parse: {e}"))
}

impl SimTable {
    fn partition(&self, now: DateTime<Utc>) -> String {
        if self.partitioned {
            format!("day={}", now.timestamp().div_euclid(86_400))
        } else {
            String::new()
        }
    }

    fn bump(&mut self, now: DateTime<Utc>) {
        self.probe.version += 1;
        self.probe.commits_since_checkpoint += 1;
        self.probe.history.last_commit_at = Some(now);
    }

    fn sync_small(&mut self) {
        self.probe.small_files = self.parts.values().map(|p| p.small).sum();
        self.probe.small_file_bytes = self.parts.values().map(|p| p.small_bytes).sum();
        self.probe.small_files_by_partition = self
            .parts
            .iter()
            .filter(|(_, p)| p.small > 0)
            .map(|(k, p)| (k.clone(), p.small))
            .collect();
    }

    fn commit(&mut self, now: DateTime<Utc>) {
        let key = self.partition(now);
        let part = self.parts.entry(key).or_default();
        if self.file_bytes < SMALL {
            part.small += self.files_per_commit;
            part.small_bytes += self.files_per_commit * self.file_bytes;
        }
        self.probe.files += self.files_per_commit;
        self.probe.size_bytes += self.files_per_commit * self.file_bytes;
        self.probe.history.commits_per_hour = match self.kind {
            Kind::Streaming => 60,
            Kind::Hourly => 1,
            Kind::Daily | Kind::Idle => 0,
        };
        self.bump(now);
        self.sync_small();
    }

    fn delete_rows(&mut self, now: DateTime<Utc>) {
        let files = 5.min(self.probe.files);
        let rows = files * self.file_bytes / MIB * ROWS_PER_MIB;
        self.probe.files_with_deletion_vectors =
            (self.probe.files_with_deletion_vectors + files).min(self.probe.files);
        self.probe.rows_in_files_with_deletion_vectors += rows;
        self.probe.deleted_rows += rows / 50;
        self.probe.deletion_vectors_enabled = true;
        self.probe.history.erasure_pending_since.get_or_insert(now);
        self.bump(now);
    }

    /// Rewrites `bytes` in `files` files into files near the target: how many it writes and
    /// how many of those are still small.
    fn rewrite(bytes: u64, files: u64) -> (u64, u64) {
        let outputs = bytes.div_ceil(TARGET).max(1).min(files.max(1));
        let small = if bytes / outputs < SMALL { outputs } else { 0 };
        (outputs, small)
    }

    /// What `op` does to the table when it runs at `now`.
    pub(super) fn apply(&mut self, op: Operation, now: DateTime<Utc>) {
        match op {
            Operation::Compact => {
                let min = u64::from(self.spec.compaction.min_small_files);
                let mut removed = 0;
                let mut written = 0;
                for part in self.parts.values_mut().filter(|p| p.small >= min) {
                    let (outputs, small) = Self::rewrite(part.small_bytes, part.small);
                    removed += part.small;
                    written += outputs;
                    part.small = small;
                    part.small_bytes = if small > 0 { part.small_bytes } else { 0 };
                }
                self.probe.files = self.probe.files + written - removed.min(self.probe.files);
                self.probe.history.last_optimize_at = Some(now);
                self.bump(now);
                self.sync_small();
            }
            Operation::Zorder => {
                let (outputs, small) = Self::rewrite(self.probe.size_bytes, self.probe.files);
                self.parts.clear();
                if small > 0 {
                    self.parts.insert(
                        self.partition(now),
                        Part {
                            small,
                            small_bytes: self.probe.size_bytes,
                        },
                    );
                }
                self.probe.files = outputs;
                self.probe.history.last_zorder_at = Some(now);
                self.probe.history.last_zorder_version = Some(self.probe.version + 1);
                self.bump(now);
                self.sync_small();
            }
            Operation::Purge => {
                self.probe.files_with_deletion_vectors = 0;
                self.probe.rows_in_files_with_deletion_vectors = 0;
                self.probe.deleted_rows = 0;
                self.probe.history.erasure_pending_since = None;
                self.bump(now);
            }
            Operation::Vacuum => self.probe.history.last_vacuum_at = Some(now),
            Operation::Checkpoint => {
                self.probe.commits_since_checkpoint = 0;
                self.probe.last_checkpoint_at = Some(now);
                self.probe.last_checkpoint_version = Some(self.probe.version);
            }
            Operation::Repair => self.bump(now),
        }
        self.last_success.insert(op, now);
    }

    /// Fires the ticks due at `now`: the operations whose schedule reached `now`.
    pub(super) fn due_ticks(&mut self, now: DateTime<Utc>) -> Vec<Operation> {
        let mut fired = Vec::new();
        for op in Operation::SCHEDULED {
            if !self.spec.operation_enabled(op) {
                continue;
            }
            let Some(schedule) = self.spec.schedule(op) else {
                continue;
            };
            let next = *self.next_tick.entry(op).or_insert_with(|| {
                schedule
                    .next_after(now - Duration::seconds(1))
                    .unwrap_or(now)
            });
            if next <= now {
                fired.push(op);
                let after = schedule.next_after(now).unwrap_or(now + Duration::days(1));
                self.next_tick.insert(op, after);
            }
        }
        fired
    }
}
