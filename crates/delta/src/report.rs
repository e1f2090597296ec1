//! What a maintenance operation did, as it goes into the job's `result` JSON.
//!
//! Owns [`OpReport`]. Reports are facts read back from the log after the operation, never
//! estimates, except where a field says so (dry runs).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tablekeeper_vocab::Operation;

/// How far the configured and the table's own retention disagree (reported, never resolved).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetentionDrift {
    /// Retention the inventory asked for, in seconds.
    pub inventory_secs: u64,
    /// The table's `delta.deletedFileRetentionDuration` (or `delta.logRetentionDuration`), in seconds.
    pub table_secs: u64,
}

/// Upper bound on the paths listed in a report; the job result JSON must stay small.
/// 1000 paths of ~100 bytes keep a result under ~100 KiB.
pub const MAX_REPORTED_PATHS: usize = 1000;

/// The outcome of one maintenance operation.
#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    /// Which operation ran.
    pub operation: Operation,
    /// The table uri.
    pub table: String,
    /// True when nothing was changed on purpose.
    pub dry_run: bool,
    /// Table version the operation started from.
    pub version_before: i64,
    /// Version of the last commit this operation wrote; `None` when it wrote none.
    pub version_after: Option<i64>,
    /// Every version this operation committed, in order.
    pub commits: Vec<i64>,
    /// Data files the operation removed from the table (compaction/Z-order) or deleted from
    /// storage (vacuum).
    pub files_removed: u64,
    /// Data files the operation added.
    pub files_added: u64,
    /// Bytes of `files_removed`.
    pub bytes_removed: u64,
    /// Bytes of `files_added`.
    pub bytes_added: u64,
    /// Partitions rewritten, as `col=value[/col=value]`; `""` stands for an unpartitioned table.
    pub partitions_touched: Vec<String>,
    /// The retention this operation applied (vacuum: deleted files, checkpoint: log), seconds.
    pub retention_used_secs: Option<u64>,
    /// Disagreement between the inventory's retention and the table property, if any.
    pub retention_drift: Option<RetentionDrift>,
    /// Vacuum dry run: how many files it would delete.
    pub would_delete_files: Option<u64>,
    /// Vacuum dry run: bytes of the files that still existed.
    pub would_delete_bytes: Option<u64>,
    /// Vacuum dry run: the paths, at most [`MAX_REPORTED_PATHS`].
    pub would_delete_paths: Vec<String>,
    /// True when `would_delete_paths` was cut at [`MAX_REPORTED_PATHS`].
    pub would_delete_paths_truncated: bool,
    /// Commit conflicts met and retried inside this operation.
    pub conflicts: u32,
    /// Wall-clock duration of the operation.
    pub duration_secs: f64,
    /// Why nothing needed doing, when nothing was done.
    pub skipped: Option<String>,
    /// Repair: the plan for each stale write found, and what was committed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repairs: Vec<RepairPlan>,
    /// Checkpoint: the version of the checkpoint now newest.
    pub checkpoint_version: Option<i64>,
    /// Checkpoint: expired log files deleted.
    pub log_files_deleted: Option<u64>,
    /// Vacuum: who keeps files beyond the window (pins, shallow clones and other referrers),
    /// each with how many files under this table's root it needs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<KeptFiles>,
    /// Vacuum: files past the window that were not deleted because `kept` needs them.
    pub kept_listed_files: u64,
    /// Things the operation could not check after committing, each saying what did commit
    /// (for example a duplicate-rewrite check that could not read the version before a commit
    /// because another process cleaned up the log).
    pub warnings: Vec<String>,
    /// When the job ran as tasks: each task, who ran it and what it committed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<TaskSummary>,
}

impl OpReport {
    /// An empty report for `operation` on `table`, starting at `version_before`.
    pub(crate) fn new(
        operation: Operation,
        table: &str,
        version_before: i64,
        dry_run: bool,
    ) -> Self {
        OpReport {
            operation,
            table: table.to_owned(),
            dry_run,
            version_before,
            version_after: None,
            commits: Vec::new(),
            files_removed: 0,
            files_added: 0,
            bytes_removed: 0,
            bytes_added: 0,
            partitions_touched: Vec::new(),
            retention_used_secs: None,
            retention_drift: None,
            would_delete_files: None,
            would_delete_bytes: None,
            would_delete_paths: Vec::new(),
            would_delete_paths_truncated: false,
            conflicts: 0,
            duration_secs: 0.0,
            skipped: None,
            repairs: Vec::new(),
            checkpoint_version: None,
            log_files_deleted: None,
            kept: Vec::new(),
            kept_listed_files: 0,
            warnings: Vec::new(),
            tasks: Vec::new(),
        }
    }

