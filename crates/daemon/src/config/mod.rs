//! The daemon's own configuration (not the inventory): where the job store is, where the
//! inventory is, how many workers, lease timing, and the HTTP listener.
//!
//! Sources, lowest to highest precedence: built-in defaults, the YAML file given with
//! `--config`, then `TABLEKEEPER_<KEY>` environment variables (DESIGN.md "CLI"). Unknown
//! keys in the file are errors. The result is a plain, validated [`DaemonConfig`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod error;
mod prices;
mod raw;
mod sources;
mod storage;

pub use error::ConfigError;
pub use prices::Prices;
use sources::Sources;
pub use storage::{apply_storage_options, storage_options_from_env};

/// Built-in default for `lease`: long enough that a heartbeat every lease/4 survives a
/// few slow database round trips, short enough that a crashed replica's job is taken
/// over within about a minute and a quarter (lease + reaper grace of lease/4).
const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// Built-in default for `shutdown_grace`: how long SIGTERM waits for running jobs. The
/// Kubernetes manifests set terminationGracePeriodSeconds above this.
const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(300);
/// Built-in default for `workers`: maintenance is I/O- and CPU-heavy (Parquet rewrite),
/// two concurrent jobs per replica suit the 2-core pods the manifests request.
const DEFAULT_WORKERS: usize = 2;
/// Built-in default for `poll_interval`: how often an idle worker asks the job store for
/// work. One second keeps manual triggers snappy at negligible database cost.
const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Built-in default for `probe_interval`: how often every table's log is probed to
/// refresh health metrics, independent of the maintenance schedules.
const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(60);
/// Shortest lease accepted: the heartbeat runs every lease/4 and must leave room for a
/// database round trip.
const MIN_LEASE: Duration = Duration::from_secs(2);

/// Smallest `rewrite_memory_budget` accepted: what one copied compaction bin holds.
const MIN_REWRITE_MEMORY_BUDGET: u64 = 64 * 1024 * 1024;

/// Shortest `store_timeout` accepted.
const MIN_STORE_TIMEOUT: Duration = Duration::from_secs(1);

/// Default database: an embedded SQLite file in the working directory (one replica only).
pub const DEFAULT_DATABASE_URL: &str = "sqlite://tablekeeper.db";
/// Default name of the environment variable holding the admin bearer token.
pub const DEFAULT_ADMIN_TOKEN_ENV: &str = "TABLEKEEPER_ADMIN_TOKEN";

/// What a replica does (`role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// Everything: schedules, probes, workers, the API and the dashboard.
    #[default]
    All,
    /// Runs the jobs other replicas queue, and nothing else: no schedules, no probes, no
    /// dashboard (its HTTP answers `/metrics`, `/healthz` and `/readyz`), so a Deployment of
    /// workers scales apart from the replicas that plan.
    Worker,
}

impl Role {
    /// The value as the config writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::All => "all",
            Role::Worker => "worker",
        }
    }
}

/// The validated daemon configuration.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub database_url: String,
    pub inventory: Option<PathBuf>,
    pub listen: SocketAddr,
    pub workers: usize,
    pub replica_id: String,
    pub admin_token_env: String,
    pub lease: Duration,
    pub shutdown_grace: Duration,
    pub poll_interval: Duration,
    pub probe_interval: Duration,
    /// The longest a table whose log does not move waits between probes (it waits twice
    /// as long after each unchanged probe, from `probe_interval` up to this).
    pub max_probe_interval: Duration,
    /// How often each table's restore drill proves that every version owed (pins, clones'
    /// current versions, the window's oldest) still restores: one listing of the table each.
    pub restore_drill_every: Duration,
    /// Tables kept loaded between probes (the rest are reopened at each probe): bounds the
    /// memory a large fleet takes.
    pub loaded_snapshots: usize,
    /// Longest a job store call may take before it fails (and is retried): bounds how long
    /// a silently dead connection can hold a worker.
    pub store_timeout: Duration,
    /// Bytes the replica's rewrites (compaction bins, Z-orders, purges) may hold in memory at
    /// once.
    pub rewrite_memory_budget: u64,
    /// Bytes of immutable log files (commits, checksums) the process keeps after reading
    /// them, so that the several readers of one table's log read each file once; 0 turns it
    /// off.
    pub log_read_cache: u64,
    /// Object-store settings for every table (`timeout`, `connect_timeout`,
    /// `max_retries`, `retry_timeout`, ...): never credentials, which come from the
    /// environment or the platform identity.
    pub storage_options: BTreeMap<String, String>,
    /// The admin bearer token read from the variable named by `admin_token_env` at load
    /// time; `None` when unset or empty (mutating routes then answer 403).
    pub admin_token: Option<AdminToken>,
    /// What this replica does: everything, or only the jobs others queue.
    pub role: Role,
    /// What CPU, requests and storage cost, for the cost estimates.
    pub prices: Prices,
}

