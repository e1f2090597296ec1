//! Storage errors told as they are: an S3 server that refuses the credentials (a wrong or
//! rotated secret: 403 `InvalidAccessKeyId`) makes the table `unreadable`, not `unknown`.
//! `tablekeeper plan` says so naming the 403 and exits 3; the daemon counts the probe
//! failures as `unreadable`, the kind `TablekeeperTableUnreadable` pages on (its promtool test
//! in deploy/prometheus fires from two of them within an hour).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tablekeeper_delta::fixtures::peers::S3Server;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::wait_until;
use tablekeeper_tests::{metric_value, tablekeeper, Daemon};

/// The environment of a replica whose S3 secret is wrong.
fn wrong_secret(server: &S3Server) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", server.endpoint.clone()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "AKIAROTATEDAWAY00000".into()),
        ("AWS_SECRET_ACCESS_KEY", "not-the-secret".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
    ]
}

fn inventory(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("inventory.yaml");
    std::fs::write(
        &path,
        "tables:\n  - name: s3.events\n    path: s3://lake/events\n    owner: data-platform\n",
    )
    .unwrap();
    path
}

#[test]
fn plan_with_a_wrong_secret_says_unreadable_naming_the_403_and_exits_3() {
    let server = S3Server::refusing_credentials().expect("moto checking credentials");
    let dir = tempfile::tempdir().unwrap();
    let out = tablekeeper()
        .args([
            "plan",
            "--inventory",
            inventory(dir.path()).to_str().unwrap(),
        ])
        .envs(wrong_secret(&server))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(stdout.contains("health: unreadable"), "{stdout}");
    assert!(
        stdout.contains("403 Forbidden"),
        "the store's own words: {stdout}"
    );
    assert!(stdout.contains("InvalidAccessKeyId"), "{stdout}");
    assert!(stderr.contains("s3.events"), "the table is named: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_counts_refused_credentials_as_unreadable() {
    let server = S3Server::refusing_credentials().expect("moto checking credentials");
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut env = wrong_secret(&server);
    env.extend([
        ("TABLEKEEPER_DATABASE_URL", db.url.clone()),
        (
            "TABLEKEEPER_INVENTORY",
            inventory(dir.path()).display().to_string(),
        ),
        ("TABLEKEEPER_PROBE_INTERVAL", "1s".to_owned()),
        ("TABLEKEEPER_MAX_PROBE_INTERVAL", "2s".to_owned()),
    ]);
    let daemon = Daemon::start("r1", dir.path(), &env).unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    let labels = "kind=\"unreadable\",table=\"s3.events\"";
    wait_until(
        Duration::from_secs(60),
        "two probes failing as unreadable (what the unreadable alert pages on)",
        || async {
            let m = daemon.metrics().await.unwrap_or_default();
            metric_value(&m, "tablekeeper_table_probe_failures_total", labels)
                .is_some_and(|n| n >= 2.0)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));
    let m = daemon.metrics().await.unwrap();
    assert_eq!(
        metric_value(
            &m,
            "tablekeeper_table_probe_failures_total",
            "kind=\"transient\",table=\"s3.events\""
        ),
        None,
        "a refused credential is not storage trouble that passes"
    );
    let view: serde_json::Value = daemon.table_view("s3.events").await.unwrap();
    assert_eq!(view["health"], "unreadable", "{view}");
    assert!(
        view["probe_error"]
            .as_str()
            .unwrap()
            .contains("InvalidAccessKeyId"),
        "{view}"
    );
    daemon.signal("TERM").unwrap();
    db.drop_db().await.unwrap();
}
