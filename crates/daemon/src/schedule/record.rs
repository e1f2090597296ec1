//! What a probe learns that must outlive the replica or reach the others: the probe itself
//! into `table_probes` (read by the replicas that do not probe the table), every new
//! commit's `commitInfo` into
//! `table_commits` (history beyond the log's retention), every stale write into
//! `stale_writes`, a `repair` job for a stale write waiting for one (unless the inventory
//! turns `maintenance.auto_repair` off), and the purge and VACUUM an erasure deadline needs.
//!
//! Every replica records what its own probes read; the store coalesces, so the history and
//! the stale writes are the same whichever replica saw them first. A failed store call
//! loses nothing: the records go back to the prober and the next probe tries again.

use chrono::Utc;
use tablekeeper_delta::{CommitRecord, Probe, StaleWrite};
use tablekeeper_inventory::{Operation, TableSpec};
use tablekeeper_store::{CommitRow, ProbeRow, StaleWriteRow, TableFigures, Trigger};
use tracing::{info, warn};

use crate::fleet::ProbeFailure;
use crate::policy::planner::{self, Need, Probed};
use crate::shared::Shared;

/// Probes the table, publishes its gauges, and records what the probe read; the probe's
/// result for the caller.
pub(crate) async fn probe(rt: &Shared, spec: &TableSpec) -> Result<Probe, ProbeFailure> {
    let probe = rt.fleet.probe(spec).await;
    if let Err(failure) = &probe {
        rt.metrics.count_probe_failure(&spec.name, failure.kind);
    }
    crate::metrics::publish::table(&rt.metrics, &rt.fleet, spec, Utc::now());
    share(rt, spec, &probe).await;
    record_history(rt, spec).await;
    if let Ok(probe) = &probe {
        record_stale_writes(rt, spec, probe).await;
        queue_for_erasure_deadline(rt, spec, probe).await;
    }
    probe
}

/// Stores the probe for the other replicas (`fleet::sharing`), with the time this replica
/// keeps for it so every replica orders probes alike.
async fn share(rt: &Shared, spec: &TableSpec, probe: &Result<Probe, ProbeFailure>) {
    let Some(probed_at) = rt.fleet.with_state(&spec.name, |s| s.probed_at).flatten() else {
        return;
    };
    let (facts, error, error_kind) = match probe {
        Ok(probe) => (serde_json::to_value(probe).ok(), None, None),
        Err(failure) => (None, Some(failure.message.clone()), Some(failure.kind)),
    };
    let row = ProbeRow {
        table_name: spec.name.clone(),
        replica_id: rt.config.replica_id.clone(),
        probed_at,
        probe: facts,
        error,
        error_kind,
        updated_at: probed_at,
    };
    if let Err(e) = rt.store.record_probe(&row).await {
        warn!(table = %spec.name, error = %e, "cannot share the probe with the other replicas; they keep their last figures until the next one");
    }
    if let Ok(probe) = probe {
        record_figures(rt, spec, probe, probed_at).await;
    }
}

/// Figures kept per table for the dashboard's pictures: at one row an hour for a quiet table
/// (the store adds one then, or on a change) about six weeks; 10,000 tables hold ten million
/// small rows.
const FIGURES_KEPT: u32 = 1_000;

/// Adds the probe's figures to the table's history of them (`table_figures`).
async fn record_figures(
    rt: &Shared,
    spec: &TableSpec,
    probe: &Probe,
    probed_at: chrono::DateTime<Utc>,
) {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let figures = TableFigures {
        probed_at,
        version: probe.version,
        files: count(probe.files),
        small_files: count(probe.small_files),
        size_bytes: count(probe.size_bytes),
        erasure_pending_since: probe.history.erasure_pending_since,
    };
    if let Err(e) = rt
        .store
        .record_figures(&spec.name, &figures, FIGURES_KEPT)
        .await
    {
        warn!(table = %spec.name, error = %e, "cannot record the probe's figures for the dashboard; its point is missing from the pictures");
    }
}

