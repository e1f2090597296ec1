//! Bad input from outside: malformed, oversized and hostile API requests get a 4xx and
//! leave the daemon healthy; inventory entries with odd characters are refused with a
//! located error (names) or handled (paths with spaces, unicode and `%`).

use std::time::Duration;

use tablekeeper_delta::fixtures::SmallFiles;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::setup::{
    daemon_env, rows, serial, small_file_table, InventoryFile, TableEntry, TOKEN,
};
use tablekeeper_tests::{run, Daemon};

const DEFAULTS: &str =
    "  compaction: { schedule: \"0 0 1 1 *\", target_file_size: 64MiB, min_small_files: 2 }
  max_attempts: 3
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_api_requests_get_4xx() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    small_file_table(
        &table,
        &SmallFiles {
            partitions: 0,
            files_per_partition: 2,
            ..SmallFiles::default()
        },
    )
    .await
    .unwrap();
    let inv = InventoryFile::write(
        dir.path(),
        DEFAULTS,
        &[TableEntry {
            name: "faults.t",
            path: &table,
            extra: "",
        }],
    )
    .unwrap();
    let daemon = Daemon::start(
        "r1",
        dir.path(),
        &daemon_env(&db.url, &inv.path, Duration::from_secs(10), 1),
    )
    .unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    let base = &daemon.base_url;
    let client = reqwest::Client::new();
    let jobs = format!("{base}/api/v1/tables/faults.t/jobs");
    let post = |body: Vec<u8>, content_type: &'static str| {
        client
            .post(&jobs)
            .bearer_auth(TOKEN)
            .header("content-type", content_type)
            .body(body)
    };
    let json = "application/json";
    let cases: Vec<(&str, reqwest::RequestBuilder, u16)> = vec![
        ("1 MiB body", post(vec![b' '; 1 << 20], json), 413),
        ("invalid JSON", post(b"{\"operation\":".to_vec(), json), 400),
        ("JSON array", post(b"[1,2,3]".to_vec(), json), 400),
        (
            "deep nesting",
            post([b"[".repeat(5000), b"]".repeat(5000)].concat(), json),
            400,
        ),
        (
            "unknown field",
            post(br#"{"operation":"compact","force":true}"#.to_vec(), json),
            400,
        ),
        (
            "unknown operation",
            post(br#"{"operation":"drop"}"#.to_vec(), json),
            400,
        ),
        (
            "wrong type",
            post(br#"{"operation":42}"#.to_vec(), json),
            400,
        ),
        ("not UTF-8", post(vec![0xff, 0xfe, 0x00, 0x7b], json), 400),
        (
            "wrong content type",
            post(br#"{"operation":"compact"}"#.to_vec(), "text/plain"),
            400,
        ),
        (
            "no body",
            client
                .post(&jobs)
                .bearer_auth(TOKEN)
                .header("content-type", json),
            400,
        ),
        (
            "huge token",
            client
                .post(&jobs)
                .bearer_auth("x".repeat(8000))
                .json(&serde_json::json!({"operation":"compact"})),
            401,
        ),
        (
            "no token",
            client
                .post(&jobs)
                .json(&serde_json::json!({"operation":"compact"})),
            401,
        ),
        (
            "unknown table",
            client
                .post(format!("{base}/api/v1/tables/nope/jobs"))
                .bearer_auth(TOKEN)
                .json(&serde_json::json!({"operation":"compact"})),
            404,
        ),
        (
            "traversal",
            client.get(format!("{base}/api/v1/tables/..%2F..%2Fetc%2Fpasswd")),
            404,
        ),
        (
            "NUL in name",
            client.get(format!("{base}/api/v1/tables/a%00b")),
            404,
        ),
        (
            "unicode name",
            client.get(format!("{base}/api/v1/tables/t%C3%A4ble")),
            404,
        ),
        (
            "long name",
            client.get(format!("{base}/api/v1/tables/{}", "a".repeat(10_000))),
            404,
        ),
        (
            "bad limit",
            client.get(format!("{base}/api/v1/jobs?limit=-1")),
            400,
        ),
        (
            "huge limit",
            client.get(format!("{base}/api/v1/jobs?limit=99999999999999999999")),
            400,
        ),
        (
            "bad state",
            client.get(format!("{base}/api/v1/jobs?state=exploded")),
            400,
        ),
        (
            "wrong method",
            client.delete(format!("{base}/api/v1/tables")),
            405,
        ),
        (
            "unknown route",
            client.get(format!("{base}/api/v2/everything")),
            404,
        ),
        (
            "pause unknown",
            client
                .post(format!("{base}/api/v1/tables/nope/pause"))
                .bearer_auth(TOKEN),
            404,
        ),
    ];
    let mut wrong = Vec::new();
    for (what, request, expected) in cases {
        let status = match request.send().await {
            Ok(response) => response.status().as_u16(),
            // The server may answer 413 and close before the client has sent the whole
            // oversized body; the client then sees the connection closed. Refused either way.
            Err(e) if expected == 413 && e.is_request() => 413,
            Err(e) => panic!("{what}: {e}"),
        };
        if status != expected {
            wrong.push(format!("{what}: {status}, expected {expected}"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    let health = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(health.status().as_u16(), 200);
    assert!(!daemon.log().contains("panicked"), "{}", daemon.log());
    // Nothing was enqueued by any of it.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(jobs, 0);
    pool.close().await;
    drop(daemon);
    db.drop_db().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_names_are_refused_and_odd_paths_are_maintained() {
    let _serial = serial().await;
    let dir = tempfile::tempdir().unwrap();
    // Names become metric labels and log fields: anything but [A-Za-z0-9_.-] is refused,
    // located by file, line and the offending character.
    for (name, shown) in [
        ("\"with space\"", "' '"),
        ("\"tâble\"", "'â'"),
        ("\"a/b\"", "'/'"),
        ("\"x{y}\"", "'{'"),
        ("\"a;b\"", "';'"),
    ] {
        let file = dir.path().join("names.yaml");
        std::fs::write(
            &file,
            format!("tables:\n  - name: {name}\n    path: /data/t\n    owner: team\n"),
        )
        .unwrap();
        let out = run(&["validate", &file.to_string_lossy()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains("names.yaml:2:"),
            "{name}: not located: {stderr}"
        );
        assert!(
            stderr.contains(shown),
            "{name}: does not show {shown}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }

    // deltalake would decode `%41` in a local path to `A`: refused, located, explained.
    let file = dir.path().join("percent.yaml");
    std::fs::write(
        &file,
        "tables:\n  - name: pct\n    path: /data/a%41\n    owner: team\n",
    )
    .unwrap();
    let out = run(&["validate", &file.to_string_lossy()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("percent.yaml:3:") && stderr.contains("`%`"),
        "{stderr}"
    );

    // A path with spaces, unicode and `#` is a path like any other.
    let table = dir.path().join("odd dir ü #1");
    let before = small_file_table(&table, &SmallFiles::default())
        .await
        .unwrap();
    let inv = InventoryFile::write(
        dir.path(),
        DEFAULTS,
        &[TableEntry {
            name: "odd.path",
            path: &table,
            extra: "",
        }],
    )
    .unwrap();
    let inventory = inv.path.to_string_lossy().into_owned();
    let out = run(&["validate", &inventory]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for op in ["compact", "checkpoint"] {
        let out = run(&[
            "maintain",
            "--inventory",
            &inventory,
            "--table",
            "odd.path",
            "--operation",
            op,
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{op}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(rows(&table).await.unwrap(), before);
    assert!(tablekeeper_tests::setup::parquet_on_disk(&table).len() > 2);
    let active = tablekeeper_tests::setup::active_paths(&table)
        .await
        .unwrap();
    assert!(active.len() < 10, "not compacted: {} files", active.len());
}