    /// The report of a job that ran as tasks: what they committed together, read back from
    /// their results (`parts`), with `tasks` saying which worker ran which.
    pub fn of_tasks(
        operation: Operation,
        table: &str,
        version_before: i64,
        parts: &[TaskCommits],
        tasks: Vec<TaskSummary>,
        duration: Duration,
    ) -> Self {
        let mut report = OpReport::new(operation, table, version_before, false);
        let mut touched = std::collections::BTreeSet::new();
        for part in parts {
            report.commits.extend(&part.commits);
            report.files_removed += part.files_removed;
            report.files_added += part.files_added;
            report.bytes_removed += part.bytes_removed;
            report.bytes_added += part.bytes_added;
            report.conflicts += part.conflicts;
            report.warnings.extend(part.warnings.iter().cloned());
            touched.extend(part.partitions_touched.iter().cloned());
        }
        report.commits.sort_unstable();
        report.version_after = report.commits.last().copied();
        report.partitions_touched = touched.into_iter().collect();
        report.tasks = tasks;
        report.duration_secs = round_millis(duration);
        report
    }

    /// Stamps the duration measured from `started`.
    pub(crate) fn finish(mut self, started: Instant) -> Self {
        self.duration_secs = round_millis(started.elapsed());
        self
    }

    /// Records the dry-run deletion list, capped at [`MAX_REPORTED_PATHS`].
    pub(crate) fn set_would_delete(&mut self, paths: &[String], bytes: u64) {
        self.would_delete_files = Some(paths.len() as u64);
        self.would_delete_bytes = Some(bytes);
        self.would_delete_paths = paths.iter().take(MAX_REPORTED_PATHS).cloned().collect();
        self.would_delete_paths_truncated = paths.len() > MAX_REPORTED_PATHS;
    }
}

/// What one task of a job committed, as its result in the job store records it (the fields of
/// the task's own [`OpReport`] a job's report adds up).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskCommits {
    pub commits: Vec<i64>,
    pub files_removed: u64,
    pub files_added: u64,
    pub bytes_removed: u64,
    pub bytes_added: u64,
    pub partitions_touched: Vec<String>,
    pub conflicts: u32,
    pub warnings: Vec<String>,
}

impl From<&OpReport> for TaskCommits {
    fn from(report: &OpReport) -> Self {
        TaskCommits {
            commits: report.commits.clone(),
            files_removed: report.files_removed,
            files_added: report.files_added,
            bytes_removed: report.bytes_removed,
            bytes_added: report.bytes_added,
            partitions_touched: report.partitions_touched.clone(),
            conflicts: report.conflicts,
            warnings: report.warnings.clone(),
        }
    }
}

/// One task of a job, in the job's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskSummary {
    pub task: i32,
    pub state: String,
    /// The worker of its last attempt (`replica/n`).
    pub worker_id: Option<String>,
    pub attempt: i32,
    pub partition: String,
    pub files: u64,
    pub bytes: u64,
    /// The versions it committed.
    pub commits: Vec<i64>,
    pub error: Option<String>,
}

fn round_millis(d: Duration) -> f64 {
    (d.as_millis() as f64) / 1000.0
}

/// Why files are kept, for the report and the retained-bytes figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeptFiles {
    /// `pin`, `clone` or `iceberg`.
    pub reason: &'static str,
    /// The pin (`version 1482 (model run 88)`) or the referrer's name.
    pub by: String,
    /// The pinned version, or the referrer's versions' first and latest; `(0, 0)` for the
    /// Iceberg metadata, which names no Delta version.
    pub versions: (u64, u64),
    /// Files under this table's root it needs (all of them, not only those VACUUM listed).
    pub files: u64,
}

/// One file a repair removes or adds back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedFile {
    pub path: String,
    pub size: u64,
    /// Rows still visible in it (statistics minus deletion vector), when recorded.
    pub rows: Option<u64>,
}

/// The exact repair of one stale write, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepairPlan {
    /// The stale commit repaired.
    pub stale_write: i64,
    /// The rewrite commits (anyone's) whose bins are undone, chains included: the stale
    /// commit itself when it is a rewrite.
    pub rewrites: Vec<i64>,
    /// Files removed: the active files holding the undone bins' rows.
    pub remove: Vec<PlannedFile>,
    /// Files added back unchanged: the undone bins' inputs that no stale commit removed.
    pub re_add: Vec<PlannedFile>,
    pub rows_removed: Option<u64>,
    pub rows_re_added: Option<u64>,
    /// Rows that disappear: those the stale writer meant to remove.
    pub stale_rows: Option<u64>,
    /// Why this stale write cannot be repaired exactly (nothing is written for it).
    pub refused: Option<String>,
    /// The repair commit, once written.
    pub committed_version: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_list_is_capped_and_flagged() {
        let mut report = OpReport::new(Operation::Vacuum, "/t", 3, true);
        let paths: Vec<String> = (0..MAX_REPORTED_PATHS + 5)
            .map(|i| format!("part-{i}.parquet"))
            .collect();
        report.set_would_delete(&paths, 42);
        assert_eq!(
            report.would_delete_files,
            Some((MAX_REPORTED_PATHS + 5) as u64)
        );
        assert_eq!(report.would_delete_paths.len(), MAX_REPORTED_PATHS);
        assert!(report.would_delete_paths_truncated);
        let json = serde_json::to_value(&report).expect("report serializes");
        assert_eq!(json["operation"], "vacuum");
        assert_eq!(json["would_delete_bytes"], 42);
    }
}
