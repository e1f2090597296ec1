//! One module per subcommand. Each returns the process exit code; errors a user can fix
//! are printed on stderr in their own words.

pub mod demo;
pub mod maintain;
pub mod migrate;
pub mod plan;
pub mod run;
pub mod schema;
pub mod validate;

use std::path::Path;
use std::process::ExitCode;

use tablekeeper_inventory::{Inventory, LoadError};

/// Exit code for invalid input (DESIGN.md: `validate` exits 1 when invalid).
pub const EXIT_INVALID: u8 = 1;
/// Exit code for unusable input (a missing file, an unreadable directory).
pub const EXIT_UNUSABLE: u8 = 2;

/// Loads an inventory for commands that need a valid one, printing every problem.
pub fn load_inventory_or_report(path: &Path) -> Result<Inventory, ExitCode> {
    match Inventory::load(path) {
        Ok(inv) => Ok(inv),
        Err(e) => Err(report_load_error(&e)),
    }
}

/// Prints a load error the way `validate` does and returns the matching exit code.
pub fn report_load_error(e: &LoadError) -> ExitCode {
    match e {
        LoadError::Invalid(problems) => {
            for p in problems {
                eprintln!("{p}");
            }
            eprintln!(
                "{} problem{} found",
                problems.len(),
                if problems.len() == 1 { "" } else { "s" }
            );
            ExitCode::from(EXIT_INVALID)
        }
        other => {
            eprintln!("error: {other}");
            ExitCode::from(EXIT_UNUSABLE)
        }
    }
}
