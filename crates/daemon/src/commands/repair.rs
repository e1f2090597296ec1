//! `tablekeeper repair`: find the stale writes over tablekeeper's rewrites in a table's log and
//! print (`--dry-run`) or apply their exact repair, through the executor the daemon's `repair`
//! jobs use. Exit 0 when nothing needed repairing or everything was repaired, 1 otherwise.

use std::path::Path;
use std::process::ExitCode;

use tablekeeper_inventory::Operation;

use crate::jobs::executor::{self, RunContext};

pub async fn run(inventory: &Path, table: &str, dry_run: bool) -> ExitCode {
    if let Err(code) = super::apply_storage_options_from_env() {
        return code;
    }
    let inv = match super::load_inventory_or_report(inventory) {
        Ok(inv) => inv,
        Err(code) => return code,
    };
    let spec = match super::find_table(&inv, inventory, table) {
        Ok(spec) => spec,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    let cancel = super::cancel_on_ctrl_c();
    let ctx = RunContext {
        dry_run,
        forced: true,
        ..RunContext::default()
    };
    let outcome = executor::run(spec, Operation::Repair, ctx, cancel).await;
    super::print_outcome(table, Operation::Repair, outcome, None)
}
