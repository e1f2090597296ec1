//! One module per subcommand. Each returns the process exit code; errors a user can fix
//! are printed on stderr in their own words.

pub mod demo;
pub mod maintain;
pub mod migrate;
pub mod plan;
mod progress;
pub mod repair;
pub mod report;
pub mod review;
pub mod run;
pub mod schema;
pub mod validate;

use std::path::Path;
use std::process::ExitCode;

use tablekeeper_inventory::{Inventory, LoadError, TableSpec};

/// Exit code for invalid input (DESIGN.md: `validate` exits 1 when invalid).
pub const EXIT_INVALID: u8 = 1;
/// Exit code for unusable input (a missing file, an unreadable directory).
pub const EXIT_UNUSABLE: u8 = 2;
/// Exit code of `plan` when a table cannot be read (DESIGN.md "CLI").
pub const EXIT_UNREADABLE: u8 = 3;
/// Exit code of `plan --base` when a consequence of the change is blocking (DESIGN.md "CLI").
pub const EXIT_BLOCKING: u8 = 4;

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

/// The table named `table` in `inventory`, or a message naming the inventory with a
/// did-you-mean hint.
pub fn find_table<'a>(
    inventory: &'a Inventory,
    source: &Path,
    table: &str,
) -> Result<&'a TableSpec, String> {
    inventory.table(table).ok_or_else(|| {
        let hint = inventory
            .tables
            .iter()
            .map(|t| (strsim::levenshtein(&t.name, table), t.name.as_str()))
            .filter(|(d, _)| *d <= 3)
            .min()
            .map(|(_, n)| format!(" (did you mean `{n}`?)"))
            .unwrap_or_default();
        format!(
            "table `{table}` is not in the inventory {}{hint}",
            source.display()
        )
    })
}

/// A token cancelled by Ctrl-C, for foreground commands: the running operation stops before
/// it commits.
pub fn cancel_on_ctrl_c() -> tokio_util::sync::CancellationToken {
    let cancel = tokio_util::sync::CancellationToken::new();
    let ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            ctrl_c.cancel();
        }
    });
    cancel
}

/// Prints an operation's outcome as JSON on stdout (and the error on stderr) and returns
/// the exit code: 0 success, 1 failure.
pub fn print_outcome(
    table: &str,
    op: tablekeeper_inventory::Operation,
    outcome: Result<tablekeeper_delta::OpReport, crate::jobs::executor::ExecError>,
    cost: Option<tablekeeper_vocab::Cost>,
) -> ExitCode {
    match outcome {
        Ok(report) => {
            let mut out = serde_json::json!({ "table": table, "operation": op, "ok": true, "report": report });
            if let Some(cost) = cost {
                out["cost"] = serde_json::json!(cost);
            }
            match serde_json::to_string_pretty(&out) {
                Ok(text) => println!("{text}"),
                Err(e) => eprintln!("error: cannot render the report: {e}"),
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            let out = serde_json::json!({ "table": table, "operation": op, "ok": false, "error": e.to_string() });
            println!("{out}");
            eprintln!("error: table `{table}`: {op} failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The rewrite memory budget from `TABLEKEEPER_REWRITE_MEMORY_BUDGET`, for commands without a
/// config file (`rewrite_memory_budget` in the README); a malformed value ends the command.
pub fn apply_rewrite_budget_from_env() -> Result<(), ExitCode> {
    let Ok(text) = std::env::var("TABLEKEEPER_REWRITE_MEMORY_BUDGET") else {
        return Ok(());
    };
    match tablekeeper_inventory::parse_size(&text) {
        Ok(bytes) => {
            tablekeeper_delta::set_rewrite_memory_budget(bytes);
            Ok(())
        }
        Err(message) => {
            eprintln!("error: TABLEKEEPER_REWRITE_MEMORY_BUDGET: {message}");
            Err(ExitCode::FAILURE)
        }
    }
}

/// [`crate::config::apply_storage_options`] from `TABLEKEEPER_STORAGE_OPTIONS`, for commands without a
/// config file; a malformed value is reported and ends the command.
pub fn apply_storage_options_from_env() -> Result<(), ExitCode> {
    match crate::config::storage_options_from_env() {
        Ok(options) => {
            crate::config::apply_storage_options(&options);
            Ok(())
        }
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::from(EXIT_UNUSABLE))
        }
    }
}
