//! Building blocks the fault-injection scenarios share: sizeable real tables, inventories
//! and daemon environments, and a process-wide lock that keeps timing-sensitive scenarios
//! from running at the same time inside one test binary.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tablekeeper_delta::fixtures::{self, SmallFiles};

/// Admin token the scenarios configure.
pub const TOKEN: &str = "fault-suite-token";

/// Serialises scenarios of one test binary: each starts replicas and races timers, and two
/// at once on 2 cores would test the machine rather than tablekeeper.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// Writes a partitioned table of 120 small files, `rows_per_file` rows each (5,000 rows
/// per file compact in about half a second in a debug build; 25,000 in a few seconds, long
/// enough to cut a worker off mid-operation). Returns its rows, sorted.
pub async fn sizeable_table(uri: &Path, rows_per_file: u32) -> anyhow::Result<Vec<String>> {
    small_file_table(
        uri,
        &SmallFiles {
            partitions: 6,
            files_per_partition: 20,
            rows_per_file,
            payload_bytes: 24,
        },
    )
    .await
}

/// Writes `spec` to the table at `uri` (created if missing) and returns all its rows.
pub async fn small_file_table(uri: &Path, spec: &SmallFiles) -> anyhow::Result<Vec<String>> {
    let uri = uri.to_string_lossy();
    fixtures::write_small_files(&uri, spec).await?;
    Ok(fixtures::read_rows_sorted(&uri, None).await?)
}

/// Every row of the table, sorted (the independent check).
pub async fn rows(uri: &Path) -> anyhow::Result<Vec<String>> {
    Ok(fixtures::read_rows_sorted(&uri.to_string_lossy(), None).await?)
}

