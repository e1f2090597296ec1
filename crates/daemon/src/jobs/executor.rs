//! Runs one maintenance operation on one table: maps the inventory entry to the delta
//! crate's options and calls the operation. The one code path shared by the daemon's
//! workers and `tablekeeper maintain`, so a foreground run does exactly what the daemon
//! would do.
//!
//! A rewrite may also be planned as tasks ([`plan_tasks`]) and run one task at a time
//! ([`run_task`]); which replica runs which task is `tasks.rs`'s.
//!
//! It never decides *whether* to run (that is the planner) and never touches the job
//! store (that is the worker and `tasks.rs`); it does check the safety gates again, because
//! a manual trigger or a stale plan must not bypass them.

use chrono::{DateTime, Utc};
use tablekeeper_delta::{
    stale_watch_for, CheckpointOptions, CompactOptions, DeltaError, Keep, LogCleanup, OpReport,
    Optimize, PurgeOptions, RepairOptions, TaskInput, TaskPlan, TaskRun, VacuumMode, VacuumOptions,
    ZorderOptions,
};
use tablekeeper_inventory::{Operation, TableSpec};
use tokio_util::sync::CancellationToken;

use crate::policy::overwrite_window;
use crate::policy::planner::{self, Decision, Need, Probed};

/// The smallest bin worth rewriting: a forced compaction merges any two small files of a
/// partition, whatever `min_small_files` says.
const FORCED_MIN_SMALL_FILES: u64 = 2;

/// Commit conflicts retried inside one attempt before the attempt fails as a conflict
/// (the job's own retries with backoff come on top).
const CONFLICT_RETRIES: u32 = 3;

