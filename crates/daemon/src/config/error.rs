//! What can be wrong with the daemon's configuration.

use std::path::PathBuf;

/// A configuration problem, naming the key and where its value came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("`{key}` (from {origin}): {message}")]
    Value {
        key: &'static str,
        origin: String,
        message: String,
    },
}
