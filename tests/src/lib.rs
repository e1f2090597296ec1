//! Helpers for tablekeeper's end-to-end tests: locating the real `tablekeeper` binary,
//! running it, and waiting on conditions with a deadline instead of sleeping.
//!
//! The binary is the one cargo builds for `crates/daemon`: `cargo test --workspace`
//! builds it before any test runs because the daemon package has integration tests of its
//! own. These helpers never build anything themselves (a nested cargo would wait forever
//! on the lock the outer `cargo test` holds).

pub mod browser;
pub mod chunks;
pub mod cloud;
pub mod cluster;
pub mod gcs;
mod gcs_bridge;
pub mod jobs;
pub mod prometheus;
pub mod proxy;
pub mod reports;
pub mod setup;
pub mod writer;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Path of the `tablekeeper` binary next to this test executable
/// (`<target>/debug/deps/<test>` → `<target>/debug/tablekeeper`).
pub fn bin_path() -> PathBuf {
    let exe = std::env::current_exe().expect("current test executable has a path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in <target>/<profile>/deps");
    let bin = profile_dir.join(format!("tablekeeper{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run the tests with `cargo test --workspace` so cargo builds the binary",
        bin.display()
    );
    bin
}

/// Root of the repository (for `config/` examples).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ sits in the repository root")
        .to_path_buf()
}

/// A `Command` for the real binary with a clean, test-controlled environment: every
/// `TABLEKEEPER_*` variable of the caller is removed so a developer's shell cannot change
/// what a test sees.
pub fn tablekeeper() -> Command {
    let mut cmd = Command::new(bin_path());
    for (key, _) in std::env::vars() {
        if key.starts_with("TABLEKEEPER_") {
            cmd.env_remove(key);
        }
    }
    cmd.env("NO_COLOR", "1");
    cmd
}

/// Runs the binary with `args` and returns its output.
pub fn run(args: &[&str]) -> Output {
    tablekeeper()
        .args(args)
        .output()
        .expect("tablekeeper binary runs")
}

/// `tablekeeper maintain --inventory INVENTORY --table TABLE --operation OPERATION`.
pub fn maintain(inventory: &Path, table: &str, operation: &str) -> Output {
    maintain_with(inventory, table, operation, &[])
}

/// [`maintain`] with more flags (`--dry-run`, `--cleanup-log`, ...).
pub fn maintain_with(inventory: &Path, table: &str, operation: &str, flags: &[&str]) -> Output {
    let inventory = inventory.to_str().expect("a UTF-8 path");
    let mut args = vec![
        "maintain",
        "--inventory",
        inventory,
        "--table",
        table,
        "--operation",
        operation,
    ];
    args.extend_from_slice(flags);
    run(&args)
}

/// [`maintain`] that must succeed: its JSON result.
pub fn maintained(inventory: &Path, table: &str, operation: &str) -> serde_json::Value {
    maintained_with(inventory, table, operation, &[])
}

