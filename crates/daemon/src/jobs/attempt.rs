//! How one attempt of a claimed job ends in the job table: complete, defer, fail or release,
//! each fenced by the lease, each result logged, as a typed [`AttemptOutcome`]. Its inputs
//! are `inputs.rs`'s.
//!
//! It never runs the operation (that is the executor, under `lease_watch`) and never decides
//! whether a job should exist (that is the planner).

use std::time::Duration;

use chrono::Utc;
use tablekeeper_delta::DeltaError;
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_store::{
    AttemptOutcome, ClaimedJob, FailOutcome, FailureKind, RetryPolicy, StoreError,
};
use tablekeeper_vocab::{Cost, Outcome};
use tracing::{error, info, warn};

use crate::jobs::executor::{ExecError, Ran, RunContext};
use crate::jobs::lease_watch::{LeaseLoss, Watched};
use crate::shared::Shared;

/// What an attempt spent here: what its result's `cost` starts from.
#[derive(Debug)]
pub(crate) struct Spent {
    /// This replica's own cost of the attempt (planning and the whole run; priced).
    pub own: Cost,
}

impl Spent {
    /// What the job has cost once this attempt is added: the earlier attempts' cost its
    /// result kept ([`keep_spent`]), this attempt's own, its tasks' (`tasks`), and its wall
    /// time.
    fn so_far(&self, claimed: &ClaimedJob, tasks: &Cost, elapsed: Duration) -> Cost {
        let earlier: Cost = claimed
            .job
            .result
            .as_ref()
            .and_then(|result| result.get("cost"))
            .and_then(|cost| serde_json::from_value(cost.clone()).ok())
            .unwrap_or_default();
        let mut attempt = self.own.plus(tasks);
        attempt.wall_seconds = elapsed.as_secs_f64();
        earlier.plus(&attempt)
    }
}

/// Keeps what the job has spent so far, and whom it is charged to, in its result before an
/// attempt ends without success: the job's cost counts every attempt, and a job that ends
/// failed or cancelled shows what it cost.
async fn keep_spent(rt: &Shared, claimed: &ClaimedJob, spec: &TableSpec, cost: &Cost) {
    let result = serde_json::json!({ "cost": cost, "owner": spec.owner });
    match rt.store.keep_spent(&claimed.lease, result).await {
        Ok(true) => {}
        Ok(false) => lease_gone("keep_spent"),
        Err(e) => store_failed("keep_spent", &e),
    }
}

/// Writes how the attempt ended to the job table, fenced by the lease, and says what the
/// attempt counts as.
#[allow(clippy::too_many_arguments)] // the attempt's facts, each from a different place
pub(crate) async fn record(
    rt: &Shared,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    op: Operation,
    ctx: &RunContext,
    end: Watched<Result<Ran, ExecError>>,
    elapsed: Duration,
    spent: Spent,
) -> AttemptOutcome {
    let unsuccessful = match &end {
        Watched::Finished(Ok(_)) | Watched::LeaseLost(_) => false,
        Watched::Finished(Err(_)) | Watched::TimedOut(_) | Watched::Shutdown => true,
    };
    if unsuccessful {
        keep_spent(
            rt,
            claimed,
            spec,
            &spent.so_far(claimed, &Cost::default(), elapsed),
        )
        .await;
    }
    match end {
        Watched::Finished(Ok(ran)) => {
            succeeded(rt, claimed, spec, op, ctx, ran, elapsed, spent).await
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
        Watched::Finished(Err(ExecError::HandedOver(reason))) => {
            release(rt, claimed, &reason).await;
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
        // in job_attempts when it requeues the job; what the attempt cost stays in this
        // replica's counters only.
        Watched::LeaseLost(
            LeaseLoss::ClaimedTooLate | LeaseLoss::NotConfirmed | LeaseLoss::Gone,
        ) => AttemptOutcome::LostLease,
        Watched::Shutdown => {
            release(
                rt,
                claimed,
                "replica shutting down: released before shutdown_grace ran out",
            )
            .await;
            AttemptOutcome::Cancelled
        }
    }
}

/// Gives the job back to the queue for another replica (the replica is draining).
async fn release(rt: &Shared, claimed: &ClaimedJob, reason: &str) {
    match rt.store.release(&claimed.lease, reason).await {
        Ok(true) => info!(reason, "job released for another replica"),
        Ok(false) => lease_gone("release"),
        Err(e) => store_failed("release", &e),
    }
}

#[allow(clippy::too_many_arguments)] // record()'s, unpacked
async fn succeeded(
    rt: &Shared,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    op: Operation,
    ctx: &RunContext,
    ran: Ran,
    elapsed: Duration,
    spent: Spent,
) -> AttemptOutcome {
    let Ran {
        report,
        tasks,
        before,
    } = ran;
    if report.conflicts > 0 {
        rt.metrics.count_conflicts(&spec.name, op, report.conflicts);
    }
    let mut result = serde_json::to_value(&report).unwrap_or_default();
    if op == Operation::Vacuum {
        // read back by the next VACUUM (see `vacuum_mode`)
        result["mode"] = serde_json::json!(ctx.vacuum_mode);
    }
    let cost = spent.so_far(claimed, &tasks, elapsed);
    result["cost"] = serde_json::to_value(cost).unwrap_or_default();
    // the table after the job, from a probe of it now (the probe's own requests count as
    // the table's probes, not the job's); a checkpoint changes the log without a new
    // version, so what the probe keeps while the version stands is read again
    rt.fleet.expire_cached_reads(spec).await;
    let after = match Box::pin(rt.fleet.probe(spec)).await {
        Ok(probe) => Some(crate::fleet::probe_figures(&probe)),
        Err(failure) => {
            warn!(error = %failure.message, "the table could not be probed after the job: its outcome has no after figures");
            None
        }
    };
    let outcome = Outcome {
        before: before.unwrap_or_default(),
        after: after.unwrap_or_default(),
    };
    result["outcome"] = serde_json::to_value(outcome).unwrap_or_default();
    // who the cost is charged to, as the inventory said when the job ran
    result["owner"] = serde_json::json!(spec.owner);
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
    info!(elapsed = ?elapsed, files_removed = report.files_removed, files_added = report.files_added, skipped = report.skipped.as_deref().unwrap_or(""), cpu_seconds = cost.cpu_seconds, requests = cost.requests.total(), estimated_usd = cost.estimated_usd, "job succeeded");
    AttemptOutcome::Succeeded
}

async fn failed(
    rt: &Shared,
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
        ExecError::Delta(DeltaError::ContentChanged { .. }) => {
            error!(error = %e, "DATA SAFETY: the content guard refused a rewrite before its commit; the table is unchanged, report the message");
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
pub(crate) async fn fail(rt: &Shared, claimed: &ClaimedJob, kind: FailureKind, message: &str) {
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