/// The admin bearer token; its `Debug` output is redacted so it never reaches a log.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl AdminToken {
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(****)")
    }
}

impl DaemonConfig {
    /// Loads the configuration from an optional file plus the process environment.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_with_env(file, |key| std::env::var(key).ok())
    }

    /// Like [`DaemonConfig::load`], with the environment supplied by the caller (tests).
    pub fn load_with_env(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let (raw, sources) = Sources::read(file, &env)?;
        let probe_interval =
            sources.duration("probe_interval", raw.probe_interval, DEFAULT_PROBE_INTERVAL)?;
        let admin_token_env = sources
            .text("admin_token_env", raw.admin_token_env)
            .map_or_else(|| DEFAULT_ADMIN_TOKEN_ENV.to_owned(), |(v, _)| v);
        Ok(Self {
            database_url: sources
                .text("database_url", raw.database_url)
                .map_or_else(|| DEFAULT_DATABASE_URL.to_owned(), |(v, _)| v),
            inventory: sources.path(
                "inventory",
                raw.inventory.map(|p| p.to_string_lossy().into_owned()),
            ),
            listen: sources.parsed(
                "listen",
                raw.listen,
                SocketAddr::from(([127, 0, 0, 1], 8080)),
                |v| format!("`{v}` is not an address like `127.0.0.1:8080` or `0.0.0.0:8080`"),
            )?,
            workers: sources.count("workers", raw.workers, DEFAULT_WORKERS)?,
            loaded_snapshots: sources.count(
                "loaded_snapshots",
                raw.loaded_snapshots,
                tablekeeper_delta::DEFAULT_LOADED_SNAPSHOTS,
            )?,
            replica_id: sources
                .text("replica_id", raw.replica_id)
                .map_or_else(default_replica_id, |(v, _)| v),
            lease: sources.at_least(
                "lease",
                sources.duration("lease", raw.lease, DEFAULT_LEASE)?,
                MIN_LEASE,
                "",
            )?,
            shutdown_grace: sources.duration(
                "shutdown_grace",
                raw.shutdown_grace,
                DEFAULT_SHUTDOWN_GRACE,
            )?,
            poll_interval: sources.duration(
                "poll_interval",
                raw.poll_interval,
                DEFAULT_POLL_INTERVAL,
            )?,
            max_probe_interval: max_probe_interval(
                &sources,
                raw.max_probe_interval,
                probe_interval,
            )?,
            probe_interval,
            restore_drill_every: sources.duration(
                "restore_drill_every",
                raw.restore_drill_every,
                tablekeeper_delta::DEFAULT_DRILL_EVERY,
            )?,
            store_timeout: sources.at_least(
                "store_timeout",
                sources.duration(
                    "store_timeout",
                    raw.store_timeout,
                    tablekeeper_store::DEFAULT_CALL_TIMEOUT,
                )?,
                MIN_STORE_TIMEOUT,
                " (a busy database may take that long)",
            )?,
            rewrite_memory_budget: rewrite_memory_budget(&sources, raw.rewrite_memory_budget)?,
            log_read_cache: log_read_cache(&sources, raw.log_read_cache)?,
            storage_options: storage::options(&env, raw.storage_options, sources.file_origin())?,
            role: sources.parsed("role", raw.role, Role::All, |v| {
                format!(
                    "`{v}` is not a role: use `all` (schedules, probes, workers, dashboard) or \
                     `worker` (runs the jobs other replicas queue)"
                )
            })?,
            prices: prices::prices(raw.prices, sources.file_origin(), &env)?,
            admin_token: env(&admin_token_env)
                .filter(|t| !t.trim().is_empty())
                .map(AdminToken),
            admin_token_env,
        })
    }
}

