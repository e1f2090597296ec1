//! The worker pool: claims jobs from the job store, runs them through the executor while
//! heartbeating the lease, and records the outcome fenced by the lease token.
//!
//! Lease safety (DESIGN.md hazards: two compactions of the same files both commit and
//! duplicate rows): the operation future is dropped — cancelling the Delta operation
//! before it can commit — as soon as the lease is known lost or cannot be confirmed
//! before [`tablekeeper_store::abandon_deadline`], which the store sizes to fall strictly
//! before any reaper may take the job over. A worker never holds a database transaction
//! while an operation runs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_store::{ClaimedJob, FailureKind, JobFilter, JobState, RetryPolicy};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn, Instrument};

use crate::executor::{self, ExecError, RunContext};
use crate::runtime::Runtime;

/// A lease renewal in flight: when it was sent, and what the store answered.
type Renewal<'a> = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = (
                    Instant,
                    Result<Option<chrono::DateTime<Utc>>, tablekeeper_store::StoreError>,
                ),
            > + Send
            + 'a,
    >,
>;

/// How one attempt ended, as this worker saw it. One short-lived value per attempt, so
/// the large report variant costs nothing worth boxing.
#[allow(clippy::large_enum_variant)]
enum AttemptEnd {
    Finished(Result<tablekeeper_delta::OpReport, ExecError>),
    LeaseLost,
    TimedOut(Duration),
    Shutdown,
}

/// Runs `count` workers until `stop_claiming` fires; each finishes or releases its job
/// according to `hard_stop`. Returns when every worker has exited.
pub async fn run_pool(
    rt: Arc<Runtime>,
    count: usize,
    stop_claiming: CancellationToken,
    hard_stop: CancellationToken,
) {
    let mut handles = Vec::with_capacity(count);
    for n in 0..count {
        let worker_id = format!("{}/{}", rt.config.replica_id, n);
        let rt = Arc::clone(&rt);
        let stop = stop_claiming.clone();
        let hard = hard_stop.clone();
        handles.push(tokio::spawn(async move {
            worker_loop(rt, worker_id, stop, hard).await;
        }));
    }
    for h in handles {
        if let Err(e) = h.await {
            error!(error = %e, "worker task panicked");
        }
    }
}

async fn worker_loop(
    rt: Arc<Runtime>,
    worker_id: String,
    stop: CancellationToken,
    hard_stop: CancellationToken,
) {
    let mut store_errors: u32 = 0;
    while !stop.is_cancelled() {
        // The claim is the lease's first renewal: the abandon deadline counts from when it
        // was sent, however long the claim call (or anything after it) takes to return.
        let claim_sent = Instant::now();
        let outcome = rt.store.claim(&worker_id, rt.config.lease).await;
        let idle = match outcome {
            Ok(outcome) => {
                store_errors = 0;
                for wait in &outcome.key_waits {
                    rt.metrics
                        .concurrency_key_waits_total
                        .with_label_values(&[wait.table_name.as_str(), wait.operation.as_str()])
                        .inc();
                }
                match outcome.job {
                    Some(claimed) => {
                        run_claimed(&rt, &worker_id, claimed, claim_sent, &hard_stop).await;
                        Duration::ZERO
                    }
                    None => rt.config.poll_interval,
                }
            }
            Err(e) => {
                store_errors = store_errors.saturating_add(1);
                // Back off while the store is unreachable: 1s, 2s, 4s ... capped at 30s.
                let wait =
                    Duration::from_secs(1 << store_errors.min(5)).min(Duration::from_secs(30));
                warn!(worker = %worker_id, error = %e, retry_in = ?wait, "cannot claim jobs");
                wait
            }
        };
        if !idle.is_zero() {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(idle) => {}
            }
        }
    }
}

