//! `tablekeeper run`: loads the daemon configuration and runs a replica
//! ([`crate::replica`]) until SIGTERM/SIGINT; exit 0 after a clean drain, 2 for an unusable
//! configuration file, 1 for an unusable inventory (every problem printed) or a replica that
//! could not start.

use std::path::Path;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;
use tracing::error;

use crate::config::DaemonConfig;
use crate::replica::serve::ServeError;

pub async fn run(config_path: Option<&Path>) -> ExitCode {
    let config = match DaemonConfig::load(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(super::EXIT_UNUSABLE);
        }
    };
    exit_code(crate::replica::serve(config, CancellationToken::new()).await)
}

/// The exit code of a replica that ended with `result`, its error printed.
pub(crate) fn exit_code(result: Result<(), ServeError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(ServeError::Inventory { path, source }) => {
            super::report_load_error(&source);
            error!(inventory = %path, "tablekeeper stopped: the inventory is not usable");
            eprintln!("error: inventory {path} is not usable");
            ExitCode::FAILURE
        }
        Err(ServeError::Other(e)) => {
            error!(error = %format!("{e:#}"), "tablekeeper stopped");
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
