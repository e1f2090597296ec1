//! `cargo run -p tablekeeper-inventory --example validate -- PATH...`: the inventory check
//! of `tablekeeper validate` without building the daemon (and deltalake). Same output and
//! exit codes: 0 valid, 1 problems (one per line on stderr), 2 unusable input.

use std::path::PathBuf;
use std::process::ExitCode;

use tablekeeper_inventory::{Inventory, LoadError};

fn main() -> ExitCode {
    let paths: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    match Inventory::load_paths(&paths) {
        Ok(inventory) => {
            println!(
                "ok: {} tables in {} files",
                inventory.tables.len(),
                inventory.sources.len()
            );
            ExitCode::SUCCESS
        }
        Err(LoadError::Invalid(problems)) => {
            for problem in &problems {
                eprintln!("{problem}");
            }
            ExitCode::from(1)
        }
        Err(unusable) => {
            eprintln!("error: {unusable}");
            ExitCode::from(2)
        }
    }
}
