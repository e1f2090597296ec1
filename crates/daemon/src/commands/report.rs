//! The reports read from the job store: `tablekeeper report costs`, the chargeback report
//! ([`crate::costs::report`]), and `tablekeeper report budget`, the budget's windows (what
//! each allowed and spent, what ran, what waited and how long). The job store comes from
//! `--database-url`, else the config's `database_url`, else `TABLEKEEPER_DATABASE_URL`;
//! prices and the inventory (owners of jobs that recorded none) from the config when one is
//! given.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use tablekeeper_store::{JobStore, StoreOptions};

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
    let Opened {
        since,
        config,
        store,
    } = match open(request.config, request.database_url, request.since).await {
        Ok(opened) => opened,
        Err(code) => return code,
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
    print_report(&report, request.format)
}

/// What a report reads: its period, the config (when one is given) and the job store.
struct Opened {
    since: DateTime<Utc>,
    config: Option<DaemonConfig>,
    store: Arc<JobStore>,
}

/// Parses `--since`, loads the config and connects to the job store (`--database-url`, else
/// the config's, else `TABLEKEEPER_DATABASE_URL`), or says what is wrong and returns the exit
/// code.
async fn open(
    config: Option<&Path>,
    database_url: Option<String>,
    since: &str,
) -> Result<Opened, ExitCode> {
    let since = crate::costs::parse_since(since, Utc::now()).map_err(|e| {
        eprintln!("error: --since: {e}");
        ExitCode::from(super::EXIT_UNUSABLE)
    })?;
    let config = match config {
        Some(path) => Some(DaemonConfig::load(Some(path)).map_err(|e| {
            eprintln!("error: {e}");
            ExitCode::from(super::EXIT_UNUSABLE)
        })?),
        None => None,
    };
    let Some(url) = database_url
        .or_else(|| config.as_ref().map(|c| c.database_url.clone()))
        .or_else(|| std::env::var("TABLEKEEPER_DATABASE_URL").ok())
        .filter(|u| !u.trim().is_empty())
    else {
        eprintln!(
            "error: no job store to read: pass --database-url, --config, or set \
             TABLEKEEPER_DATABASE_URL"
        );
        return Err(ExitCode::from(super::EXIT_UNUSABLE));
    };
    let store = tablekeeper_store::connect(&url, StoreOptions::default())
        .await
        .map_err(|e| {
            eprintln!(
                "error: cannot reach the job store {}: {e}",
                redact_url(&url)
            );
            ExitCode::FAILURE
        })?;
    Ok(Opened {
        since,
        config,
        store,
    })
}

/// What `report budget` was asked for.
#[derive(Debug)]
pub struct BudgetRequest<'a> {
    pub config: Option<&'a Path>,
    pub database_url: Option<String>,
    pub since: &'a str,
    pub format: ReportFormat,
}

pub async fn budget(request: BudgetRequest<'_>) -> ExitCode {
    let Opened { since, store, .. } =
        match open(request.config, request.database_url, request.since).await {
            Ok(opened) => opened,
            Err(code) => return code,
        };
    let windows = store.budget_report(since).await;
    let estimates = store.estimates_and_costs(since).await;
    store.close().await;
    let (windows, estimates) = match (windows, estimates) {
        (Ok(windows), Ok(estimates)) => (windows, estimates),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: cannot read the budget's windows from the job store: {e}");
            return ExitCode::FAILURE;
        }
    };
    let report = crate::costs::budget::BudgetReport::new(since, windows, &estimates);
    print_report(&report, request.format)
}

/// A report in each of the forms `--format` names.
trait Formats: serde::Serialize {
    fn text(&self) -> String;
    fn csv(&self) -> String;
    fn markdown(&self) -> String;
}

impl Formats for crate::costs::report::CostReport {
    fn text(&self) -> String {
        self.text()
    }
    fn csv(&self) -> String {
        self.csv()
    }
    fn markdown(&self) -> String {
        self.markdown()
    }
}

impl Formats for crate::costs::budget::BudgetReport {
    fn text(&self) -> String {
        self.text()
    }
    fn csv(&self) -> String {
        self.csv()
    }
    fn markdown(&self) -> String {
        self.markdown()
    }
}

/// Prints `report` as `format` asks.
fn print_report(report: &impl Formats, format: ReportFormat) -> ExitCode {
    let out = match format {
        ReportFormat::Text => report.text(),
        ReportFormat::Csv => report.csv(),
        ReportFormat::Markdown => report.markdown(),
        ReportFormat::Json => match serde_json::to_string_pretty(report) {
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