/// Keeps a table's erasure deadline (`retention.erasure_deadline`) without waiting for the
/// cron schedules: a purge as soon as the deadline leaves no room to wait for the next one,
/// and a VACUUM as soon as the files superseded by the purge have aged past the retention
/// (unless a VACUUM already succeeded since). The job table coalesces: at most one queued job
/// per table and operation, whichever replica asks.
async fn queue_for_erasure_deadline(rt: &Shared, spec: &TableSpec, probe: &Probe) {
    if spec.retention.erasure_deadline.is_none() || probe.history.erasure_pending_since.is_none() {
        return;
    }
    let now = Utc::now();
    let mut due = Vec::new();
    if crate::policy::erasure::deadline_at_risk(spec, probe, now)
        && planner::admit(
            spec,
            Operation::Purge,
            Probed::Read(probe),
            Need::Check { last_success: None },
            now,
        )
        .should_run()
    {
        due.push(Operation::Purge);
    }
    let retention =
        chrono::Duration::from_std(spec.vacuum_window()).unwrap_or(chrono::Duration::MAX);
    let eligible_at = probe
        .history
        .erasure_last_removal_at
        .map(|at| at + retention);
    let last_vacuum = rt.fleet.last_success(&spec.name, Operation::Vacuum);
    if eligible_at.is_some_and(|at| at <= now && last_vacuum.is_none_or(|v| v < at))
        && planner::admit(
            spec,
            Operation::Vacuum,
            Probed::Read(probe),
            Need::Forced,
            now,
        )
        .should_run()
    {
        due.push(Operation::Vacuum);
    }
    for op in due {
        match crate::jobs::enqueue::enqueue(rt, spec, op, Trigger::Schedule, None).await {
            Ok((job_id, true)) => {
                info!(table = %spec.name, operation = %op, job_id = job_id.0, "queued to meet the erasure deadline")
            }
            Ok((_, false)) => {}
            Err(e) => {
                warn!(table = %spec.name, operation = %op, error = %e, "cannot queue a job for the erasure deadline")
            }
        }
    }
}

async fn record_history(rt: &Shared, spec: &TableSpec) {
    let batch = rt.fleet.take_history(spec).await;
    if batch.commits.is_empty() {
        return;
    }
    let rows: Vec<CommitRow> = batch.commits.iter().map(commit_row).collect();
    match rt.store.record_commits(&spec.name, &rows).await {
        Ok(new) if new > 0 => {
            info!(table = %spec.name, recorded = new, read = rows.len(), "recorded table history")
        }
        Ok(_) => {}
        Err(e) => {
            warn!(table = %spec.name, commits = rows.len(), error = %e, "cannot record table history; will retry after the next probe");
            rt.fleet.return_history(spec, batch).await;
        }
    }
}

async fn record_stale_writes(rt: &Shared, spec: &TableSpec, probe: &Probe) {
    if probe.history.stale_writes.is_empty() {
        return;
    }
    let rows: Vec<StaleWriteRow> = probe
        .history
        .stale_writes
        .iter()
        .map(|w| stale_write_row(&spec.name, w))
        .collect();
    match rt.store.record_stale_writes(&rows).await {
        Ok(0) => {}
        Ok(new) => {
            warn!(table = %spec.name, owner = %spec.owner, new, "stale commit recorded: a commit planned on an older snapshot left rows it removed visible, or rows of a rewrite visible twice")
        }
        Err(e) => warn!(table = %spec.name, error = %e, "cannot record stale writes"),
    }
    let need = Need::Check { last_success: None };
    if !planner::admit(
        spec,
        Operation::Repair,
        Probed::Read(probe),
        need,
        Utc::now(),
    )
    .should_run()
    {
        return;
    }
    match crate::jobs::enqueue::enqueue(rt, spec, Operation::Repair, Trigger::Schedule, None).await
    {
        Ok((job_id, true)) => {
            info!(table = %spec.name, job_id = job_id.0, "repair queued for a stale write")
        }
        Ok((_, false)) => {}
        Err(e) => warn!(table = %spec.name, error = %e, "cannot queue the repair of a stale write"),
    }
}

fn commit_row(record: &CommitRecord) -> CommitRow {
    CommitRow {
        version: record.version,
        timestamp: record.timestamp,
        operation: record.operation.clone(),
        operation_parameters: record.operation_parameters.clone(),
        operation_metrics: record.operation_metrics.clone(),
        engine_info: record.engine_info.clone(),
        user_name: record.user_name.clone(),
        is_blind_append: record.is_blind_append,
        rewrite: Some(record.rewrite),
        tablekeeper_operation: record.tablekeeper_operation.clone(),
    }
}

fn stale_write_row(table: &str, w: &StaleWrite) -> StaleWriteRow {
    StaleWriteRow {
        table_name: table.to_owned(),
        version: w.version,
        committed_at: w.committed_at,
        operation: w.operation.clone(),
        engine_info: w.engine_info.clone(),
        kind: w.kind,
        rewrite_versions: w.rewrite_versions.clone(),
        files: i64::try_from(w.files).unwrap_or(i64::MAX),
        sample_files: w.sample_files.clone(),
        rows: w.rows.and_then(|r| i64::try_from(r).ok()),
        over_repair: w.over_repair,
        repaired_by: w.repaired_by,
        detected_at: None,
    }
}
