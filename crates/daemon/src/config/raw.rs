//! The config file as written: every key optional, unknown keys refused.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

/// The file form of the configuration: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) database_url: Option<String>,
    pub(super) inventory: Option<PathBuf>,
    pub(super) listen: Option<String>,
    pub(super) workers: Option<usize>,
    pub(super) replica_id: Option<String>,
    pub(super) admin_token_env: Option<String>,
    pub(super) lease: Option<String>,
    pub(super) shutdown_grace: Option<String>,
    pub(super) poll_interval: Option<String>,
    pub(super) probe_interval: Option<String>,
    pub(super) max_probe_interval: Option<String>,
    pub(super) restore_drill_every: Option<String>,
    pub(super) loaded_snapshots: Option<usize>,
    pub(super) store_timeout: Option<String>,
    pub(super) rewrite_memory_budget: Option<String>,
    pub(super) log_read_cache: Option<String>,
    pub(super) storage_options: Option<BTreeMap<String, String>>,
    pub(super) role: Option<String>,
    pub(super) prices: Option<super::prices::RawPrices>,
}
