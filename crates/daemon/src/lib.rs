//! tablekeeper: keeps a fleet of Delta Lake tables maintained. This crate is the binary's
//! body, one folder per concern, arrows pointing down the list: `commands/` (one per
//! subcommand), `replica/` (a running daemon: assembly, signals, reloads, drain, background
//! loops), `http/`, `schedule/` (cron ticks, probe rounds, what a probe's findings queue),
//! `jobs/` (the worker pool, attempts, the executor, split jobs and their tasks), `shared.rs`
//! (what a replica's parts share), `metrics/`, `costs/` (what maintenance cost, read back),
//! `fleet/` (what the replica knows about the tables), `policy/` (the rules, pure), and the
//! leaves `config.rs`, `delta_runtime.rs`, `cli.rs`, `logging.rs`. The library crates do the rest: `tablekeeper-inventory` (what to
//! maintain), `tablekeeper-store` (the job table), `tablekeeper-delta` (how to maintain a
//! table).

mod cli;
mod commands;
mod config;
mod costs;
mod delta_runtime;
mod fleet;
mod http;
mod jobs;
mod logging;
mod metrics;
mod policy;
mod replica;
mod review;
mod schedule;
mod shared;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

/// The binary's entry point.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.log_format);
    // Pure, synchronous commands need no runtime.
    match &cli.command {
        Command::Validate { paths } => return commands::validate::run(paths),
        Command::Schema => return commands::schema::run(),
        _ => {}
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Run { config } => commands::run::run(config.as_deref()).await,
            Command::Plan {
                config,
                inventory,
                format,
                allow_unreadable,
                base,
            } => match (base, inventory) {
                (Some(base), Some(inventory)) => {
                    commands::review::run(&inventory, &base, format, allow_unreadable).await
                }
                (_, inventory) => {
                    commands::plan::run(config, inventory, format, allow_unreadable).await
                }
            },
            Command::Maintain {
                inventory,
                table,
                operation,
                dry_run,
                if_needed,
                cleanup_log,
            } => {
                commands::maintain::run(commands::maintain::Request {
                    inventory: &inventory,
                    table: &table,
                    operation: &operation,
                    dry_run,
                    if_needed,
                    cleanup_log,
                })
                .await
            }
            Command::Repair {
                inventory,
                table,
                dry_run,
            } => commands::repair::run(&inventory, &table, dry_run).await,
            Command::Migrate { database_url } => commands::migrate::run(database_url).await,
            Command::Report {
                report:
                    cli::ReportCommand::Costs {
                        config,
                        database_url,
                        since,
                        owner,
                        by,
                        format,
                    },
            } => {
                commands::report::costs(commands::report::CostsRequest {
                    config: config.as_deref(),
                    database_url,
                    since: &since,
                    owner: owner.as_deref(),
                    by,
                    format,
                })
                .await
            }
            Command::Report {
                report:
                    cli::ReportCommand::Budget {
                        config,
                        database_url,
                        since,
                        format,
                    },
            } => {
                commands::report::budget(commands::report::BudgetRequest {
                    config: config.as_deref(),
                    database_url,
                    since: &since,
                    format,
                })
                .await
            }
            Command::Demo {
                dir,
                listen,
                duration,
            } => commands::demo::run(&dir, &listen, duration).await,
            Command::Validate { .. } | Command::Schema => ExitCode::SUCCESS,
        }
    })
}