async fn run_claimed(
    rt: &Arc<Runtime>,
    worker_id: &str,
    claimed: ClaimedJob,
    claim_sent: Instant,
    hard_stop: &CancellationToken,
) {
    let job = &claimed.job;
    let span = tracing::info_span!("job", job_id = job.id.0, table = %job.table_name, operation = %job.operation, attempt = job.attempt);
    async {
        let started = Instant::now();
        let Some((spec, op)) = resolve(rt, job) else {
            let msg = format!(
                "table `{}` is not in the inventory (or operation `{}` is unknown): nothing to run",
                job.table_name, job.operation
            );
            warn!(error = %msg, "failing job");
            let _ = rt
                .store
                .fail(
                    &claimed.lease,
                    FailureKind::Permanent,
                    &msg,
                    &RetryPolicy::default(),
                )
                .await;
            return;
        };
        info!(worker = %worker_id, "job started");
        let ctx = run_context(rt, &spec, op, job.trigger).await;
        let end = supervise(rt, &claimed, claim_sent, &spec, op, ctx, hard_stop).await;
        let elapsed = started.elapsed();
        rt.metrics
            .job_duration_seconds
            .with_label_values(&[op.as_str()])
            .observe(elapsed.as_secs_f64());
        record(rt, &claimed, &spec, op, ctx.vacuum_full, end, elapsed).await;
    }
    .instrument(span)
    .await;
}

fn resolve(rt: &Runtime, job: &tablekeeper_store::Job) -> Option<(TableSpec, Operation)> {
    let spec = rt.fleet.spec(&job.table_name)?;
    Some((spec, job.operation))
}

/// Inputs the operation needs beyond the inventory: the version of the last Z-order,
/// whether this VACUUM is the every-Nth full one (from the job history), how much of the log
/// history is safely copied into `table_commits` (what a checkpoint may clean up), and
/// whether a person asked for the run.
async fn run_context(
    rt: &Runtime,
    spec: &TableSpec,
    op: Operation,
    trigger: tablekeeper_store::Trigger,
) -> RunContext {
    // Z-order scope: partitions that received files since the last Z-order found in
    // the log (a Z-order by another engine counts too).
    let mut ctx = RunContext {
        zorder_since_version: rt
            .fleet
            .with_state(&spec.name, |s| {
                s.probe.as_ref().and_then(|p| p.last_zorder_version)
            })
            .flatten(),
        forced: trigger == tablekeeper_store::Trigger::Manual,
        ..RunContext::default()
    };
    if op == Operation::Checkpoint {
        // only commits already in table_commits may leave the log; if the store cannot say
        // which those are, nothing is deleted this time
        ctx.log_cleanup = match rt.store.recorded_range(&spec.name).await {
            Ok(range) => {
                tablekeeper_delta::LogCleanup::Recorded(range.and_then(|(from, to)| {
                    Some((u64::try_from(from).ok()?, u64::try_from(to).ok()?))
                }))
            }
            Err(e) => {
                warn!(error = %e, "cannot read which commits are recorded; the checkpoint deletes no log file this time");
                tablekeeper_delta::LogCleanup::Off
            }
        };
    }
    if op != Operation::Vacuum {
        return ctx;
    }
    let recent = rt
        .store
        .list_jobs(&JobFilter {
            table: Some(spec.name.clone()),
            state: Some(JobState::Succeeded),
            limit: 200,
        })
        .await
        .unwrap_or_default();
    let same_op = recent.iter().filter(|j| j.operation == op);
    // Full when none of the last `full_every - 1` VACUUMs was: every Nth run lists the
    // directory.
    let window = spec.vacuum.full_every.saturating_sub(1) as usize;
    let recent_full = same_op.take(window).any(|j| {
        j.result
            .as_ref()
            .and_then(|r| r.get("mode"))
            .and_then(|m| m.as_str())
            == Some("full")
    });
    ctx.vacuum_full = spec.vacuum.full_every <= 1 || !recent_full;
    ctx
}

