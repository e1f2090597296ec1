//! `tablekeeper validate PATH...`: what CI runs on every inventory pull request.

use std::path::PathBuf;
use std::process::ExitCode;

use tablekeeper_inventory::Inventory;

pub fn run(paths: &[PathBuf]) -> ExitCode {
    match Inventory::load_paths(paths) {
        Ok(inv) => {
            println!(
                "ok: {} table{} in {} file{}",
                inv.tables.len(),
                if inv.tables.len() == 1 { "" } else { "s" },
                inv.sources.len(),
                if inv.sources.len() == 1 { "" } else { "s" }
            );
            ExitCode::SUCCESS
        }
        Err(e) => super::report_load_error(&e),
    }
}
