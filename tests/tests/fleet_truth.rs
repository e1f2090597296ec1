//! One fleet, one truth, end to end: one job per cron tick whichever replica fires it, a
//! replica restarted under its own name that starts from what it stored, storage trouble that
//! defers maintenance instead of refusing it, and operator commands that do what they say.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use tablekeeper_delta::fixtures::peers::{python_rows, S3Server};
use tablekeeper_delta::fixtures::{self, SmallFiles};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{count, wait_until};
use tablekeeper_tests::proxy::PgProxy;
use tablekeeper_tests::setup::trigger_with_token;
use tablekeeper_tests::{logs, metric_value, run, stop_all, Daemon};

const TOKEN: &str = "fleet-truth-token";

fn small(files: u32) -> SmallFiles {
    SmallFiles {
        partitions: 0,
        files_per_partition: files,
        rows_per_file: 10,
        payload_bytes: 8,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_make_exactly_one_job_per_tick() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("busy");
    let uri = table.to_str().unwrap().to_owned();
    fixtures::write_small_files(&uri, &small(2)).await.unwrap();
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "tables:\n  - name: t.busy\n    path: \"{uri}\"\n    owner: o\n    maintenance:\n      compaction: {{ enabled: false }}\n      vacuum: {{ enabled: false }}\n      checkpoint: {{ schedule: \"*/2 * * * * *\", max_commits_since_checkpoint: 1 }}\n"
        ),
    )
    .unwrap();
    let mut daemons: Vec<Daemon> = (1..=3)
        .map(|n| {
            Daemon::start(
                &format!("r{n}"),
                dir.path(),
                &[
                    ("TABLEKEEPER_DATABASE_URL", db.url.clone()),
                    ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
                    ("TABLEKEEPER_POLL_INTERVAL", "100ms".into()),
                    ("TABLEKEEPER_PROBE_INTERVAL", "1s".into()),
                    ("TABLEKEEPER_MAX_PROBE_INTERVAL", "4s".into()),
                ],
            )
            .unwrap()
        })
        .collect();
    for d in &daemons {
        d.wait_ready(Duration::from_secs(60)).await.unwrap();
    }
    // a writer commits all the time, so every tick needs a checkpoint
    let deadline = std::time::Instant::now() + Duration::from_secs(40);
    while std::time::Instant::now() < deadline {
        fixtures::write_small_files(&uri, &small(1)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    stop_all(&mut daemons, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\n{}", logs(&daemons)));
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    // every replica enqueues a tick's job within milliseconds of the tick (on even
    // seconds): jobs created in the same second belong to the same tick
    let doubled: Vec<(chrono::DateTime<chrono::Utc>, i64)> = sqlx::query_as(
        "SELECT date_trunc('second', created_at) AS tick, count(*) FROM jobs \
         WHERE \"trigger\" = 'schedule' GROUP BY tick HAVING count(*) > 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(
        doubled.is_empty(),
        "ticks with more than one job: {doubled:?}"
    );
    let ticks = count(
        &pool,
        "SELECT count(DISTINCT date_trunc('second', created_at)) FROM jobs WHERE \"trigger\" = 'schedule'",
    )
    .await;
    assert!(ticks >= 10, "only {ticks} ticks made jobs in 40 s");
    let replicas = count(
        &pool,
        "SELECT count(DISTINCT split_part(worker_id, '/', 1)) FROM jobs WHERE state = 'succeeded'",
    )
    .await;
    assert!(
        replicas >= 2,
        "the work was not shared: {replicas} replica(s) ran jobs"
    );
    pool.close().await;
    db.drop_db().await.unwrap();
}

/// `t.kept`'s view on `daemon` once `ready` holds for it; fails after a minute.
async fn view_when(
    daemon: &Daemon,
    what: &str,
    ready: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(view) = daemon.table_view("t.kept").await {
            if ready(&view) {
                return view;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A replica restarted under its own `replica_id` (a pod's container restarting, a systemd
/// unit on the same host) starts from the probes it stored before: the table's figures,
/// history and health are there at once, as they were, and the table is probed again when it
/// is due rather than read from scratch with its history empty while that read runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_restarted_under_its_own_name_starts_from_the_probes_it_stored() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("kept");
    let uri = table.to_str().unwrap().to_owned();
    for _ in 0..3 {
        fixtures::write_small_files(&uri, &small(2)).await.unwrap();
    }
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "tables:\n  - name: t.kept\n    path: \"{uri}\"\n    owner: o\n    maintenance:\n      compaction: {{ enabled: false }}\n      vacuum: {{ enabled: false }}\n      checkpoint: {{ enabled: false }}\n"
        ),
    )
    .unwrap();
    // a probe an hour apart: any probe after the restart is one the restart caused
    let env = [
        ("TABLEKEEPER_DATABASE_URL", db.url.clone()),
        ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
        ("TABLEKEEPER_PROBE_INTERVAL", "1h".into()),
        ("TABLEKEEPER_MAX_PROBE_INTERVAL", "1h".into()),
    ];
    let mut first = Daemon::start("r1", dir.path(), &env).unwrap();
    first.wait_ready(Duration::from_secs(60)).await.unwrap();
    let before = view_when(&first, "a complete probe", |view| {
        let probe = &view["probe"];
        probe["history_pending"] == false && probe["damage_check_pending"] == false
    })
    .await;
    assert!(
        before["probe"]["created_at"].is_string(),
        "the history was read: {before}"
    );
    first.signal("TERM").unwrap();
    assert_eq!(first.wait_exit(Duration::from_secs(60)).unwrap(), Some(0));

    let after_dir = dir.path().join("restarted");
    std::fs::create_dir(&after_dir).unwrap();
    let restarted = Daemon::start("r1", &after_dir, &env).unwrap();
    restarted.wait_ready(Duration::from_secs(60)).await.unwrap();
    let after = view_when(&restarted, "the table's state", |view| {
        !view["probed_at"].is_null()
    })
    .await;
    for field in ["probed_at", "health", "health_reasons", "probe_error"] {
        assert_eq!(
            after[field],
            before[field],
            "{field} changed across the restart\n{}",
            restarted.log()
        );
    }
    for field in [
        "version",
        "files",
        "created_at",
        "history_from_version",
        "last_commit_at",
        "history_pending",
    ] {
        assert_eq!(
            after["probe"][field],
            before["probe"][field],
            "probe.{field} changed across the restart\n{}",
            restarted.log()
        );
    }
    drop(restarted);
    db.drop_db().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_that_stops_answering_defers_maintenance_and_it_resumes() {
    let server = S3Server::shared().expect("moto S3 server");
    let uri = format!("s3://tablekeeper/transient-{}", uuid::Uuid::new_v4());
    fixtures::write_small_files(&uri, &small(6)).await.unwrap();
    let before = python_rows(&uri, None).unwrap();
    let upstream: std::net::SocketAddr = server
        .endpoint
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let proxy = PgProxy::start(upstream).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!(
            "tables:\n  - name: s3.flaky\n    path: \"{uri}\"\n    owner: o\n    maintenance:\n      compaction: {{ schedule: \"0 0 1 1 *\", min_small_files: 2 }}\n"
        ),
    )
    .unwrap();
    let daemon = Daemon::start(
        "r1",
        dir.path(),
        &[
            (
                "TABLEKEEPER_DATABASE_URL",
                format!("sqlite://{}", dir.path().join("tk.db").display()),
            ),
            ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
            ("TABLEKEEPER_PROBE_INTERVAL", "1s".into()),
            ("TABLEKEEPER_MAX_PROBE_INTERVAL", "4s".into()),
            ("TABLEKEEPER_POLL_INTERVAL", "200ms".into()),
            ("TABLEKEEPER_ADMIN_TOKEN", TOKEN.into()),
            (
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", proxy.port),
            ),
            (
                "TABLEKEEPER_STORAGE_OPTIONS",
                "timeout=2s,connect_timeout=1s,max_retries=1,retry_timeout=3s".into(),
            ),
        ],
    )
    .unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    let view = |daemon: &Daemon| {
        let url = format!("{}/api/v1/tables/s3.flaky", daemon.base_url);
        async move {
            reqwest::get(url)
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    };
    wait_until(Duration::from_secs(60), "the first probe", || async {
        view(&daemon).await["probe"]["version"].is_i64()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));

    proxy.freeze();
    wait_until(
        Duration::from_secs(120),
        "storage trouble to show",
        || async { view(&daemon).await["probe_error_kind"] == "transient" },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));
    let v = view(&daemon).await;
    assert_eq!(v["health"], "unknown", "{v}");
    assert!(
        v["probe"]["version"].is_i64(),
        "the last good figures stay: {v}"
    );
    let compact = v["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["operation"] == "compact")
        .unwrap()
        .clone();
    assert_eq!(compact["decision"]["decision"], "skip", "{compact}");
    assert!(
        compact["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("storage did not answer"),
        "{compact}"
    );
    let m = daemon.metrics().await.unwrap();
    assert!(
        metric_value(
            &m,
            "tablekeeper_table_probe_failures_total",
            "kind=\"transient\",table=\"s3.flaky\""
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{m}"
    );
    assert_eq!(
        metric_value(
            &m,
            "tablekeeper_table_probe_failures_total",
            "kind=\"unreadable\",table=\"s3.flaky\""
        ),
        None,
        "storage trouble is never counted as unreadable"
    );

    proxy.thaw();
    wait_until(
        Duration::from_secs(120),
        "storage to answer again",
        || async {
            let v = view(&daemon).await;
            v["probe_error"].is_null() && v["health"] != "unknown"
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));
    let job = trigger_with_token(&daemon.base_url, TOKEN, "s3.flaky", "compact")
        .await
        .unwrap();
    wait_until(Duration::from_secs(60), "the compaction", || async {
        let jobs: serde_json::Value = reqwest::get(format!(
            "{}/api/v1/jobs?table=s3.flaky&state=succeeded",
            daemon.base_url
        ))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["id"] == job)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));
    assert_eq!(python_rows(&uri, None).unwrap(), before, "rows changed");
    daemon.signal("TERM").unwrap();
}

#[test]
fn maintain_writes_a_checkpoint_when_asked_and_applies_thresholds_only_if_needed() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let uri = table.to_str().unwrap().to_owned();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // version 0 plus 4 more: 5 commits, far under the default threshold of 100
    runtime
        .block_on(fixtures::write_small_files(&uri, &small(5)))
        .unwrap();
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(
        &inventory,
        format!("tables:\n  - name: t\n    path: \"{uri}\"\n    owner: o\n"),
    )
    .unwrap();
    let maintain = |extra: &[&str]| {
        let mut args = vec![
            "maintain",
            "--inventory",
            inventory.to_str().unwrap(),
            "--table",
            "t",
            "--operation",
            "checkpoint",
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let skipped = maintain(&["--if-needed"]);
    assert!(
        skipped["skipped"]
            .as_str()
            .unwrap()
            .contains("under the threshold of 100"),
        "{skipped}"
    );
    assert!(!table.join("_delta_log/_last_checkpoint").exists());
    let done = maintain(&[]);
    assert_eq!(done["report"]["checkpoint_version"], 4, "{done}");
    assert!(table
        .join("_delta_log/00000000000000000004.checkpoint.parquet")
        .exists());
    assert_eq!(
        done["report"]["log_files_deleted"],
        serde_json::Value::Null,
        "no log cleanup without --cleanup-log: {done}"
    );
}
