//! One attempt of a claimed job: the inputs it needs beyond the inventory (Z-order scope,
//! full or lite VACUUM, which commits the checkpoint may clean up, whether a person asked)
//! and how its end is written to the job table (complete, defer, fail or release, each
//! fenced by the lease, each result logged) as a typed [`AttemptOutcome`].
//!
//! It never runs the operation (that is the executor, under `lease_watch`) and never decides
//! whether a job should exist (that is the planner).

use std::time::Duration;

use chrono::Utc;
use serde::Deserialize;
use tablekeeper_delta::{DeltaError, LogCleanup, OpReport, VacuumMode};
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_store::{
    AttemptOutcome, ClaimedJob, FailOutcome, FailureKind, JobFilter, JobState, RetryPolicy,
    StoreError, Trigger,
};
use tracing::{error, info, warn};

use crate::executor::{ExecError, RunContext};
use crate::lease_watch::{LeaseLoss, Watched};
use crate::runtime::Runtime;

/// How many recent successful jobs of a table the VACUUM policy reads: enough to cover any
/// sensible `vacuum.full_every`.
const VACUUM_HISTORY: i64 = 200;

/// What a VACUUM job records beside its report, read back by the next VACUUM to tell when
/// the last full one ran.
#[derive(Debug, Deserialize)]
struct VacuumRecord {
    mode: Option<VacuumMode>,
}

/// The inputs of an attempt of `op` on the table; an error when what VACUUM or log cleanup
/// must keep cannot be known (the pins in the job store cannot be read): the attempt then
/// fails and is retried, it never runs without them.
pub(crate) async fn inputs(
    rt: &Runtime,
    spec: &TableSpec,
    op: Operation,
    trigger: Trigger,
) -> Result<RunContext, String> {
    // Z-order scope: partitions that received files since the last Z-order found in the log
    // (a Z-order by another engine counts too).
    let mut ctx = RunContext {
        zorder_since_version: rt
            .fleet
            .with_state(&spec.name, |s| {
                s.probe.as_ref().and_then(|p| p.history.last_zorder_version)
            })
            .flatten(),
        forced: trigger == Trigger::Manual,
        ..RunContext::default()
    };
    match op {
        Operation::Checkpoint => ctx.log_cleanup = log_cleanup(rt, spec).await,
        Operation::Vacuum => ctx.vacuum_mode = vacuum_mode(rt, spec).await,
        Operation::Compact | Operation::Zorder | Operation::Purge | Operation::Repair => {}
    }
    if matches!(op, Operation::Checkpoint | Operation::Vacuum) {
        ctx.keep = keep(rt, spec).await?;
    }
    Ok(ctx)
}

/// The pins (inventory and API) and the referrers of the table, from the fleet's probes.
async fn keep(rt: &Runtime, spec: &TableSpec) -> Result<tablekeeper_delta::Keep, String> {
    let pins = rt.store.pins(Some(&spec.name)).await.map_err(|e| {
        format!(
            "cannot read the table's pins from the job store, so nothing may be deleted now: {e}"
        )
    })?;
    Ok(rt.fleet.keep_for(spec, &pins))
}

/// Only commits already in `table_commits` may leave the log; if the store cannot say which
/// those are, nothing is deleted this time.
async fn log_cleanup(rt: &Runtime, spec: &TableSpec) -> LogCleanup {
    match rt.store.recorded_range(&spec.name).await {
        Ok(range) => LogCleanup::Recorded(
            range.and_then(|(from, to)| Some((u64::try_from(from).ok()?, u64::try_from(to).ok()?))),
        ),
        Err(e) => {
            warn!(error = %e, "cannot read which commits are recorded; the checkpoint deletes no log file this time");
            LogCleanup::Off
        }
    }
}

/// Full when none of the last `full_every - 1` VACUUMs was: every Nth run lists the
/// directory (and reclaims orphans of failed rewrites), the others read the log only.
async fn vacuum_mode(rt: &Runtime, spec: &TableSpec) -> VacuumMode {
    if spec.vacuum.full_every <= 1 {
        return VacuumMode::Full;
    }
    let filter = JobFilter {
        table: Some(spec.name.clone()),
        state: Some(JobState::Succeeded),
        limit: VACUUM_HISTORY,
    };
    let recent = match rt.store.list_jobs(&filter).await {
        Ok(jobs) => jobs,
        Err(e) => {
            warn!(error = %e, "cannot read earlier VACUUMs; this one lists the directory");
            return VacuumMode::Full;
        }
    };
    let window = spec.vacuum.full_every.saturating_sub(1) as usize;
    let recent_full = recent
        .iter()
        .filter(|j| j.operation == Operation::Vacuum)
        .take(window)
        .filter_map(|j| j.result.clone())
        .filter_map(|r| serde_json::from_value::<VacuumRecord>(r).ok())
        .any(|r| r.mode == Some(VacuumMode::Full));
    if recent_full {
        VacuumMode::Lite
    } else {
        VacuumMode::Full
    }
}

