//! `tablekeeper maintain`: one operation on one table, now, in the foreground, through
//! the same executor the daemon's workers use; no job store involved.
//!
//! Like a manual trigger through the API it ignores the need thresholds (an operator who asks
//! for a checkpoint gets one) unless `--if-needed`, and never the safety checks. Without a job
//! store there is nowhere to copy the history of commits a log cleanup would delete, so the
//! checkpoint deletes no log file unless `--cleanup-log` gives that history up explicitly.
//! VACUUM and log cleanup keep the inventory's pins and clones, what every other inventoried
//! table references, and the API's pins when `TABLEKEEPER_DATABASE_URL` is set.

use std::path::Path;
use std::process::ExitCode;

use chrono::Utc;
use tablekeeper_delta::{LogCleanup, VacuumMode};
use tablekeeper_inventory::Operation;

use crate::executor::{self, RunContext};
use crate::planner::{self, Decision, Need, Probed};

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
        Decision::Skip(reason) => {
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
        zorder_since_version: probe.last_zorder_version,
        forced: !request.if_needed,
        log_cleanup: if request.cleanup_log {
            LogCleanup::Unrecorded
        } else {
            LogCleanup::Off
        },
    };
    super::print_outcome(table, op, executor::run(spec, op, ctx, cancel).await)
}

/// What VACUUM and log cleanup keep: the inventory's pins and clones, every other inventoried
/// table read as a referrer, and the API's pins when `TABLEKEEPER_DATABASE_URL` names the job
/// store the daemon uses. No probes tell here which tables reference others, so each one is
/// read, and one whose log cannot be read refuses the VACUUM, named (strict, as an operator's
/// one-off run should be).
async fn keep(
    inventory: &tablekeeper_inventory::Inventory,
    spec: &tablekeeper_inventory::TableSpec,
) -> Result<tablekeeper_delta::Keep, String> {
    let pins = match std::env::var("TABLEKEEPER_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => {
            let store =
                tablekeeper_store::connect(&url, tablekeeper_store::StoreOptions::default())
                    .await
                    .map_err(|e| format!("cannot reach the job store for the table's pins: {e}"))?;
            let pins = store
                .pins(Some(&spec.name))
                .await
                .map_err(|e| format!("cannot read the table's pins from the job store: {e}"))?;
            store.close().await;
            pins
        }
        _ => {
            eprintln!(
                "note: TABLEKEEPER_DATABASE_URL is not set: pins added through the API are not \
                 read, only the inventory's `retention.pins`"
            );
            Vec::new()
        }
    };
    Ok(crate::keep::keep_for(inventory, spec, &pins, |_| {
        crate::keep::References::External
    }))
}