/// [`maintain_with`] that must succeed: its JSON result.
pub fn maintained_with(
    inventory: &Path,
    table: &str,
    operation: &str,
    flags: &[&str],
) -> serde_json::Value {
    let out = maintain_with(inventory, table, operation, flags);
    assert!(
        out.status.success(),
        "{operation} of {table}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("maintain prints JSON")
}

/// Polls `check` until it returns `Some` or `timeout` passes.
pub fn wait_for<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A `tablekeeper run` process started by a test; killed when dropped.
#[derive(Debug)]
pub struct Daemon {
    child: Option<std::process::Child>,
    pub base_url: String,
    pub log_path: PathBuf,
    pub name: String,
}

impl Daemon {
    /// Starts `tablekeeper run` with the given `TABLEKEEPER_*` environment and a fresh
    /// loopback port. Its stderr (the log) goes to `<log_dir>/<name>.log`.
    pub fn start(name: &str, log_dir: &Path, env: &[(&str, String)]) -> anyhow::Result<Self> {
        let port = free_port()?;
        let log_path = log_dir.join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = tablekeeper();
        cmd.arg("run")
            .env("TABLEKEEPER_LISTEN", format!("127.0.0.1:{port}"))
            .env("TABLEKEEPER_REPLICA_ID", name)
            .env("RUST_LOG", "info")
            .stdout(std::process::Stdio::null())
            .stderr(log);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn()?;
        Ok(Self {
            child: Some(child),
            base_url: format!("http://127.0.0.1:{port}"),
            log_path,
            name: name.to_string(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(std::process::Child::id)
            .unwrap_or(0)
    }

    /// Sends a signal by name (`HUP`, `TERM`, `KILL`, ...).
    pub fn signal(&self, sig: &str) -> anyhow::Result<()> {
        // pid 0 would signal this test's own process group
        anyhow::ensure!(self.child.is_some(), "{} has already exited", self.name);
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()?;
        anyhow::ensure!(status.success(), "kill -{sig} {} failed", self.pid());
        Ok(())
    }

    /// SIGKILL straight from this process (no `kill` command in between, so the signal
    /// lands within microseconds of the decision), then reaps it.
    pub fn kill_now(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill()?;
            child.wait()?;
        }
        Ok(())
    }

    /// Waits for the process to exit and returns its exit code.
    pub fn wait_exit(&mut self, timeout: Duration) -> anyhow::Result<Option<i32>> {
        let child = self
            .child
            .as_mut()
            .ok_or_else(|| anyhow::anyhow!("already exited"))?;
        let status = wait_for(timeout, "daemon exit", || child.try_wait().ok().flatten())?;
        self.child = None;
        Ok(status.code())
    }

    /// The daemon's log so far (for assertion messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Polls `/readyz` until it answers 200.
    pub async fn wait_ready(&self, timeout: Duration) -> anyhow::Result<()> {
        let url = format!("{}/readyz", self.base_url);
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(r) = reqwest::get(&url).await {
                if r.status().as_u16() == 200 {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "{} not ready after {timeout:?}; log:\n{}",
                    self.name,
                    self.log()
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn metrics(&self) -> anyhow::Result<String> {
        Ok(reqwest::get(format!("{}/metrics", self.base_url))
            .await?
            .text()
            .await?)
    }

    /// `GET /api/v1/tables/{name}`: the table's view as this replica serves it.
    pub async fn table_view(&self, name: &str) -> anyhow::Result<serde_json::Value> {
        Ok(
            reqwest::get(format!("{}/api/v1/tables/{name}", self.base_url))
                .await?
                .json()
                .await?,
        )
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The logs of several daemons, for a failure message.
pub fn logs(daemons: &[Daemon]) -> String {
    daemons
        .iter()
        .map(|d| format!("==== {}\n{}", d.name, d.log()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// SIGTERM to every daemon still running, then each must exit 0 within `timeout`.
pub fn stop_all(daemons: &mut [Daemon], timeout: Duration) -> anyhow::Result<()> {
    for d in daemons.iter().filter(|d| d.child.is_some()) {
        d.signal("TERM")?;
    }
    for d in daemons.iter_mut().filter(|d| d.child.is_some()) {
        let code = d.wait_exit(timeout)?;
        anyhow::ensure!(
            code == Some(0),
            "{} exited with {code:?}; log:\n{}",
            d.name,
            d.log()
        );
    }
    Ok(())
}

/// A free loopback port (bound then released; the tiny race is acceptable in tests).
pub fn free_port() -> anyhow::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// The value of one sample in Prometheus text output: `name{labels}` where `labels` is
/// the exact label set in the exposition order, e.g. `table="a",operation="compact"`.
pub fn metric_value(text: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = if labels.is_empty() {
        format!("{name} ")
    } else {
        format!("{name}{{{labels}}} ")
    };
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}