/// Parquet files under the table root (relative paths), whatever the log says.
pub fn parquet_on_disk(root: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.file_name().is_some_and(|n| n == "_delta_log") {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else if path.extension().is_some_and(|e| e == "parquet") {
                if let Ok(rel) = path.strip_prefix(root) {
                    out.insert(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root, root, &mut out);
    out
}

/// An inventory file: `defaults` (YAML, indented two spaces) and one entry per table.
#[derive(Debug)]
pub struct InventoryFile {
    pub path: PathBuf,
}

/// One table of an inventory: its name, path and extra YAML lines (indented four spaces).
#[derive(Debug)]
pub struct TableEntry<'a> {
    pub name: &'a str,
    pub path: &'a Path,
    pub extra: &'a str,
}

impl<'a> TableEntry<'a> {
    /// One entry per name and path (in order), with no extra YAML.
    pub fn plain(names: &[&'a str], paths: &'a [PathBuf]) -> Vec<Self> {
        names
            .iter()
            .zip(paths)
            .map(|(name, path)| TableEntry {
                name,
                path,
                extra: "",
            })
            .collect()
    }
}

impl InventoryFile {
    /// Writes `<dir>/inventory/tables.yaml`.
    pub fn write(dir: &Path, defaults: &str, tables: &[TableEntry<'_>]) -> anyhow::Result<Self> {
        let inv_dir = dir.join("inventory");
        std::fs::create_dir_all(&inv_dir)?;
        let path = inv_dir.join("tables.yaml");
        let mut yaml = format!("defaults:\n{defaults}tables:\n");
        for t in tables {
            yaml.push_str(&format!(
                "  - name: {}\n    path: \"{}\"\n    owner: fault-suite\n{}",
                t.name,
                t.path.display(),
                t.extra
            ));
        }
        std::fs::write(&path, yaml)?;
        Ok(Self { path })
    }

    /// [`Self::write`] of one table, `name` at `path` with the YAML lines `extra`, no defaults.
    ///
    /// # Panics
    /// When the file cannot be written.
    pub fn one(dir: &Path, name: &str, path: &Path, extra: &str) -> Self {
        Self::write(dir, "", &[TableEntry { name, path, extra }]).expect("inventory written")
    }
}

/// Environment for `tablekeeper run`: fast polls and probes, the given lease and workers.
pub fn daemon_env(
    database_url: &str,
    inventory: &Path,
    lease: Duration,
    workers: u32,
) -> Vec<(&'static str, String)> {
    vec![
        ("TABLEKEEPER_DATABASE_URL", database_url.to_string()),
        ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
        ("TABLEKEEPER_WORKERS", workers.to_string()),
        ("TABLEKEEPER_LEASE", humantime_secs(lease)),
        ("TABLEKEEPER_SHUTDOWN_GRACE", "20s".to_string()),
        ("TABLEKEEPER_POLL_INTERVAL", "200ms".to_string()),
        ("TABLEKEEPER_PROBE_INTERVAL", "1s".to_string()),
        ("TABLEKEEPER_MAX_PROBE_INTERVAL", "4s".to_string()),
        ("TABLEKEEPER_ADMIN_TOKEN", TOKEN.to_string()),
    ]
}

fn humantime_secs(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// Asks the daemon at `base_url` to run `operation` on `table` now; returns the job id.
pub async fn trigger(base_url: &str, table: &str, operation: &str) -> anyhow::Result<i64> {
    trigger_with_token(base_url, TOKEN, table, operation).await
}

/// [`trigger`] with the daemon's admin `token`.
pub async fn trigger_with_token(
    base_url: &str,
    token: &str,
    table: &str,
    operation: &str,
) -> anyhow::Result<i64> {
    let response = reqwest::Client::new()
        .post(format!("{base_url}/api/v1/tables/{table}/jobs"))
        .bearer_auth(token)
        .json(&serde_json::json!({ "operation": operation }))
        .send()
        .await?;
    let status = response.status();
    let body: serde_json::Value = response.json().await?;
    anyhow::ensure!(status.as_u16() == 202, "trigger answered {status}: {body}");
    body["job"]["id"]
        .as_i64()
        .ok_or_else(|| anyhow::anyhow!("no job id in {body}"))
}

/// Active data files of the latest version, relative to the table root, from the log.
pub async fn active_paths(root: &Path) -> anyhow::Result<BTreeSet<String>> {
    let url = url::Url::from_directory_path(root)
        .map_err(|()| anyhow::anyhow!("{} is not an absolute path", root.display()))?;
    let table = deltalake::open_table(url).await?;
    Ok(table
        .snapshot()?
        .snapshot()
        .log_data()
        .into_iter()
        .map(|f| f.path().into_owned())
        .collect())
}

/// The newest version with a JSON commit in `_delta_log`.
pub fn latest_version(root: &Path) -> anyhow::Result<u64> {
    let mut latest = None;
    for entry in std::fs::read_dir(root.join("_delta_log"))?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(v) = name
            .strip_suffix(".json")
            .and_then(|v| v.parse::<u64>().ok())
        {
            latest = latest.max(Some(v));
        }
    }
    latest.ok_or_else(|| anyhow::anyhow!("no commits in {}", root.display()))
}

/// A python deltalake writer of twenty appends of ten rows: twenty small files, versions
/// 0–19 (`run_python(TWENTY_APPENDS, &[uri])`).
pub const TWENTY_APPENDS: &str = r#"
import os, sys
import pyarrow as pa
from deltalake import write_deltalake
for i in range(20):
    write_deltalake(sys.argv[1], pa.table({"id": pa.array(list(range(i * 10, i * 10 + 10)), pa.int64())}), mode="append")
os._exit(0)
"#;

/// The data file commit 0 of the table at `root` added, as its log names it.
pub fn first_added_file(root: &Path) -> anyhow::Result<String> {
    let log = std::fs::read_to_string(root.join("_delta_log").join(format!("{:020}.json", 0)))?;
    for line in log.lines() {
        let action: serde_json::Value = serde_json::from_str(line)?;
        if let Some(path) = action["add"]["path"].as_str() {
            return Ok(path.to_owned());
        }
    }
    anyhow::bail!("commit 0 of {} adds no file", root.display())
}
