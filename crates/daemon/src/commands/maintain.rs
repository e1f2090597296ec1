//! `tablekeeper maintain`: one operation on one table, now, in the foreground, through
//! the same executor the daemon's workers use; no job store involved. A rewrite the daemon
//! would split into tasks runs as the same tasks here, as many at once as there are cores, its
//! progress on stderr (`progress.rs`).
//!
//! Like a manual trigger through the API it ignores the need thresholds (an operator who asks
//! for a checkpoint gets one) unless `--if-needed`, and never the safety checks. Without a job
//! store there is nowhere to copy the history of commits a log cleanup would delete, so the
//! checkpoint deletes no log file unless `--cleanup-log` gives that history up explicitly.
//! VACUUM and log cleanup keep the inventory's pins and clones, what every other inventoried
//! table references, and the API's pins when `TABLEKEEPER_DATABASE_URL` is set.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use chrono::Utc;
use futures::StreamExt as _;
use tablekeeper_delta::cost::Meter;
use tablekeeper_delta::{LogCleanup, OpReport, TaskCommits, TaskRun, TaskSummary, VacuumMode};
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_store::TaskState;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::commands::progress::TaskProgress;
use crate::delta_runtime;
use crate::fleet::{Fleet, FleetOptions};
use crate::jobs::executor::{self, ExecError, RunContext};
use crate::jobs::split::{self, Split};
use crate::policy::planner::{self, Decision, Need, Probed};

/// What `maintain` was asked to do.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub inventory: &'a Path,
    pub table: &'a str,
    pub operation: &'a str,
    pub dry_run: bool,
    /// Apply the need thresholds as a schedule tick does.
    pub if_needed: bool,
    /// Let the checkpoint delete expired log files whose history is recorded nowhere else.
    pub cleanup_log: bool,
}