/// Runs the operation while heartbeating; drops it (cancelling the Delta operation) the
/// moment the lease is lost or can no longer be confirmed in time. Never starts it when
/// the deadline counted from the claim has already passed (the store was slow to answer
/// after the claim, so another replica may own the job by now).
async fn supervise(
    rt: &Runtime,
    claimed: &ClaimedJob,
    claim_sent: Instant,
    spec: &TableSpec,
    op: Operation,
    ctx: RunContext,
    hard_stop: &CancellationToken,
) -> AttemptEnd {
    let lease = rt.config.lease;
    // The claim is the last confirmed renewal.
    let mut last_confirmed_sent = claim_sent;
    if Instant::now() >= tablekeeper_store::abandon_deadline(claim_sent, lease) {
        error!(lease = ?lease, since_claim = ?claim_sent.elapsed(), "lease could not be confirmed in time after the claim: abandoning the operation before it starts, another replica may take the job over");
        return AttemptEnd::LeaseLost;
    }
    let cancel = CancellationToken::new();
    let operation = executor::run(spec, op, ctx, cancel.clone());
    tokio::pin!(operation);

    let mut heartbeat = tokio::time::interval(lease / 4);
    heartbeat.tick().await; // the first tick is immediate; the claim set the lease
    let timeout = tokio::time::sleep(spec.timeout);
    tokio::pin!(timeout);
    // At most one renewal in flight, polled beside the operation so a slow store never
    // stalls the operation (and a stalled renewal never delays the abandon deadline).
    let mut renewal: Option<Renewal<'_>> = None;

    let end = loop {
        let deadline = tablekeeper_store::abandon_deadline(last_confirmed_sent, lease);
        tokio::select! {
            biased;
            result = &mut operation => break AttemptEnd::Finished(result),
            () = hard_stop.cancelled() => break AttemptEnd::Shutdown,
            () = tokio::time::sleep_until(deadline.into()) => {
                error!(lease = ?lease, "lease could not be renewed in time: abandoning the operation before another replica can take the job over");
                break AttemptEnd::LeaseLost;
            }
            () = &mut timeout => break AttemptEnd::TimedOut(spec.timeout),
            (sent, renewed) = async {
                match renewal.as_mut() {
                    Some(pending) => pending.await,
                    None => std::future::pending().await,
                }
            }, if renewal.is_some() => {
                renewal = None;
                match renewed {
                    Ok(Some(_)) => last_confirmed_sent = last_confirmed_sent.max(sent),
                    Ok(None) => {
                        error!("lease lost (the job was taken over or cancelled): abandoning the operation");
                        break AttemptEnd::LeaseLost;
                    }
                    Err(e) => warn!(error = %e, "heartbeat failed; will retry until the abandon deadline"),
                }
            }
            _ = heartbeat.tick(), if renewal.is_none() => {
                let sent = Instant::now();
                let renew = rt.store.heartbeat(&claimed.lease, lease);
                renewal = Some(Box::pin(async move { (sent, renew.await) }));
            }
        }
    };
    // Anything the operation spawned observes this; the future itself is dropped here.
    cancel.cancel();
    end
}

