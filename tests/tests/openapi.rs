//! The HTTP API's OpenAPI 3.1 document against the real binary on a real Postgres with real
//! tables that have been compacted (so jobs, tasks, probes and history fill the responses):
//!
//! - `GET /api/v1/openapi.json` validates as OpenAPI 3.1 (openapi-spec-validator) and lists
//!   every route of the README's table;
//! - schemathesis (PyPI, in the test venv) calls every operation with generated requests,
//!   valid and invalid: no 5xx, and every response matches the document;
//! - every operation the document marks as needing the token refuses a missing or wrong
//!   one (401), and refuses everything when no token is configured (403); a body over the
//!   limit gets 413 with the JSON error body.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use tablekeeper_delta::fixtures::{self, peers, SmallFiles};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::setup::{daemon_env, InventoryFile, TableEntry, TOKEN};
use tablekeeper_tests::{logs, Daemon};

const TABLES: [&str; 2] = ["api.events", "api.orders"];

/// The routes of README "HTTP API" as the document writes them.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/"),
    ("get", "/tables/{name}"),
    ("get", "/costs"),
    ("get", "/metrics"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/api/v1/openapi.json"),
    ("get", "/api/v1/tables"),
    ("get", "/api/v1/tables/{name}"),
    ("post", "/api/v1/tables/{name}/jobs"),
    ("get", "/api/v1/tables/{name}/history"),
    ("post", "/api/v1/tables/{name}/pause"),
    ("post", "/api/v1/tables/{name}/resume"),
    ("get", "/api/v1/tables/{name}/pins"),
    ("post", "/api/v1/tables/{name}/pins"),
    ("delete", "/api/v1/tables/{name}/pins"),
    ("get", "/api/v1/jobs"),
    ("get", "/api/v1/jobs/{id}"),
    ("get", "/api/v1/operations"),
];

/// Validates `document` with openapi-spec-validator's OpenAPI 3.1 validator.
const VALIDATE: &str = r#"
import json, sys
from openapi_spec_validator import validate
from openapi_spec_validator.validation.validators import OpenAPIV31SpecValidator
validate(json.load(open(sys.argv[1])), cls=OpenAPIV31SpecValidator)
print("valid")
"#;

async fn tables(root: &Path) -> Vec<std::path::PathBuf> {
    let mut paths = Vec::new();
    for (i, name) in TABLES.iter().enumerate() {
        let path = root.join(name);
        let spec = SmallFiles {
            partitions: u32::try_from(i).unwrap() * 2,
            files_per_partition: 12,
            rows_per_file: 50,
            payload_bytes: 16,
        };
        fixtures::write_small_files(&path.to_string_lossy(), &spec)
            .await
            .unwrap();
        paths.push(path);
    }
    paths
}

async fn get_json(url: &str) -> Value {
    let response = reqwest::get(url).await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    response.json().await.unwrap()
}