pub async fn run(request: Request<'_>) -> ExitCode {
    if let Err(code) = super::apply_storage_options_from_env() {
        return code;
    }
    if let Err(code) = super::apply_rewrite_budget_from_env() {
        return code;
    }
    let inv = match super::load_inventory_or_report(request.inventory) {
        Ok(inv) => inv,
        Err(code) => return code,
    };
    let spec = match super::find_table(&inv, request.inventory, request.table) {
        Ok(spec) => spec,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    let table = request.table;
    let Ok(op) = request.operation.parse::<Operation>() else {
        eprintln!(
            "error: unknown operation `{}`: use compact, zorder, vacuum, checkpoint or repair",
            request.operation
        );
        return ExitCode::FAILURE;
    };
    let cancel = super::cancel_on_ctrl_c();
    // Same inputs the daemon would use: the Z-order scope and the need check come from the
    // table's log.
    let options = tablekeeper_delta::ProbeOptions {
        stale_watch: tablekeeper_delta::stale_watch_for(spec.vacuum_window()),
        ..tablekeeper_delta::ProbeOptions::for_target(spec.compaction.target_file_size)
    };
    let probe = match tablekeeper_delta::Prober::new()
        .probe(&spec.path, &options)
        .await
    {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: table `{table}`: cannot read the table: {e}");
            return ExitCode::FAILURE;
        }
    };
    let need = if request.if_needed {
        Need::Check { last_success: None }
    } else {
        Need::Forced
    };
    match planner::admit(spec, op, Probed::Read(&probe), need, Utc::now()) {
        Decision::Run(_) => {}
        Decision::Skip(reason) | Decision::Deferred(reason) => {
            let out = serde_json::json!({
                "table": table, "operation": op, "ok": true, "skipped": reason,
            });
            println!("{out}");
            return ExitCode::SUCCESS;
        }
        Decision::Refuse(reason) => {
            eprintln!("error: table `{table}`: {op} refused: {reason}");
            return ExitCode::FAILURE;
        }
    }
    let keep = if matches!(op, Operation::Vacuum | Operation::Checkpoint) {
        match keep(&inv, spec).await {
            Ok(keep) => keep,
            Err(message) => {
                eprintln!("error: table `{table}`: {message}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        tablekeeper_delta::Keep::default()
    };
    let ctx = RunContext {
        keep,
        dry_run: request.dry_run,
        // A foreground VACUUM lists the directory: an operator running it by hand
        // usually wants orphans from failed rewrites reclaimed too.
        vacuum_mode: VacuumMode::Full,
        zorder_since_version: probe.history.last_zorder_version,
        forced: !request.if_needed,
        log_cleanup: if request.cleanup_log {
            LogCleanup::Unrecorded
        } else {
            LogCleanup::Off
        },
    };
    // what the operation costs, measured as a daemon's job is (README "What maintenance
    // costs"), priced at the list prices or TABLEKEEPER_PRICES
    let meter = Meter::new();
    let started = Instant::now();
    let outcome = if op.rewrites() && !request.dry_run {
        run_as_tasks(spec, op, ctx, cancel, &meter).await
    } else {
        run_whole(spec, op, ctx, cancel, &meter).await
    };
    let prices = crate::config::Prices::from_env().unwrap_or_default();
    let cost = prices.priced(meter.cost(started.elapsed()));
    super::print_outcome(table, op, outcome, Some(cost))
}

/// The operation run whole, on a runtime whose threads count into `meter`.
async fn run_whole(
    spec: &TableSpec,
    op: Operation,
    ctx: RunContext,
    cancel: CancellationToken,
    meter: &Arc<Meter>,
) -> Result<OpReport, ExecError> {
    let spec = spec.clone();
    delta_runtime::run_metered(Arc::clone(meter), async move {
        executor::run(&spec, op, ctx, cancel).await
    })
    .await
    .map_err(ExecError::from)
    .and_then(|report| report)
}

/// A rewrite the daemon would split into tasks runs here as those tasks, as many at once as
/// the machine has cores (a task of one partition's single bin computes on one core; the
/// rewrite memory budget bounds them together as it bounds a replica's workers), with its
/// progress on stderr. Tasks whose inputs another writer changed meanwhile commit nothing and
/// are named in the report's warnings: run `maintain` again to rewrite what they left. The
/// first task that fails stops the ones not yet committed; what committed stays, named.
async fn run_as_tasks(
    spec: &TableSpec,
    op: Operation,
    ctx: RunContext,
    cancel: CancellationToken,
    meter: &Arc<Meter>,
) -> Result<OpReport, ExecError> {
    let started = Instant::now();
    let plan = match split::plan(spec, op, &ctx, &cancel, meter).await? {
        Split::Whole => return run_whole(spec, op, ctx, cancel, meter).await,
        Split::Tasks(plan) => plan,
    };
    let mut progress =
        TaskProgress::start(plan.tasks.len(), plan.tasks.iter().map(|t| t.bytes).sum());
    let at_once = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(plan.tasks.len());
    let stop = cancel.child_token();
    let mut running = futures::stream::iter(plan.tasks.iter().enumerate())
        .map(|(n, input)| {
            let running = delta_runtime::run_metered(Arc::clone(meter), {
                let (spec, ctx, input, stop) =
                    (spec.clone(), ctx.clone(), input.clone(), stop.clone());
                async move { executor::run_task(&spec, op, &ctx, &input, stop).await }
                    .in_current_span()
            });
            async move {
                (
                    n,
                    input,
                    running.await.map_err(ExecError::from).and_then(|r| r),
                )
            }
        })
        .buffered(at_once);
    let mut parts = Vec::new();
    let mut summaries = Vec::new();
    let mut warnings = Vec::new();
    let mut failed = None;
    while let Some((n, input, result)) = running.next().await {
        let task = i32::try_from(n).unwrap_or(i32::MAX);
        let (state, commits, error) = match result {
            Ok(TaskRun::Committed(report)) => {
                let part = TaskCommits::from(report.as_ref());
                let commits = part.commits.clone();
                parts.push(part);
                (TaskState::Succeeded, commits, None)
            }
            Ok(TaskRun::Replan(reason)) => {
                warnings.push(format!(
                    "task {task} (partition `{}`): {reason}; run maintain again",
                    input.partition
                ));
                (TaskState::Replanned, Vec::new(), Some(reason))
            }
            // the tasks stopped after the first failure end cancelled: not failures of theirs
            Err(_) if failed.is_some() => (TaskState::Cancelled, Vec::new(), None),
            Err(e) => {
                stop.cancel();
                failed = Some((task, input.partition.clone(), e.to_string()));
                (TaskState::Failed, Vec::new(), Some(e.to_string()))
            }
        };
        progress.task_done(input.bytes, state.as_str());
        summaries.push(TaskSummary {
            task,
            state: state.to_string(),
            worker_id: None,
            attempt: 1,
            partition: input.partition.clone(),
            files: input.files.len() as u64,
            bytes: input.bytes,
            commits,
            error,
        });
    }
    if let Some((task, partition, error)) = failed {
        progress.finish();
        let done: Vec<i64> = parts.iter().flat_map(|p| p.commits.clone()).collect();
        return Err(ExecError::TaskFailed(format!(
            "task {task} of {} (partition `{partition}`) failed: {error}; the tasks still \
             running were stopped; the versions the others committed, {done:?}, stay",
            plan.tasks.len(),
        )));
    }
    progress.finish();
    Ok(split::job_report(
        spec,
        op,
        plan.version,
        &parts,
        summaries,
        warnings,
        started.elapsed(),
    ))
}

/// What VACUUM and log cleanup keep: the inventory's pins and clones, the API's pins, and the
/// other inventoried tables that can reference this one's files.
///
/// With `TABLEKEEPER_DATABASE_URL` naming the daemon's job store, the probes the replicas
/// stored tell which tables reference other roots, exactly as they tell the daemon
/// (`Fleet::keep_for`): only those and the tables never probed are read, and an unreadable
/// table not known to reference others never blocks the VACUUM. Without a job store nothing
/// tells, so every other inventoried table is read and counts as a referrer (strict, as an
/// operator's one-off run should be): one whose log exists but cannot be read refuses the
/// VACUUM, named; a path holding no Delta log at all references nothing and is skipped.
async fn keep(
    inventory: &tablekeeper_inventory::Inventory,
    spec: &tablekeeper_inventory::TableSpec,
) -> Result<tablekeeper_delta::Keep, String> {
    let Some(url) = std::env::var("TABLEKEEPER_DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
    else {
        eprintln!(
            "note: TABLEKEEPER_DATABASE_URL is not set: pins added through the API are not \
             read, only the inventory's `retention.pins`, and every inventoried table is read \
             as a possible shallow clone"
        );
        return Ok(crate::policy::keep::keep_for(inventory, spec, &[], |_| {
            crate::policy::keep::References::External
        }));
    };
    let store = tablekeeper_store::connect(&url, tablekeeper_store::StoreOptions::default())
        .await
        .map_err(|e| format!("cannot reach the job store for the table's pins: {e}"))?;
    let pins = store
        .pins(Some(&spec.name))
        .await
        .map_err(|e| format!("cannot read the table's pins from the job store: {e}"))?;
    let fleet = Fleet::new(inventory.clone(), FleetOptions::probe_once());
    let (mut after, mut after_table) = (None, None::<String>);
    loop {
        let rows = store
            .probes_since(after, after_table.as_deref(), None, STORED_PROBES_PAGE)
            .await
            .map_err(|e| format!("cannot read the probes the replicas stored: {e}"))?;
        fleet.apply_shared(&rows, Utc::now());
        match rows.last() {
            Some(last) if rows.len() == STORED_PROBES_PAGE as usize => {
                (after, after_table) = (Some(last.updated_at), Some(last.table_name.clone()));
            }
            _ => break,
        }
    }
    store.close().await;
    Ok(fleet.keep_for(spec, &pins))
}

/// Stored probes read per query (as the replicas read them).
const STORED_PROBES_PAGE: u32 = 500;