async fn record(
    rt: &Runtime,
    claimed: &ClaimedJob,
    spec: &TableSpec,
    op: Operation,
    ctx_full: bool,
    end: AttemptEnd,
    elapsed: Duration,
) {
    let lease = &claimed.lease;
    let labels = [spec.name.as_str(), op.as_str()];
    let retry = RetryPolicy::default();
    let outcome: &str = match end {
        AttemptEnd::Finished(Ok(report)) => {
            if report.conflicts > 0 {
                rt.metrics
                    .commit_conflicts_total
                    .with_label_values(&labels)
                    .inc_by(u64::from(report.conflicts));
            }
            let mut result = serde_json::to_value(&report).unwrap_or_default();
            if op == Operation::Vacuum {
                // Recorded so the next VACUUM can tell when the last full one ran.
                result["mode"] = serde_json::json!(if ctx_full { "full" } else { "lite" });
            }
            match rt.store.complete(lease, result).await {
                Ok(true) => {
                    if !report.dry_run {
                        match op {
                            Operation::Compact | Operation::Zorder => rt
                                .metrics
                                .bytes_rewritten_total
                                .with_label_values(&[&spec.name])
                                .inc_by(report.bytes_added),
                            Operation::Vacuum => rt
                                .metrics
                                .bytes_reclaimed_total
                                .with_label_values(&[&spec.name])
                                .inc_by(report.bytes_removed),
                            Operation::Checkpoint | Operation::Repair => {}
                        }
                    }
                    let now = Utc::now();
                    rt.fleet.update_state(&spec.name, |s| {
                        s.store_success.insert(op, now);
                    });
                    info!(elapsed = ?elapsed, files_removed = report.files_removed, files_added = report.files_added, skipped = report.skipped.as_deref().unwrap_or(""), "job succeeded");
                    "succeeded"
                }
                Ok(false) => {
                    error!("job finished but its lease was already lost: the result was not recorded (another replica owns the job now)");
                    "lost_lease"
                }
                Err(e) => {
                    error!(error = %e, "job finished but the result could not be recorded; the reaper will retry it");
                    "lost_lease"
                }
            }
        }
        AttemptEnd::Finished(Err(ExecError::Deferred { until, reason })) => {
            let delay = (until - Utc::now()).to_std().unwrap_or_default();
            let message = format!("deferred until {until}: {reason}");
            match rt.store.defer(lease, &message, delay).await {
                Ok(_) => info!(until = %until, reason = %reason, "job deferred"),
                Err(e) => {
                    warn!(error = %e, "could not defer the job; the reaper will requeue it when the lease expires")
                }
            }
            "cancelled"
        }
        AttemptEnd::Finished(Err(e)) => {
            let conflict = e.is_conflict();
            if conflict {
                rt.metrics
                    .commit_conflicts_total
                    .with_label_values(&labels)
                    .inc();
            }
            if matches!(
                &e,
                ExecError::Delta(tablekeeper_delta::DeltaError::DuplicateRewrite { .. })
            ) {
                error!(error = %e, "DATA SAFETY: a concurrent rewrite duplicated rows; another engine or replica compacted the same files. Investigate before the next maintenance run");
            }
            let message = e.to_string();
            let kind = if conflict {
                FailureKind::Conflict
            } else if e.is_retryable() {
                FailureKind::Failed
            } else {
                FailureKind::Permanent
            };
            match rt.store.fail(lease, kind, &message, &retry).await {
                Ok(outcome) => warn!(error = %message, outcome = ?outcome, "job attempt failed"),
                Err(store_err) => {
                    error!(error = %message, store_error = %store_err, "job failed and the failure could not be recorded")
                }
            }
            if conflict {
                "conflict"
            } else {
                "failed"
            }
        }
        AttemptEnd::TimedOut(limit) => {
            let message = format!(
                "timed out after {}: raise `maintenance.timeout` for this table or check why the operation is slow",
                humantime::format_duration(limit)
            );
            let _ = rt
                .store
                .fail(lease, FailureKind::Failed, &message, &retry)
                .await;
            warn!(error = %message, "job attempt failed");
            "failed"
        }
        AttemptEnd::LeaseLost => {
            // Nothing is written: the lease is not ours any more. The reaper records
            // `lost_lease` in job_attempts when it requeues the job.
            "lost_lease"
        }
        AttemptEnd::Shutdown => {
            match rt
                .store
                .release(
                    lease,
                    "replica shutting down: released before shutdown_grace ran out",
                )
                .await
            {
                Ok(_) => info!("job released for another replica (shutdown grace ran out)"),
                Err(e) => {
                    warn!(error = %e, "could not release job on shutdown; the reaper will requeue it when the lease expires")
                }
            }
            "cancelled"
        }
    };
    rt.metrics
        .jobs_total
        .with_label_values(&[spec.name.as_str(), op.as_str(), outcome])
        .inc();
    // the streak (tablekeeper_consecutive_failures) is the job table's, not this replica's
    crate::background::refresh_failure_streaks(rt).await;
    // After a success, re-probe so table gauges reflect the maintenance just done (a
    // successful probe refreshes every gauge of the table); otherwise refresh the
    // failure and staleness gauges from what is known.
    let probed = outcome == "succeeded" && crate::recorder::probe(rt, spec).await.is_ok();
    if !probed {
        rt.fleet.refresh_table_metrics(spec, Utc::now());
    }
}
