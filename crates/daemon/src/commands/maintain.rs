//! `tablekeeper maintain`: one operation on one table, now, in the foreground, through
//! the same executor the daemon's workers use; no job store involved.

use std::path::Path;
use std::process::ExitCode;

use serde_json::json;
use tablekeeper_inventory::Operation;
use tokio_util::sync::CancellationToken;

use crate::executor::{self, RunContext};

pub async fn run(inventory: &Path, table: &str, operation: &str, dry_run: bool) -> ExitCode {
    let inv = match super::load_inventory_or_report(inventory) {
        Ok(inv) => inv,
        Err(code) => return code,
    };
    let Some(spec) = inv.table(table) else {
        let names: Vec<&str> = inv.tables.iter().map(|t| t.name.as_str()).collect();
        let hint = names
            .iter()
            .map(|n| (strsim::levenshtein(n, table), *n))
            .filter(|(d, _)| *d <= 3)
            .min()
            .map(|(_, n)| format!(" (did you mean `{n}`?)"))
            .unwrap_or_default();
        eprintln!(
            "error: table `{table}` is not in the inventory {}{hint}",
            inventory.display()
        );
        return ExitCode::FAILURE;
    };
    let Ok(op) = operation.parse::<Operation>() else {
        eprintln!(
            "error: unknown operation `{operation}`: use compact, zorder, vacuum or checkpoint"
        );
        return ExitCode::FAILURE;
    };
    if !spec.operation_enabled(op) {
        eprintln!("error: table `{table}`: {op} is disabled in the inventory");
        return ExitCode::FAILURE;
    }
    let cancel = CancellationToken::new();
    let ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            ctrl_c.cancel();
        }
    });
    // Same inputs the daemon would use: the Z-order scope comes from the table's log.
    let zorder_since_version = if op == Operation::Zorder {
        let options = tablekeeper_delta::ProbeOptions::for_target(spec.compaction.target_file_size);
        match tablekeeper_delta::Prober::new()
            .probe(&spec.path, &options)
            .await
        {
            Ok(p) => p.last_zorder_version,
            Err(e) => {
                eprintln!("error: table `{table}`: cannot read the table: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let ctx = RunContext {
        dry_run,
        // A foreground VACUUM lists the directory: an operator running it by hand
        // usually wants orphans from failed rewrites reclaimed too.
        vacuum_full: true,
        zorder_since_version,
    };
    match executor::run(spec, op, ctx, cancel).await {
        Ok(report) => {
            match serde_json::to_string_pretty(
                &json!({ "table": table, "operation": op, "ok": true, "report": report }),
            ) {
                Ok(text) => println!("{text}"),
                Err(e) => eprintln!("error: cannot render the report: {e}"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            let out =
                json!({ "table": table, "operation": op, "ok": false, "error": e.to_string() });
            println!("{out}");
            eprintln!("error: table `{table}`: {op} failed: {e}");
            ExitCode::FAILURE
        }
    }
}
