//! Small helpers shared by the benchmarks: paths, copies, file sizes, process memory,
//! summary statistics and a running replica of `tablekeeper run`. Nothing here measures
//! anything by itself.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A path as the `&str` the delta crate takes.
pub fn path_str(path: &Path) -> Result<String> {
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("{} is not valid UTF-8", path.display()))
}

/// `cp -r`, so both copies are byte-identical to the source (log and data alike).
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let status = Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .context("running cp")?;
    if !status.success() {
        bail!("cp -r {} {} failed: {status}", from.display(), to.display());
    }
    Ok(())
}

/// Removes `dir` if it exists and creates it empty; returns its canonical path.
pub fn fresh_dir(dir: &Path) -> Result<std::path::PathBuf> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    dir.canonicalize()
        .with_context(|| format!("resolving {}", dir.display()))
}

/// Number and total size of the parquet files under `root`.
pub fn parquet_size(root: &Path) -> Result<(u64, u64)> {
    let mut files = 0;
    let mut bytes = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else if entry.path().extension().is_some_and(|e| e == "parquet") {
                files += 1;
                bytes += meta.len();
            }
        }
    }
    Ok((files, bytes))
}

/// A field of `/proc/<pid>/status` in kB (`VmRSS`, `VmHWM`), `None` if unreadable.
pub fn proc_status_kb(pid: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kb| kb.parse().ok())
}

/// This process's resident set size in MB (0 when /proc is unreadable).
pub fn own_rss_mb() -> f64 {
    proc_status_kb("self", "VmRSS").unwrap_or(0) as f64 / 1024.0
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // fields after the parenthesised command name; utime and stime are fields 14 and 15
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on every Linux this runs on
    Some((utime + stime) / 100.0)
}

/// Seconds since `started`.
pub fn secs(started: Instant) -> f64 {
    started.elapsed().as_secs_f64()
}

/// The median of `values` (0 for an empty slice).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// A running replica of `tablekeeper run`: killed when dropped if still running (a normal run
/// stops it with SIGTERM first).
#[derive(Debug)]
pub struct Replica {
    pub child: Child,
    pub base: String,
    pub log: PathBuf,
}

impl Drop for Replica {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Seconds from `started` until the replica's `/readyz` answers 200; fails after `timeout` or
/// when the process exits first.
pub async fn wait_ready(
    client: &reqwest::Client,
    replica: &mut Replica,
    started: Instant,
    timeout: Duration,
) -> Result<f64> {
    loop {
        if let Ok(resp) = client.get(format!("{}/readyz", replica.base)).send().await {
            if resp.status().is_success() {
                return Ok(secs(started));
            }
        }
        if let Ok(Some(status)) = replica.child.try_wait() {
            bail!(
                "tablekeeper run exited with {status} before it was ready; see {}",
                replica.log.display()
            );
        }
        if started.elapsed() > timeout {
            bail!(
                "no /readyz 200 within {timeout:?}; see {}",
                replica.log.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