/// Writes how the attempt ended to the job table, fenced by the lease, and says what the
/// attempt counts as.
pub(crate) async fn record(
    rt: &Runtime,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    op: Operation,
    ctx: &RunContext,
    end: Watched<Result<OpReport, ExecError>>,
    elapsed: Duration,
) -> AttemptOutcome {
    match end {
        Watched::Finished(Ok(report)) => {
            succeeded(rt, claimed, spec, op, ctx, report, elapsed).await
        }
        Watched::Finished(Err(ExecError::Deferred { until, reason })) => {
            let delay = (until - Utc::now()).to_std().unwrap_or_default();
            let message = format!("deferred until {until}: {reason}");
            match rt.store.defer(&claimed.lease, &message, delay).await {
                Ok(true) => info!(until = %until, reason = %reason, "job deferred"),
                Ok(false) => lease_gone("defer"),
                Err(e) => store_failed("defer", &e),
            }
            AttemptOutcome::Cancelled
        }
        Watched::Finished(Err(e)) => failed(rt, claimed, spec, op, e).await,
        Watched::TimedOut(limit) => {
            let message = format!(
                "timed out after {}: raise `maintenance.timeout` for this table or check why the operation is slow",
                humantime::format_duration(limit)
            );
            fail(rt, claimed, FailureKind::Failed, &message).await;
            AttemptOutcome::Failed
        }
        // Nothing is written: the lease is not ours any more. The reaper records `lost_lease`
        // in job_attempts when it requeues the job.
        Watched::LeaseLost(
            LeaseLoss::ClaimedTooLate | LeaseLoss::NotConfirmed | LeaseLoss::Gone,
        ) => AttemptOutcome::LostLease,
        Watched::Shutdown => {
            let reason = "replica shutting down: released before shutdown_grace ran out";
            match rt.store.release(&claimed.lease, reason).await {
                Ok(true) => info!("job released for another replica (shutdown grace ran out)"),
                Ok(false) => lease_gone("release"),
                Err(e) => store_failed("release", &e),
            }
            AttemptOutcome::Cancelled
        }
    }
}

async fn succeeded(
    rt: &Runtime,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    op: Operation,
    ctx: &RunContext,
    report: OpReport,
    elapsed: Duration,
) -> AttemptOutcome {
    if report.conflicts > 0 {
        rt.metrics.count_conflicts(&spec.name, op, report.conflicts);
    }
    let mut result = serde_json::to_value(&report).unwrap_or_default();
    if op == Operation::Vacuum {
        // read back by the next VACUUM (see `vacuum_mode`)
        result["mode"] = serde_json::json!(ctx.vacuum_mode);
    }
    match rt.store.complete(&claimed.lease, result).await {
        Ok(true) => {}
        Ok(false) => {
            error!("job finished but its lease was already lost: the result was not recorded (another replica owns the job now)");
            return AttemptOutcome::LostLease;
        }
        Err(e) => {
            error!(error = %e, "job finished but the result could not be recorded; the reaper will retry it");
            return AttemptOutcome::LostLease;
        }
    }
    if !report.dry_run {
        match op {
            Operation::Compact | Operation::Zorder | Operation::Purge => rt
                .metrics
                .count_bytes_rewritten(&spec.name, report.bytes_added),
            Operation::Vacuum => rt
                .metrics
                .count_bytes_reclaimed(&spec.name, report.bytes_removed),
            Operation::Checkpoint | Operation::Repair => {}
        }
    }
    let now = Utc::now();
    rt.fleet.update_state(&spec.name, |s| {
        s.store_success.insert(op, now);
    });
    info!(elapsed = ?elapsed, files_removed = report.files_removed, files_added = report.files_added, skipped = report.skipped.as_deref().unwrap_or(""), "job succeeded");
    AttemptOutcome::Succeeded
}

async fn failed(
    rt: &Runtime,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    op: Operation,
    e: ExecError,
) -> AttemptOutcome {
    let conflict = e.is_conflict();
    if conflict {
        rt.metrics.count_conflicts(&spec.name, op, 1);
    }
    match &e {
        ExecError::Delta(DeltaError::DuplicateRewrite { .. }) => {
            error!(error = %e, "DATA SAFETY: a concurrent rewrite duplicated rows; another engine or replica compacted the same files. Investigate before the next maintenance run");
        }
        ExecError::Delta(DeltaError::RowsChanged { .. }) => {
            error!(error = %e, "DATA SAFETY: a rewrite changed the table's live rows; restore the version the error names before the next maintenance run");
        }
        _ => {}
    }
    let kind = if conflict {
        FailureKind::Conflict
    } else if e.is_retryable() {
        FailureKind::Failed
    } else {
        FailureKind::Permanent
    };
    fail(rt, claimed, kind, &e.to_string()).await;
    kind.outcome()
}

/// Records a failed attempt; the store's answer is logged whatever it is.
pub(crate) async fn fail(rt: &Runtime, claimed: &ClaimedJob, kind: FailureKind, message: &str) {
    match rt
        .store
        .fail(&claimed.lease, kind, message, &RetryPolicy::default())
        .await
    {
        Ok(FailOutcome::LeaseLost) => lease_gone("fail"),
        Ok(outcome) => warn!(error = %message, outcome = ?outcome, "job attempt failed"),
        Err(e) => {
            error!(error = %message, store_error = %e, "job failed and the failure could not be recorded; the reaper requeues it when the lease expires")
        }
    }
}

fn lease_gone(what: &str) {
    warn!(
        write = what,
        "the lease was gone by the time the attempt was recorded: another replica owns the job now"
    );
}

fn store_failed(what: &str, e: &StoreError) {
    warn!(write = what, error = %e, "could not record the attempt; the reaper requeues the job when the lease expires");
}
