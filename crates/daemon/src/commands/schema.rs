//! `tablekeeper schema`: the inventory's JSON Schema on stdout.

use std::process::ExitCode;

pub fn run() -> ExitCode {
    match serde_json::to_string_pretty(&tablekeeper_inventory::json_schema()) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot render the schema: {e}");
            ExitCode::FAILURE
        }
    }
}
