//! A real Prometheus for the tests: it loads the shipped alert rules (every `for:` shortened
//! to one second), scrapes the given replicas every second and answers which alerts fire.
//!
//! Needs `prometheus` on PATH (Debian's `prometheus` package, which also ships the
//! `promtool` the deployment checks use).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::{free_port, repo_root};

/// A running Prometheus; killed when dropped.
#[derive(Debug)]
pub struct Prometheus {
    child: Child,
    pub url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts Prometheus in `dir` (config, rules, TSDB and `prometheus.log` go there),
    /// scraping `targets` (`host:port`, job `tablekeeper`) and evaluating the shipped rules.
    pub fn start(dir: &Path, targets: &[&str]) -> Result<Self> {
        let rules = fast_rules(dir)?;
        let port = free_port()?;
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: tablekeeper\n    static_configs:\n      - targets: [{}]\n",
                rules.display(),
                targets.join(", ")
            ),
        )?;
        let log = std::fs::File::create(dir.join("prometheus.log"))?;
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("starting prometheus: install Debian's `prometheus` package")?;
        Ok(Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        })
    }

    /// Whether `alertname` fires now with every one of `labels` (name, value).
    pub async fn fires(&self, alertname: &str, labels: &[(&str, &str)]) -> bool {
        self.firing().await.iter().any(|(name, have)| {
            name == alertname && labels.iter().all(|(key, value)| have[*key] == *value)
        })
    }

    /// The alerts firing now, as (alertname, labels); empty while Prometheus is starting.
    pub async fn firing(&self) -> Vec<(String, Value)> {
        let Ok(response) = reqwest::get(format!("{}/api/v1/alerts", self.url)).await else {
            return Vec::new();
        };
        let body: Value = response.json().await.unwrap_or_default();
        body["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == "firing")
            .map(|a| {
                (
                    a["labels"]["alertname"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    a["labels"].clone(),
                )
            })
            .collect()
    }
}

/// The shipped rules (`deploy/prometheus/alerts.yaml`) with every `for:` shortened to one
/// second, written to `dir/alerts.yaml`.
fn fast_rules(dir: &Path) -> Result<PathBuf> {
    let shipped = repo_root().join("deploy/prometheus/alerts.yaml");
    let text = std::fs::read_to_string(&shipped)
        .with_context(|| format!("reading {}", shipped.display()))?;
    let fast: String = text
        .lines()
        .map(|line| match line.trim_start().strip_prefix("for: ") {
            Some(_) => format!("{}for: 1s", &line[..line.len() - line.trim_start().len()]),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let path = dir.join("alerts.yaml");
    std::fs::write(&path, fast)?;
    Ok(path)
}
