//! Log setup: human-readable lines by default, JSON lines with `--log-format json`.
//! Level from `RUST_LOG` (default `info`, with chatty dependencies turned down).

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Default filter: our crates at info, dependencies that log per request or per file
/// at warn so a busy replica's log stays readable.
const DEFAULT_FILTER: &str = "info,sqlx=warn,deltalake=warn,deltalake_core=warn,datafusion=warn,tower_http=warn,tokio_cron_scheduler=warn,hyper=warn,object_store=warn,buoyant_kernel=off,buoyant_kernel_engine=off";

pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder
            .with_ansi(std::env::var_os("NO_COLOR").is_none())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
    };
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = result;
}