/// `max_probe_interval`: by default the built-in one, never shorter than `probe_interval`.
fn max_probe_interval(
    sources: &Sources<'_>,
    value: Option<String>,
    probe_interval: Duration,
) -> Result<Duration, ConfigError> {
    let Some((_, origin)) = sources.text("max_probe_interval", value.clone()) else {
        // the default never asks for faster probes than probe_interval
        return Ok(crate::fleet::DEFAULT_MAX_PROBE_INTERVAL.max(probe_interval));
    };
    let max = sources.duration("max_probe_interval", value, probe_interval)?;
    if max < probe_interval {
        return Err(ConfigError::Value {
            key: "max_probe_interval",
            origin,
            message: format!(
                "{} is shorter than probe_interval ({}): set it to at least that",
                humantime::format_duration(max),
                humantime::format_duration(probe_interval)
            ),
        });
    }
    Ok(max)
}

/// `rewrite_memory_budget`: a size of at least [`MIN_REWRITE_MEMORY_BUDGET`].
fn rewrite_memory_budget(sources: &Sources<'_>, value: Option<String>) -> Result<u64, ConfigError> {
    let Some((text, origin)) = sources.text("rewrite_memory_budget", value) else {
        return Ok(tablekeeper_delta::DEFAULT_REWRITE_MEMORY_BUDGET);
    };
    let value_error = |message: String| ConfigError::Value {
        key: "rewrite_memory_budget",
        origin: origin.clone(),
        message,
    };
    match tablekeeper_inventory::parse_size(&text) {
        Ok(bytes) if bytes >= MIN_REWRITE_MEMORY_BUDGET => Ok(bytes),
        Ok(_) => Err(value_error(format!(
            "`{text}` is too small: use at least 64MiB (one compaction bin's buffers and fetches)"
        ))),
        Err(message) => Err(value_error(message)),
    }
}

/// `log_read_cache`: a size, 0 included (no log file kept).
fn log_read_cache(sources: &Sources<'_>, value: Option<String>) -> Result<u64, ConfigError> {
    let Some((text, origin)) = sources.text("log_read_cache", value) else {
        return Ok(tablekeeper_delta::DEFAULT_LOG_READ_CACHE);
    };
    tablekeeper_inventory::parse_size(&text).map_err(|message| ConfigError::Value {
        key: "log_read_cache",
        origin,
        message,
    })
}

impl std::str::FromStr for Role {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s.trim() {
            "all" => Ok(Role::All),
            "worker" => Ok(Role::Worker),
            _ => Err(()),
        }
    }
}

fn default_replica_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string());
    format!("{host}-{}", std::process::id())
}