/// Waits until a compaction of every table has succeeded.
async fn wait_compacted(daemon: &Daemon) {
    let url = format!("{}/api/v1/jobs?state=succeeded&limit=100", daemon.base_url);
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        let jobs = get_json(&url).await;
        let done = TABLES.iter().all(|t| {
            jobs["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|j| j["table_name"] == *t && j["operation"] == "compact")
        });
        if done {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no compaction of every table within 180 s; log:\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Each operation of the document: (method, path, operation).
fn operations(document: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            out.push((method.clone(), path.clone(), op.clone()));
        }
    }
    out
}

/// Every operation the document marks as needing the token, against `base_url`: the status
/// each gets with `token` (none: no header).
async fn mutating_statuses(
    document: &Value,
    base_url: &str,
    token: Option<&str>,
) -> Vec<(String, u16)> {
    let client = reqwest::Client::new();
    let mut out = Vec::new();
    for (method, path, op) in operations(document) {
        if op.get("security").is_none() {
            continue;
        }
        let url = format!("{base_url}{}", path.replace("{name}", TABLES[0]));
        let mut request = client
            .request(method.to_uppercase().parse().unwrap(), &url)
            .query(&[("version", "0")])
            .json(&serde_json::json!({ "operation": "compact" }));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let status = request.send().await.unwrap().status().as_u16();
        out.push((format!("{method} {path}"), status));
    }
    out
}

/// POSTs 17 KiB (over the 16 KiB limit) to every mutating operation with the right token.
async fn oversized_statuses(document: &Value, base_url: &str) -> Vec<(String, u16, Value)> {
    let client = reqwest::Client::new();
    let body = format!(
        r#"{{"operation": "compact", "padding": "{}"}}"#,
        "x".repeat(17 * 1024)
    );
    let mut out = Vec::new();
    for (method, path, op) in operations(document) {
        if op.get("security").is_none() || method == "delete" {
            continue;
        }
        let url = format!("{base_url}{}", path.replace("{name}", TABLES[0]));
        let response = client
            .post(&url)
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let json = response.json().await.unwrap_or(Value::Null);
        out.push((format!("{method} {path}"), status, json));
    }
    out
}

/// schemathesis against the daemon, with its configuration `config` (TOML) in `dir`.
fn run_schemathesis(base_url: &str, dir: &Path, config: &str) -> std::process::Output {
    let python = peers::python().unwrap();
    let schemathesis = python.with_file_name("schemathesis");
    let config_file = dir.join("schemathesis.toml");
    std::fs::write(&config_file, config).unwrap();
    Command::new(&schemathesis)
        .arg("--config-file")
        .arg(&config_file)
        .arg("run")
        .arg(format!("{base_url}/api/v1/openapi.json"))
        .args(["--checks", "not_a_server_error,response_schema_conformance"])
        .args(["--header", &format!("Authorization: Bearer {TOKEN}")])
        // bounded: 2 cores, and the same seed each run so a failure reproduces
        .args(["--max-examples", "30", "--seed", "55", "--workers", "1"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--request-timeout", "30", "--no-color"])
        .arg("--report-dir")
        .arg(dir.join("report"))
        .env("SCHEMATHESIS_TELEMETRY", "false")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", schemathesis.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_describes_every_route_and_the_daemon_keeps_to_it() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let paths = tables(&dir.path().join("tables")).await;
    let entries = TableEntry::plain(&TABLES, &paths);
    let defaults = "  compaction: { schedule: \"*/2 * * * * *\", min_small_files: 2 }\n";
    let inventory = InventoryFile::write(dir.path(), defaults, &entries).unwrap();
    let env = daemon_env(&db.url, &inventory.path, Duration::from_secs(10), 2);
    let daemon = Daemon::start("api", dir.path(), &env).unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    wait_compacted(&daemon).await;

    let document = get_json(&format!("{}/api/v1/openapi.json", daemon.base_url)).await;
    assert_eq!(document["openapi"], "3.1.0");
    let file = dir.path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec(&document).unwrap()).unwrap();
    let validated = peers::run_python(VALIDATE, &[&file.to_string_lossy()]);
    assert_eq!(
        validated.as_deref().map(str::trim),
        Ok("valid"),
        "{validated:?}"
    );
    let documented: Vec<(String, String)> = operations(&document)
        .into_iter()
        .map(|(m, p, _)| (m, p))
        .collect();
    for (method, path) in ROUTES {
        assert!(
            documented.contains(&((*method).to_owned(), (*path).to_owned())),
            "{method} {path} is not in the document"
        );
    }
    assert_eq!(documented.len(), ROUTES.len(), "{documented:?}");

    // the token: missing or wrong → 401 on every mutating operation
    for token in [None, Some("not-the-token")] {
        let statuses = mutating_statuses(&document, &daemon.base_url, token).await;
        assert_eq!(statuses.len(), 5, "{statuses:?}");
        assert!(
            statuses.iter().all(|(_, s)| *s == 401),
            "{token:?}: {statuses:?}"
        );
    }
    // bodies over 16 KiB → 413, the JSON error body
    let oversized = oversized_statuses(&document, &daemon.base_url).await;
    assert_eq!(oversized.len(), 4, "{oversized:?}");
    for (route, status, body) in &oversized {
        assert_eq!(*status, 413, "{route}: {body}");
        assert_eq!(body["status"], 413, "{route}: {body}");
    }

    // generated table names (nearly all unknown: 404s), then a real table's name in every
    // `{name}`, so the table routes answer from a real table, jobs and pins included
    let real_table = format!("[parameters]\n\"path.name\" = \"{}\"\n", TABLES[1]);
    for (run, config) in [("generated", String::new()), ("real", real_table)] {
        let dir = dir.path().join(format!("schemathesis-{run}"));
        std::fs::create_dir_all(&dir).unwrap();
        let out = run_schemathesis(&daemon.base_url, &dir, &config);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "schemathesis ({run} names) found problems:\n{stdout}\n{}\ndaemon log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            logs(std::slice::from_ref(&daemon))
        );
        eprintln!("schemathesis, {run} names:\n{stdout}");
    }

    // no token configured: every mutating operation is refused with 403
    let mut untokened_env = env.clone();
    untokened_env.retain(|(k, _)| *k != "TABLEKEEPER_ADMIN_TOKEN");
    let untokened = Daemon::start("untokened", dir.path(), &untokened_env).unwrap();
    untokened.wait_ready(Duration::from_secs(60)).await.unwrap();
    let statuses = mutating_statuses(&document, &untokened.base_url, Some(TOKEN)).await;
    assert!(statuses.iter().all(|(_, s)| *s == 403), "{statuses:?}");
    db.drop_db().await.unwrap();
}
