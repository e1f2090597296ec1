//! `tablekeeper migrate [--database-url URL]`: applies the job-store migrations.

use std::process::ExitCode;

use crate::config::{redact_url, DEFAULT_DATABASE_URL};

pub async fn run(database_url: Option<String>) -> ExitCode {
    let url = database_url.unwrap_or_else(|| DEFAULT_DATABASE_URL.to_string());
    let store =
        match tablekeeper_store::connect(&url, tablekeeper_store::StoreOptions::default()).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: cannot connect to the job store: {e}");
                return ExitCode::FAILURE;
            }
        };
    match store.migrate().await {
        Ok(()) => {
            println!("ok: job store migrated ({})", redact_url(&url));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: migration failed: {e}");
            ExitCode::FAILURE
        }
    }
}