/// Why an operation did not produce a report.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExecError {
    #[error("refused: {0}")]
    Refused(String),
    /// A task of the job ran out of attempts (what the other tasks committed stays; the
    /// message lists it). Not retried: the job's tasks stay as they ended, the next job plans
    /// afresh.
    #[error("{0}")]
    TaskFailed(String),
    /// The job store could not be read or written while running the job's tasks (retried).
    #[error("job store: {0}")]
    Store(String),
    /// The replica is draining and no task of the split job runs: the job goes back to the
    /// queue for another replica (not a failure).
    #[error("{0}")]
    HandedOver(String),
    /// May not run before `until` (an overwrite window is open); not a failure.
    #[error("deferred until {until}: {reason}")]
    Deferred {
        until: DateTime<Utc>,
        reason: String,
    },
    #[error(transparent)]
    Delta(#[from] DeltaError),
    #[error(transparent)]
    Crashed(#[from] crate::delta_runtime::Crashed),
}

impl ExecError {
    /// Whether the failure is a commit conflict (retried, counted separately).
    pub fn is_conflict(&self) -> bool {
        matches!(self, ExecError::Delta(e) if e.class() == tablekeeper_delta::ErrorClass::Conflict)
    }
    /// Whether retrying can help (conflicts and transient I/O); permanent problems fail
    /// the job at once instead of burning attempts.
    pub fn is_retryable(&self) -> bool {
        match self {
            ExecError::Refused(_) | ExecError::TaskFailed(_) => false,
            ExecError::Deferred { .. } | ExecError::Store(_) | ExecError::HandedOver(_) => true,
            // a panic is retried like any failure (the operation's own panics come back as
            // `DeltaError::Panicked`, transient, naming the table and operation)
            ExecError::Crashed(_) => true,
            ExecError::Delta(e) => e.class() != tablekeeper_delta::ErrorClass::Permanent,
        }
    }
}

/// What a job's run produced: the operation's report, what the tasks it ran as cost
/// (nothing for a job run whole: its own cost is its meter's), and the table's figures
/// before it ran (for its outcome).
#[derive(Debug)]
pub(crate) struct Ran {
    pub report: OpReport,
    pub tasks: tablekeeper_vocab::Cost,
    pub before: Option<tablekeeper_vocab::TableFigures>,
}

/// Extra inputs that come from the job history rather than the inventory.
#[derive(Debug, Clone)]
pub(crate) struct RunContext {
    /// Full: a directory-listing VACUUM (reclaims orphans of failed rewrites).
    pub vacuum_mode: VacuumMode,
    /// Table version of the last Z-order, to scope the next one to new partitions.
    pub zorder_since_version: Option<i64>,
    pub dry_run: bool,
    /// A person asked for this run (API trigger, `maintain`): need thresholds do not apply
    /// (a checkpoint is written whatever the commit count), safety checks still do.
    pub forced: bool,
    /// What the checkpoint may delete from the log.
    pub log_cleanup: LogCleanup,
    /// What VACUUM and log cleanup keep for others: pins, clones, referrers ([`crate::policy::keep`]).
    pub keep: Keep,
}

impl Default for RunContext {
    fn default() -> Self {
        RunContext {
            vacuum_mode: VacuumMode::Lite,
            zorder_since_version: None,
            dry_run: false,
            forced: false,
            log_cleanup: LogCleanup::Off,
            keep: Keep::default(),
        }
    }
}

/// Runs `op` on the table described by `spec`.
///
/// The delta crate hands out each operation's future boxed as `Send`, which pins its
/// lifetimes and keeps the worker's spawned task provably `Send`.
pub async fn run(
    spec: &TableSpec,
    op: Operation,
    ctx: RunContext,
    cancel: CancellationToken,
) -> Result<OpReport, ExecError> {
    gates(spec, op)?;
    let run = run_operation(spec, op, ctx, cancel.clone());
    outside_overwrites(spec, op, cancel, run).await
}

/// Plans a rewrite (compaction, Z-order, purge) of the table as tasks of at most
/// `maintenance.max_task_bytes` each, at the table's current version; whether to run it as
/// tasks is the caller's ([`TaskPlan::splits`]).
pub(crate) async fn plan_tasks(
    spec: &TableSpec,
    op: Operation,
    ctx: &RunContext,
    cancel: CancellationToken,
) -> Result<TaskPlan, ExecError> {
    gates(spec, op)?;
    let options = RewriteOptions::of(spec, op, ctx)
        .ok_or_else(|| ExecError::Refused(format!("{op} is not a rewrite: it has no tasks")))?;
    Ok(
        tablekeeper_delta::plan_tasks(&spec.path, options.kind(), spec.max_task_bytes, &cancel)
            .await?,
    )
}

/// Runs one task of a rewrite job: the task's files only, under the same gates as a job.
pub(crate) async fn run_task(
    spec: &TableSpec,
    op: Operation,
    ctx: &RunContext,
    input: &TaskInput,
    cancel: CancellationToken,
) -> Result<TaskRun, ExecError> {
    gates(spec, op)?;
    let options = RewriteOptions::of(spec, op, ctx)
        .ok_or_else(|| ExecError::Refused(format!("{op} is not a rewrite: it has no tasks")))?;
    let run = async {
        Ok(tablekeeper_delta::run_task(&spec.path, options.kind(), input, &cancel).await?)
    };
    outside_overwrites(spec, op, cancel.clone(), run).await
}

/// The last word before anything changes: a stale plan or a queued request must not slip past
/// a gate (the operation then reads the table and checks its protocol itself).
fn gates(spec: &TableSpec, op: Operation) -> Result<(), ExecError> {
    if let Decision::Refuse(reason) =
        planner::admit(spec, op, Probed::NotYet, Need::Queued, Utc::now())
    {
        return Err(ExecError::Refused(reason));
    }
    if let Some(until) = planner::not_before(spec, op, Utc::now()) {
        return Err(ExecError::Deferred {
            until,
            reason: "the table's overwrite window is open (`writers.overwrites`)".into(),
        });
    }
    Ok(())
}

/// Runs `work`, stopping a rewrite before it commits inside the table's next overwrite window
/// (the stop is deferred to the window's end, not a failure).
async fn outside_overwrites<T>(
    spec: &TableSpec,
    op: Operation,
    cancel: CancellationToken,
    work: impl std::future::Future<Output = Result<T, ExecError>>,
) -> Result<T, ExecError> {
    let now = Utc::now();
    let window = op
        .rewrites()
        .then(|| overwrite_window::next_opening(spec, now))
        .flatten();
    let stopper = window.map(|opens| {
        let cancel = cancel.clone();
        let wait = (opens - now).to_std().unwrap_or_default();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            cancel.cancel();
        })
    });
    let result = work.await;
    if let Some(stopper) = &stopper {
        stopper.abort();
    }
    match (result, window) {
        (Err(ExecError::Delta(DeltaError::Cancelled { .. })), Some(opens))
            if Utc::now() >= opens =>
        {
            let until =
                overwrite_window::open_at(spec, Utc::now()).map_or(opens, |(_, closes)| closes);
            Err(ExecError::Deferred {
                until,
                reason: "stopped before committing: the table's overwrite window opened \
                         (`writers.overwrites`); the bins already committed stay"
                    .into(),
            })
        }
        (result, _) => result,
    }
}

/// The delta crate's options for a rewrite of a table, from its inventory entry: one mapping
/// for a whole job, its tasks and `maintain`.
enum RewriteOptions {
    Compact(CompactOptions),
    Zorder(ZorderOptions),
    Purge(PurgeOptions),
}

