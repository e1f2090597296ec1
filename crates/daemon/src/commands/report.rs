//! `tablekeeper report costs`: the chargeback report, read from the job store
//! ([`crate::costs::report`]). The job store comes from `--database-url`, else the config's
//! `database_url`, else `TABLEKEEPER_DATABASE_URL`; prices and the inventory (owners of jobs
//! that recorded none) from the config when one is given.

use std::path::Path;
use std::process::ExitCode;

use chrono::Utc;

use crate::cli::ReportFormat;
use crate::config::{redact_url, DaemonConfig, Prices};
use crate::costs::report::{By, Ledger};

/// What `report costs` was asked for.
#[derive(Debug)]
pub struct CostsRequest<'a> {
    pub config: Option<&'a Path>,
    pub database_url: Option<String>,
    pub since: &'a str,
    /// Only this owner's jobs, probes and retained bytes.
    pub owner: Option<&'a str>,
    pub by: By,
    pub format: ReportFormat,
}

pub async fn costs(request: CostsRequest<'_>) -> ExitCode {
    let since = match crate::costs::parse_since(request.since, Utc::now()) {
        Ok(since) => since,
        Err(e) => {
            eprintln!("error: --since: {e}");
            return ExitCode::from(super::EXIT_UNUSABLE);
        }
    };
    let config = match request.config {
        Some(path) => match DaemonConfig::load(Some(path)) {
            Ok(config) => Some(config),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(super::EXIT_UNUSABLE);
            }
        },
        None => None,
    };
    let Some(url) = request
        .database_url
        .or_else(|| config.as_ref().map(|c| c.database_url.clone()))
        .or_else(|| std::env::var("TABLEKEEPER_DATABASE_URL").ok())
        .filter(|u| !u.trim().is_empty())
    else {
        eprintln!(
            "error: no job store to read: pass --database-url, --config, or set \
             TABLEKEEPER_DATABASE_URL"
        );
        return ExitCode::from(super::EXIT_UNUSABLE);
    };
    let prices = config.as_ref().map_or_else(Prices::default, |c| c.prices);
    let inventory = config
        .as_ref()
        .and_then(|c| c.inventory.as_deref())
        .and_then(|path| tablekeeper_inventory::Inventory::load(path).ok());
    let owner_now = |table: &str| {
        inventory
            .as_ref()
            .and_then(|inv| inv.tables.iter().find(|t| t.name == table))
            .map(|t| t.owner.clone())
    };
    let store =
        match tablekeeper_store::connect(&url, tablekeeper_store::StoreOptions::default()).await {
            Ok(store) => store,
            Err(e) => {
                eprintln!(
                    "error: cannot reach the job store {}: {e}",
                    redact_url(&url)
                );
                return ExitCode::FAILURE;
            }
        };
    let ledger = Ledger::read(&store, since, owner_now).await;
    store.close().await;
    let ledger = match ledger {
        Ok(ledger) => ledger,
        Err(e) => {
            eprintln!("error: cannot read the costs from the job store: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ledger = match request.owner {
        Some(owner) => ledger.of_owner(owner, owner_now),
        None => ledger,
    };
    let report = ledger.report(since, request.by, &prices, owner_now);
    let out = match request.format {
        ReportFormat::Text => report.text(),
        ReportFormat::Csv => report.csv(),
        ReportFormat::Markdown => report.markdown(),
        ReportFormat::Json => match serde_json::to_string_pretty(&report) {
            Ok(json) => json + "\n",
            Err(e) => {
                eprintln!("error: the report does not serialize: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    print!("{out}");
    ExitCode::SUCCESS
}