/// Hides a password in a database URL before printing it.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("****"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn role_is_all_unless_a_worker_is_asked_for() {
        assert_eq!(load("", &[]).unwrap().role, Role::All);
        assert_eq!(load("role: worker\n", &[]).unwrap().role, Role::Worker);
        assert_eq!(
            load("role: worker\n", &[("TABLEKEEPER_ROLE", "all")])
                .unwrap()
                .role,
            Role::All
        );
        let e = load("role: planner\n", &[]).unwrap_err().to_string();
        assert!(e.contains("role") && e.contains("`planner`"), "{e}");
    }

    fn load(yaml: &str, env: &[(&str, &str)]) -> Result<DaemonConfig, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tk.yaml");
        std::fs::write(&path, yaml).unwrap();
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        DaemonConfig::load_with_env(Some(&path), |k| env.get(k).cloned())
    }

    #[test]
    fn defaults_apply_when_keys_are_absent() {
        let c = load("", &[]).unwrap();
        assert_eq!(c.database_url, DEFAULT_DATABASE_URL);
        assert_eq!(c.workers, DEFAULT_WORKERS);
        assert_eq!(c.lease, DEFAULT_LEASE);
        assert_eq!(c.admin_token_env, "TABLEKEEPER_ADMIN_TOKEN");
        assert_eq!(c.listen.port(), 8080);
    }

    #[test]
    fn environment_overrides_file() {
        let c = load(
            "workers: 3\nlease: 30s\n",
            &[
                ("TABLEKEEPER_WORKERS", "5"),
                ("TABLEKEEPER_LISTEN", "0.0.0.0:9000"),
            ],
        )
        .unwrap();
        assert_eq!(c.workers, 5);
        assert_eq!(c.lease, Duration::from_secs(30));
        assert_eq!(c.listen.port(), 9000);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_naming_the_key() {
        assert!(load("wokers: 3\n", &[]).is_err());
        let e = load("lease: soon\n", &[]).unwrap_err().to_string();
        assert!(e.contains("`lease`"), "{e}");
        let e = load("", &[("TABLEKEEPER_WORKERS", "0")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("TABLEKEEPER_WORKERS"), "{e}");
    }

    #[test]
    fn store_timeout_defaults_and_bounds() {
        let c = load("", &[]).unwrap();
        assert_eq!(c.store_timeout, tablekeeper_store::DEFAULT_CALL_TIMEOUT);
        let c = load("store_timeout: 10s\n", &[]).unwrap();
        assert_eq!(c.store_timeout, Duration::from_secs(10));
        let e = load("", &[("TABLEKEEPER_STORE_TIMEOUT", "200ms")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("store_timeout") && e.contains("too short"),
            "{e}"
        );
    }

    #[test]
    fn the_example_config_loads() {
        let example =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/tablekeeper.example.yaml");
        let c = DaemonConfig::load_with_env(Some(&example), |_| None).unwrap();
        assert_eq!(c.log_read_cache, 1 << 20);
        assert_eq!(c.rewrite_memory_budget, 512 << 20);
    }

    #[test]
    fn log_read_cache_is_a_size_and_zero_turns_it_off() {
        let c = load("", &[]).unwrap();
        assert_eq!(c.log_read_cache, tablekeeper_delta::DEFAULT_LOG_READ_CACHE);
        assert_eq!(
            load("log_read_cache: 2MiB\n", &[]).unwrap().log_read_cache,
            2 << 20
        );
        let c = load("", &[("TABLEKEEPER_LOG_READ_CACHE", "0")]).unwrap();
        assert_eq!(c.log_read_cache, 0);
        let e = load("log_read_cache: lots\n", &[]).unwrap_err().to_string();
        assert!(e.contains("log_read_cache"), "{e}");
    }

    #[test]
    fn rewrite_memory_budget_is_a_size_of_at_least_64_mib() {
        let c = load("", &[]).unwrap();
        assert_eq!(
            c.rewrite_memory_budget,
            tablekeeper_delta::DEFAULT_REWRITE_MEMORY_BUDGET
        );
        let c = load("rewrite_memory_budget: 2GiB\n", &[]).unwrap();
        assert_eq!(c.rewrite_memory_budget, 2 << 30);
        let c = load("", &[("TABLEKEEPER_REWRITE_MEMORY_BUDGET", "256MiB")]).unwrap();
        assert_eq!(c.rewrite_memory_budget, 256 << 20);
        let e = load("rewrite_memory_budget: 1MiB\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("rewrite_memory_budget") && e.contains("at least 64MiB"),
            "{e}"
        );
        let e = load("rewrite_memory_budget: lots\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("rewrite_memory_budget") && e.contains("not a size"),
            "{e}"
        );
    }

    #[test]
    fn storage_options_come_from_the_file_or_the_environment_and_never_hold_secrets() {
        let c = load(
            "storage_options:\n  timeout: 10s\n  max_retries: \"3\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            c.storage_options.get("timeout").map(String::as_str),
            Some("10s")
        );
        let c = load(
            "storage_options: { timeout: 10s }\n",
            &[(
                "TABLEKEEPER_STORAGE_OPTIONS",
                "connect_timeout=1s, max_retries=1",
            )],
        )
        .unwrap();
        assert_eq!(c.storage_options.len(), 2);
        assert_eq!(c.storage_options["max_retries"], "1");
        let e = load("storage_options: { aws_secret_access_key: x }\n", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("credential") && e.contains("aws_secret_access_key"),
            "{e}"
        );
        let e = load("", &[("TABLEKEEPER_STORAGE_OPTIONS", "timeout")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("key=value"), "{e}");
    }

    #[test]
    fn relative_inventory_is_relative_to_the_config_file() {
        let c = load("inventory: inv.d\n", &[]).unwrap();
        let inv = c.inventory.unwrap();
        assert!(inv.is_absolute() && inv.ends_with("inv.d"), "{inv:?}");
    }
}