impl RewriteOptions {
    /// `None` when `op` is no rewrite.
    fn of(spec: &TableSpec, op: Operation, ctx: &RunContext) -> Option<Self> {
        Some(match op {
            Operation::Compact => RewriteOptions::Compact(CompactOptions {
                target_file_size: spec.compaction.target_file_size,
                // asked for by a person: every partition with something to merge
                min_small_files: if ctx.forced {
                    FORCED_MIN_SMALL_FILES
                } else {
                    u64::from(spec.compaction.min_small_files)
                },
                compression: spec.layout.compression,
                dry_run: ctx.dry_run,
                small_file_factor: tablekeeper_delta::DEFAULT_SMALL_FILE_FACTOR,
                max_conflict_retries: CONFLICT_RETRIES,
            }),
            Operation::Zorder => RewriteOptions::Zorder(ZorderOptions {
                columns: spec.layout.zorder.clone(),
                target_file_size: spec.compaction.target_file_size,
                // asked for by a person: every partition, not only those with new data
                since_version: ctx.zorder_since_version.filter(|_| !ctx.forced),
                compression: spec.layout.compression,
                dry_run: ctx.dry_run,
                max_conflict_retries: CONFLICT_RETRIES,
            }),
            Operation::Purge => RewriteOptions::Purge(PurgeOptions {
                target_file_size: spec.compaction.target_file_size,
                compression: spec.layout.compression,
                dry_run: ctx.dry_run,
                max_conflict_retries: CONFLICT_RETRIES,
            }),
            Operation::Vacuum | Operation::Checkpoint | Operation::Repair => return None,
        })
    }

    fn kind(&self) -> Optimize<'_> {
        match self {
            RewriteOptions::Compact(o) => Optimize::Compact(o),
            RewriteOptions::Zorder(o) => Optimize::ZOrder(o),
            RewriteOptions::Purge(o) => Optimize::Purge(o),
        }
    }
}

async fn run_operation(
    spec: &TableSpec,
    op: Operation,
    ctx: RunContext,
    cancel: CancellationToken,
) -> Result<OpReport, ExecError> {
    let uri = spec.path.as_str();
    let report = match op {
        Operation::Compact | Operation::Zorder | Operation::Purge => {
            let Some(options) = RewriteOptions::of(spec, op, &ctx) else {
                return Err(ExecError::Refused(format!("{op} is not a rewrite")));
            };
            tablekeeper_delta::optimize(uri, options.kind(), &cancel).await?
        }
        Operation::Vacuum => {
            let options = VacuumOptions {
                // the longest reader's queries must find their files too
                inventory_retention: spec.vacuum_window(),
                allow_short_retention: spec.retention.allow_short_retention,
                mode: ctx.vacuum_mode,
                dry_run: ctx.dry_run,
                stale_watch: stale_watch_for(spec.vacuum_window()),
                keep: ctx.keep,
            };
            tablekeeper_delta::vacuum(uri, &options, &cancel).await?
        }
        Operation::Checkpoint if ctx.dry_run => {
            return Err(ExecError::Refused(
                "checkpoint has no dry run (it never changes data): run `tablekeeper plan` to see whether one is due"
                    .into(),
            ))
        }
        Operation::Checkpoint => {
            let options = CheckpointOptions {
                max_commits_since_checkpoint: spec.checkpoint.max_commits_since_checkpoint,
                log_retention: spec.retention.log_retention,
                force: ctx.forced,
                log_cleanup: ctx.log_cleanup,
                pins: ctx.keep.pins,
            };
            tablekeeper_delta::checkpoint(uri, &options, &cancel).await?
        }
        Operation::Repair => {
            let options = RepairOptions {
                dry_run: ctx.dry_run,
                stale_watch: stale_watch_for(spec.vacuum_window()),
            };
            tablekeeper_delta::repair(uri, &options, &cancel).await?
        }
    };
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_fails_the_job_naming_table_and_operation_and_is_retried() {
        let panicked = ExecError::Delta(DeltaError::Panicked {
            table: "s3://lake/t".into(),
            operation: "zorder".into(),
            message: "TokioMultiThreadExecutor has crashed".into(),
        });
        assert!(panicked.is_retryable());
        assert!(!panicked.is_conflict());
        assert!(
            panicked
                .to_string()
                .starts_with("zorder on `s3://lake/t` panicked: TokioMultiThreadExecutor"),
            "{panicked}"
        );
        let crashed = ExecError::Crashed(crate::delta_runtime::Crashed::Panicked("boom".into()));
        assert!(
            crashed.is_retryable(),
            "a panic in the daemon's part is retried too"
        );
    }
}
