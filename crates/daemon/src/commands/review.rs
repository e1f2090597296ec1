//! `tablekeeper plan --inventory HEAD --base BASE [--format text|json|markdown]`: only the
//! tables whose effective settings changed, were added or removed, each with what the change
//! will do ([`crate::review`]). Exit 0; 4 when a consequence is blocking; 3 when a table it
//! needs cannot be read (unless `--allow-unreadable`); 1 invalid inventory; 2 unusable input
//! (a BASE that is neither a readable inventory nor a git ref of its repository).

use std::path::Path;
use std::process::ExitCode;

use chrono::Utc;
use tablekeeper_store::OperationsFilter;

use crate::cli::OutputFormat;
use crate::config::Prices;
use crate::costs::OperationRow;
use crate::review::base::{self, BaseError};
use crate::review::measured::{Measured, WINDOW_DAYS};
use crate::review::render;

pub async fn run(
    inventory: &Path,
    base: &str,
    format: OutputFormat,
    allow_unreadable: bool,
) -> ExitCode {
    if let Err(code) = super::apply_storage_options_from_env() {
        return code;
    }
    let head = match super::load_inventory_or_report(inventory) {
        Ok(inv) => inv,
        Err(code) => return code,
    };
    let base_inventory = match base::load(base, inventory) {
        Ok(inv) => inv,
        Err(BaseError::Load { origin, source }) => {
            eprintln!("error: the base inventory {origin} does not load:");
            super::report_load_error(&source);
            return ExitCode::from(super::EXIT_UNUSABLE);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(super::EXIT_UNUSABLE);
        }
    };
    let measured = measured().await;
    let (review, unreadable) =
        match crate::review::review(&head, &base_inventory, &Prices::default(), &measured).await {
            Ok(reviewed) => reviewed,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
    match format {
        OutputFormat::Text => print!("{}", render::text(&review, base)),
        OutputFormat::Markdown => print!("{}", render::markdown(&review, base)),
        OutputFormat::Json => match serde_json::to_string_pretty(&review) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        },
    }
    if review.blocking > 0 {
        eprintln!(
            "{} blocking problem(s): the change must not merge as it is",
            review.blocking
        );
        return ExitCode::from(super::EXIT_BLOCKING);
    }
    if !unreadable.is_empty() && !allow_unreadable {
        for (table, why) in &unreadable {
            eprintln!("error: table `{table}` cannot be read: {why}");
        }
        eprintln!(
            "{} table(s) cannot be read; pass --allow-unreadable where storage is out of reach on purpose",
            unreadable.len()
        );
        return ExitCode::from(super::EXIT_UNREADABLE);
    }
    ExitCode::SUCCESS
}

/// What the tables' jobs measured to cost, from the job store `TABLEKEEPER_DATABASE_URL`
/// names (a CI job that can reach it); nothing without one, or when it cannot be read (said
/// on stderr: the review goes on without costs).
async fn measured() -> Measured {
    let Some(url) = std::env::var("TABLEKEEPER_DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
    else {
        return Measured::none();
    };
    let now = Utc::now();
    let rows = async {
        let store =
            tablekeeper_store::connect(&url, tablekeeper_store::StoreOptions::default()).await?;
        let jobs = store
            .finished_jobs(&OperationsFilter {
                since: Some(now - chrono::Duration::days(WINDOW_DAYS)),
                ..OperationsFilter::default()
            })
            .await;
        store.close().await;
        jobs
    }
    .await;
    match rows {
        Ok(jobs) => {
            let rows: Vec<OperationRow> =
                jobs.iter().map(|j| OperationRow::of(j, |_| None)).collect();
            Measured::from_rows(&rows, now)
        }
        Err(e) => {
            eprintln!(
                "note: cannot read the jobs' measured costs from {}: {e}; costs per day are not estimated",
                crate::config::redact_url(&url)
            );
            Measured::none()
        }
    }
}
