//! Storage errors told as they are: an S3 server that refuses the credentials (a wrong or
//! rotated secret: 403 `InvalidAccessKeyId`) makes the table `unreadable`, not `unknown`.
//! `tablekeeper plan` says so naming the 403 and exits 3; the daemon counts the probe
//! failures as `unreadable`, and a real Prometheus scraping it with the shipped rules fires
//! `TablekeeperTableUnreadable` for the table's owner, not `TablekeeperStorageUnreachable`
//! (the alert of storage that stays silent, whose promtool test in deploy/prometheus holds
//! it back for 30 minutes of transient failures).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tablekeeper_delta::fixtures::peers::S3Server;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::wait_until;
use tablekeeper_tests::prometheus::Prometheus;
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
async fn refused_credentials_make_the_table_unreadable_and_page_its_owner() {
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

    let prometheus =
        Prometheus::start(dir.path(), &[daemon.base_url.trim_start_matches("http://")]).unwrap();
    wait_until(
        Duration::from_secs(90),
        "TablekeeperTableUnreadable firing for s3.events and its owner",
        || {
            prometheus.fires(
                "TablekeeperTableUnreadable",
                &[
                    ("table", "s3.events"),
                    ("owner", "data-platform"),
                    ("severity", "critical"),
                ],
            )
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; daemon log:\n{}", daemon.log()));
    let firing = prometheus.firing().await;
    assert!(
        !firing
            .iter()
            .any(|(name, _)| name == "TablekeeperStorageUnreachable"),
        "a refused credential is not silent storage: {firing:?}"
    );
    daemon.signal("TERM").unwrap();
    db.drop_db().await.unwrap();
}
