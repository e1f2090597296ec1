//! A throwaway Postgres cluster of a test's own (initdb + pg_ctl from the machine's
//! PostgreSQL installation), for tests that stop and restart the server: the shared test
//! server must never be restarted under other tests.
//!
//! Runs the server as the `postgres` OS user when the tests run as root (initdb refuses
//! root), listening on a free loopback port with trust auth.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A private Postgres server; stopped and deleted when dropped.
#[derive(Debug)]
pub struct TempCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    pub port: u16,
    /// `postgres://postgres@127.0.0.1:<port>/postgres`.
    pub url: String,
}

/// Directory holding `initdb` and `pg_ctl`: `$PG_BIN`, else the newest under
/// `/usr/lib/postgresql/*/bin`, else whatever `pg_config --bindir` says.
fn pg_bin() -> anyhow::Result<PathBuf> {
    if let Ok(dir) = std::env::var("PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    candidates.sort();
    if let Some(dir) = candidates.pop() {
        return Ok(dir);
    }
    let out = Command::new("pg_config").arg("--bindir").output()?;
    anyhow::ensure!(
        out.status.success(),
        "no PostgreSQL binaries found: install postgresql or set PG_BIN to the directory holding initdb and pg_ctl"
    );
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0\n"))
        .unwrap_or(false)
}

impl TempCluster {
    /// Initialises and starts a new cluster.
    pub fn start() -> anyhow::Result<Self> {
        let bin = pg_bin()?;
        let dir = tempfile::Builder::new().prefix("tk-pg-").tempdir()?;
        if is_root() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()?;
            anyhow::ensure!(status.success(), "chown of the cluster directory failed");
        }
        let port = crate::free_port()?;
        let cluster = Self {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            dir,
            bin,
            port,
        };
        cluster.run(
            "initdb",
            &[
                "-D",
                &cluster.data_dir().display().to_string(),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
            ],
        )?;
        cluster.pg_ctl_start()?;
        Ok(cluster)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_file(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// Runs a PostgreSQL tool, as `postgres` when we are root.
    fn run(&self, tool: &str, args: &[&str]) -> anyhow::Result<()> {
        let exe = self.bin.join(tool);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let out = cmd.args(args).current_dir(self.dir.path()).output()?;
        anyhow::ensure!(
            out.status.success(),
            "{tool} {args:?} failed: {}{}\nserver log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.log_file()).unwrap_or_default()
        );
        Ok(())
    }

    fn pg_ctl_start(&self) -> anyhow::Result<()> {
        let options = format!(
            "-c port={} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data_dir().display().to_string(),
                "-l",
                &self.log_file().display().to_string(),
                "-o",
                &options,
                "-w",
                "start",
            ],
        )
    }

    /// Stops the server (`-m fast`: open connections are cut, like a restart by an operator).
    pub fn stop(&self) -> anyhow::Result<()> {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data_dir().display().to_string(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        )
    }

    /// Starts the server again after [`TempCluster::stop`].
    pub fn restart_after_stop(&self) -> anyhow::Result<()> {
        self.pg_ctl_start()
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
