//! The independent peers the tests check tablekeeper against: python deltalake, a second
//! engine that reads (and writes) the same tables, and moto's S3 server, an S3-compatible
//! object store with conditional put. Both come from the virtualenv `scripts/test-env.sh`
//! builds (run on first use when missing). Nothing here is used by maintenance itself.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The repository root, where `scripts/test-env.sh` lives.
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The virtualenv's python: `TABLEKEEPER_TEST_PYTHON`, else the one `scripts/test-env.sh`
/// prints (it creates the venv the first time).
pub fn python() -> Result<PathBuf, String> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            if let Ok(path) = std::env::var("TABLEKEEPER_TEST_PYTHON") {
                return Ok(PathBuf::from(path));
            }
            let script = repo_root().join("scripts/test-env.sh");
            let out = Command::new("bash")
                .arg(&script)
                .stderr(Stdio::inherit())
                .output()
                .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "{} failed ({}): python deltalake is needed as the independent reader",
                    script.display(),
                    out.status
                ));
            }
            Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
        })
        .clone()
}

/// Runs `code` with the venv's python and `args`; its stdout, or the failure with stderr.
pub fn run_python(code: &str, args: &[&str]) -> Result<String, String> {
    let python = python()?;
    let out = Command::new(&python)
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "python failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// moto's server, writing one line per request it answers ("METHOD path?query", decoded)
/// to the file named by its second argument, so tests can count object-store requests.
const MOTO: &str = r#"
import sys, threading, urllib.parse
from werkzeug.serving import make_server
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication, MotoRequestHandler, create_backend_app)
moto = DomainDispatcherApplication(create_backend_app)
log = open(sys.argv[2], "a", buffering=1)
lock = threading.Lock()
def counted(environ, start_response):
    query = environ.get("QUERY_STRING", "")
    line = environ["REQUEST_METHOD"] + " " + environ.get("PATH_INFO", "")
    if query:
        line += "?" + query
    with lock:
        log.write(urllib.parse.unquote(line) + "\n")
    return moto(environ, start_response)
server = make_server("127.0.0.1", int(sys.argv[1]), counted, True,
                     request_handler=MotoRequestHandler)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
server.shutdown()
"#;

/// Prints the rows, then leaves without interpreter teardown: deltalake's runtime threads can
/// abort a normal exit ("terminate called without an active exception").
/// Reads through python deltalake's query engine, which applies deletion vectors (its pyarrow
/// dataset path refuses tables that have them).
const READ_ROWS: &str = r#"
import json, os, sys
import pyarrow
from deltalake import DeltaTable, QueryBuilder
uri, version = sys.argv[1], sys.argv[2]
table = DeltaTable(uri, version=int(version)) if version != "latest" else DeltaTable(uri)
result = QueryBuilder().register("t", table).execute("select * from t").read_all()
rows = pyarrow.table(result).to_pylist()
lines = sorted(json.dumps(row, sort_keys=True, default=str) for row in rows)
print(json.dumps(lines))
sys.stdout.flush()
os._exit(0)
"#;

/// Every row of the table at `version` (or the latest) as read by python deltalake, one
/// canonical JSON line per row (keys sorted), sorted: compare two reads of it for equality.
/// Storage settings come from the environment (`AWS_*` for S3), as for the daemon.
pub fn python_rows(uri: &str, version: Option<u64>) -> Result<Vec<String>, String> {
    let version = version.map_or_else(|| "latest".to_owned(), |v| v.to_string());
    let out = run_python(READ_ROWS, &[uri, &version])?;
    serde_json::from_str(out.trim()).map_err(|e| format!("python printed no row list: {e}: {out}"))
}

/// A moto S3 server on a free local port, stopped when dropped or when this process exits.
/// Its endpoint and dummy credentials go into the process environment (`AWS_ENDPOINT_URL`,
/// ...) so deltalake, python deltalake and child processes all reach it: one server per test
/// process ([`S3Server::shared`]).
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    pub endpoint: String,
    /// One line per request the server answered (see [`S3Server::requests`]).
    request_log: PathBuf,
}

impl S3Server {
    /// The process's server, started on first use, with bucket `tablekeeper`.
    pub fn shared() -> Result<&'static S3Server, String> {
        static SERVER: OnceLock<Result<S3Server, String>> = OnceLock::new();
        SERVER
            .get_or_init(|| S3Server::start("tablekeeper"))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Starts the server and creates `bucket`.
    pub fn start(bucket: &str) -> Result<S3Server, String> {
        let python = python()?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let request_log = std::env::temp_dir().join(format!(
            "tablekeeper-moto-{}-{port}.requests",
            std::process::id()
        ));
        // the server stops when its stdin closes, so it never outlives the test process
        let child = Command::new(&python)
            .arg("-c")
            .arg(MOTO)
            .arg(port.to_string())
            .arg(&request_log)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start moto: {e}"))?;
        let server = S3Server {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            request_log,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err("moto did not listen within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        for (key, value) in [
            ("AWS_ENDPOINT_URL", server.endpoint.as_str()),
            ("AWS_ALLOW_HTTP", "true"),
            ("AWS_ACCESS_KEY_ID", "tablekeeper"),
            ("AWS_SECRET_ACCESS_KEY", "tablekeeper"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ] {
            // deltalake reads S3 settings from the environment only (as in production)
            std::env::set_var(key, value);
        }
        run_python(
            "import boto3, sys; boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='x').create_bucket(Bucket=sys.argv[2])",
            &[&server.endpoint, bucket],
        )?;
        Ok(server)
    }
}

impl S3Server {
    /// The requests the server answered so far whose path or query (percent-decoded)
    /// mentions `key`, one "METHOD path?query" line each, oldest first: pass a table's key
    /// prefix to count what reading that table cost.
    pub fn requests(&self, key: &str) -> Result<Vec<String>, String> {
        let text = std::fs::read_to_string(&self.request_log)
            .map_err(|e| format!("cannot read {}: {e}", self.request_log.display()))?;
        Ok(text
            .lines()
            .filter(|line| line.contains(key))
            .map(str::to_owned)
            .collect())
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.request_log);
    }
}
