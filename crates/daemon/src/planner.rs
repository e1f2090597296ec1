//! The need check: given a table's inventory entry and a fresh probe of its log, decide
//! whether an operation should run now, and say why in words a reviewer understands.
//!
//! Pure functions over data: no I/O, no clock (the caller passes `now`). The same
//! decisions drive the scheduler's ticks, `tablekeeper plan` and the dashboard, so what a
//! reviewer sees in a plan is what the daemon will do.

use chrono::{DateTime, Utc};
use serde::Serialize;
use tablekeeper_delta::Probe;
use tablekeeper_inventory::{LogStore, Operation, TableSpec};

/// What the planner concluded for one (table, operation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "decision", content = "reason")]
pub enum Decision {
    /// The operation is needed now.
    Run(String),
    /// Nothing to do now (the reason says why).
    Skip(String),
    /// The operation must not run on this table; a person has to act.
    Refuse(String),
}

impl Decision {
    pub fn reason(&self) -> &str {
        match self {
            Decision::Run(r) | Decision::Skip(r) | Decision::Refuse(r) => r,
        }
    }
    pub fn should_run(&self) -> bool {
        matches!(self, Decision::Run(_))
    }
    pub fn label(&self) -> &'static str {
        match self {
            Decision::Run(_) => "run",
            Decision::Skip(_) => "skip",
            Decision::Refuse(_) => "refuse",
        }
    }
}

/// Reasons an operation must not run on a table regardless of need. Checked for manual
/// triggers too: a person asking for a compaction does not make it safe.
pub fn safety_gate(spec: &TableSpec, op: Operation, probe: Option<&Probe>) -> Option<String> {
    // Checkpoints are refused too: their expired-log cleanup deletes log files the
    // DynamoDB log store's entries may still point at.
    if spec.writers.log_store == Some(LogStore::Dynamodb) {
        return Some(
            "the table's writers use the DynamoDB log store, which deltalake 1.x no longer speaks; \
             commits from tablekeeper (S3 conditional put) mixed with DynamoDB-locked commits can \
             lose commits. Run this maintenance from the engine that owns the lock, or migrate the \
             writers to conditional put and set `writers.log_store: conditional-put`"
                .to_string(),
        );
    }
    if let Some(probe) = probe {
        if let Err(e) = tablekeeper_delta::check_maintainable(&probe.protocol(), maintenance_op(op))
        {
            return Some(e.to_string());
        }
    }
    None
}

/// The delta crate's name for an inventory operation.
pub fn maintenance_op(op: Operation) -> tablekeeper_delta::MaintenanceOp {
    match op {
        Operation::Compact => tablekeeper_delta::MaintenanceOp::Compact,
        Operation::Zorder => tablekeeper_delta::MaintenanceOp::Zorder,
        Operation::Vacuum => tablekeeper_delta::MaintenanceOp::Vacuum,
        Operation::Checkpoint => tablekeeper_delta::MaintenanceOp::Checkpoint,
    }
}

/// Decides whether `op` should run on the table now.
///
/// `last_success` is the last success known to the caller (job table and log combined);
/// the log alone misses runs that committed nothing, such as a VACUUM that found no file
/// to delete.
pub fn decide(
    spec: &TableSpec,
    op: Operation,
    probe: Result<&Probe, &str>,
    last_success: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Decision {
    if spec.paused {
        return Decision::Skip(
            "table is paused (`maintenance.paused: true` or the pause route)".into(),
        );
    }
    if !spec.operation_enabled(op) {
        return Decision::Skip(format!("{op} is disabled for this table"));
    }
    let probe = match probe {
        Ok(p) => p,
        Err(e) => {
            return Decision::Refuse(format!(
                "table is unreadable, no maintenance runs until it reads again: {e}"
            ))
        }
    };
    if let Some(reason) = safety_gate(spec, op, Some(probe)) {
        return Decision::Refuse(reason);
    }
    need(spec, op, probe, last_success, now)
}

/// The need check alone (gates already passed).
fn need(
    spec: &TableSpec,
    op: Operation,
    probe: &Probe,
    last_success: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Decision {
    match op {
        Operation::Compact => {
            let min = u64::from(spec.compaction.min_small_files);
            let qualifying: Vec<(&String, &u64)> = probe
                .small_files_by_partition
                .iter()
                .filter(|(_, n)| **n >= min)
                .collect();
            if qualifying.is_empty() {
                let worst = probe
                    .small_files_by_partition
                    .values()
                    .max()
                    .copied()
                    .unwrap_or(0);
                Decision::Skip(format!(
                    "no partition has {min} or more small files (most in one partition: {worst})"
                ))
            } else {
                let files: u64 = qualifying.iter().map(|(_, n)| **n).sum();
                Decision::Run(format!(
                    "{} partition(s) have {min} or more small files ({files} small files to bin-pack)",
                    qualifying.len()
                ))
            }
        }
        Operation::Zorder => match (probe.last_zorder_at, probe.last_commit_at) {
            (None, _) => Decision::Run(format!(
                "table was never Z-ordered on [{}]",
                spec.layout.zorder.join(", ")
            )),
            (Some(z), Some(c)) if c > z => Decision::Run(format!(
                "new commits since the last Z-order at {}",
                z.to_rfc3339()
            )),
            (Some(z), _) => Decision::Skip(format!(
                "no commits since the last Z-order at {}",
                z.to_rfc3339()
            )),
        },
        Operation::Vacuum => match (probe.last_vacuum_at.max(last_success), probe.last_commit_at) {
            (None, _) => Decision::Run("table was never vacuumed".into()),
            (Some(v), Some(c)) if c > v => Decision::Run(format!(
                "commits since the last VACUUM at {} may have left files past retention",
                v.to_rfc3339()
            )),
            (Some(v), _) => {
                let _ = now;
                Decision::Skip(format!(
                    "no commits since the last VACUUM at {}",
                    v.to_rfc3339()
                ))
            }
        },
        Operation::Checkpoint => {
            let threshold = spec.checkpoint.max_commits_since_checkpoint;
            if probe.commits_since_checkpoint >= threshold {
                Decision::Run(format!(
                    "{} commits since the last checkpoint (threshold {threshold})",
                    probe.commits_since_checkpoint
                ))
            } else {
                Decision::Skip(format!(
                    "{} commits since the last checkpoint, under the threshold of {threshold}",
                    probe.commits_since_checkpoint
                ))
            }
        }
    }
}

/// When an operation last succeeded on a table according to the Delta log (so work done
/// by other engines counts). Compaction counts any OPTIMIZE, Z-order included, because
/// both leave the table compacted.
pub fn last_success_from_log(probe: &Probe, op: Operation) -> Option<DateTime<Utc>> {
    match op {
        Operation::Compact => probe.last_optimize_at.max(probe.last_zorder_at),
        Operation::Zorder => probe.last_zorder_at,
        Operation::Vacuum => probe.last_vacuum_at,
        Operation::Checkpoint => probe.last_checkpoint_at,
    }
}
