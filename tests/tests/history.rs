//! History outlives the log, end to end, on both stores: the daemon copies every commit of
//! a table with a one-day log retention into `table_commits`, a checkpoint job then cleans
//! the expired commits out of `_delta_log` (only those already copied), every version inside
//! the window still loads, and `GET /api/v1/tables/{name}/history` still lists every commit
//! since version 0, paged newest first. A replica on a fresh store that starts after the
//! cleanup records what is left and says where the history is incomplete.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use deltalake::arrow::array::{Int64Array, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::protocol::SaveMode;
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::wait_until;
use tablekeeper_tests::Daemon;

const TOKEN: &str = "history-token";

/// 13 commits (versions 0..=12), checkpoints at 3, 7 and 11; commits 3 days apart, the last
/// three today, with a one-day log retention on the table.
async fn old_table(root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    let url = url::Url::from_directory_path(root).unwrap();
    let schema = std::sync::Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    for i in 0..13i64 {
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![std::sync::Arc::new(Int64Array::from(vec![
                i * 10,
                i * 10 + 1,
            ]))],
        )
        .unwrap();
        let table = if i == 0 {
            deltalake::DeltaTableBuilder::from_url(url.clone())
                .unwrap()
                .build()
                .unwrap()
        } else {
            deltalake::open_table(url.clone()).await.unwrap()
        };
        table
            .write(vec![batch])
            .with_save_mode(SaveMode::Append)
            .with_configuration([
                ("delta.checkpointInterval", Some("4")),
                ("delta.logRetentionDuration", Some("interval 1 day")),
            ])
            .await
            .unwrap();
    }
    tablekeeper_delta::fixtures::aged::backdate(root, |v| if v >= 10 { 0 } else { (12 - v) * 3 });
}

fn inventory(dir: &Path, table: &Path) -> std::path::PathBuf {
    let path = dir.join("inventory.yaml");
    std::fs::write(
        &path,
        format!(
            "defaults:\n  compaction: {{ enabled: false }}\n  vacuum: {{ enabled: false }}\n  checkpoint: {{ schedule: \"0 0 1 1 *\" }}\ntables:\n  - name: h.events\n    path: \"{}\"\n    owner: audit\n    retention: {{ log_retention: 1d, deleted_file_retention: 1d, allow_short_retention: true }}\n",
            table.display()
        ),
    )
    .unwrap();
    path
}

async fn start(dir: &Path, name: &str, database_url: &str, inventory: &Path) -> Daemon {
    let daemon = Daemon::start(
        name,
        dir,
        &[
            ("TABLEKEEPER_DATABASE_URL", database_url.to_owned()),
            ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
            ("TABLEKEEPER_PROBE_INTERVAL", "1s".into()),
            ("TABLEKEEPER_MAX_PROBE_INTERVAL", "4s".into()),
            ("TABLEKEEPER_POLL_INTERVAL", "200ms".into()),
            ("TABLEKEEPER_ADMIN_TOKEN", TOKEN.into()),
        ],
    )
    .unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
    daemon
}

async fn get(daemon: &Daemon, path: &str) -> (u16, serde_json::Value) {
    let response = reqwest::get(format!("{}{path}", daemon.base_url))
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or_default())
}

fn versions(body: &serde_json::Value) -> Vec<i64> {
    body["commits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["version"].as_i64().unwrap())
        .collect()
}

async fn job_result(daemon: &Daemon, job: i64) -> serde_json::Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, body) = get(daemon, "/api/v1/jobs?table=h.events&limit=10").await;
        let found = body["jobs"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|j| j["id"] == job && j["state"] == "succeeded");
        if let Some(j) = found {
            return j["result"].clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the checkpoint job did not succeed: {body}; log:\n{}",
            daemon.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn history_outlives_the_log(first_store: String, second_store: String) {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("events");
    old_table(&table).await;
    let inventory = inventory(dir.path(), &table);

    let daemon = start(dir.path(), "r1", &first_store, &inventory).await;
    wait_until(Duration::from_secs(60), "every commit recorded", || async {
        versions(&get(&daemon, "/api/v1/tables/h.events/history").await.1).len() == 13
    })
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", daemon.log()));

    let job = tablekeeper_tests::setup::trigger_with_token(
        &daemon.base_url,
        TOKEN,
        "h.events",
        "checkpoint",
    )
    .await
    .unwrap();
    let result = job_result(&daemon, job).await;
    // one commit since the checkpoint at 11, far under the threshold of 100: a manual trigger
    // checkpoints anyway
    assert_eq!(result["checkpoint_version"], 12, "{result}");
    let deleted = result["log_files_deleted"].as_u64().unwrap();
    assert!(deleted >= 8, "{result}");
    let log = table.join("_delta_log");
    assert!(!log.join(format!("{:020}.json", 0)).exists());
    assert!(!log.join(format!("{:020}.json", 6)).exists());
    assert!(log.join(format!("{:020}.checkpoint.parquet", 7)).exists());
    // every version inside the window (from the checkpoint before it on) still loads
    let url = url::Url::from_directory_path(&table).unwrap();
    for v in 7..=12 {
        deltalake::DeltaTableBuilder::from_url(url.clone())
            .unwrap()
            .with_version(v)
            .load()
            .await
            .unwrap_or_else(|e| panic!("version {v}: {e}"));
    }

    // the history route still reaches version 0, newest first, in pages
    let (status, all) = get(&daemon, "/api/v1/tables/h.events/history?limit=1000").await;
    assert_eq!(status, 200, "{all}");
    assert_eq!(all["table"], "h.events");
    assert_eq!(versions(&all), (0..=12).rev().collect::<Vec<_>>());
    assert!(all["gaps"].as_array().unwrap().is_empty(), "{all}");
    let first = &all["commits"][12];
    assert_eq!(first["operation"], "WRITE", "{first}");
    let when = chrono::DateTime::parse_from_rfc3339(first["timestamp"].as_str().unwrap()).unwrap();
    assert!(
        when < chrono::Utc::now() - chrono::Duration::days(30),
        "{first}"
    );
    for key in [
        "operation_parameters",
        "operation_metrics",
        "engine_info",
        "user_name",
        "is_blind_append",
    ] {
        assert!(first.get(key).is_some(), "{key} missing: {first}");
    }
    let (_, page) = get(&daemon, "/api/v1/tables/h.events/history?limit=5").await;
    assert_eq!(versions(&page), [12, 11, 10, 9, 8]);
    let (_, older) = get(&daemon, "/api/v1/tables/h.events/history?limit=5&before=8").await;
    assert_eq!(versions(&older), [7, 6, 5, 4, 3]);
    for bad in [
        "limit=0",
        "limit=1001",
        "limit=ten",
        "before=-1",
        "before=x",
    ] {
        let (status, body) = get(&daemon, &format!("/api/v1/tables/h.events/history?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
    assert_eq!(get(&daemon, "/api/v1/tables/nope/history").await.0, 404);
    daemon.signal("TERM").unwrap();

    // a replica on another store, started after the cleanup: what is left, and the gap
    let late = start(dir.path(), "late", &second_store, &inventory).await;
    wait_until(
        Duration::from_secs(60),
        "the remaining commits recorded",
        || async { versions(&get(&late, "/api/v1/tables/h.events/history").await.1).len() == 6 },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}; log:\n{}", late.log()));
    let (_, body) = get(&late, "/api/v1/tables/h.events/history").await;
    assert_eq!(versions(&body), (7..=12).rev().collect::<Vec<_>>());
    assert_eq!(
        body["gaps"],
        serde_json::json!([{ "from_version": 0, "to_version": 6 }])
    );
    late.signal("TERM").unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_outlives_the_log_on_postgres() {
    let first = TestDatabase::create().await.unwrap();
    let second = TestDatabase::create().await.unwrap();
    history_outlives_the_log(first.url.clone(), second.url.clone()).await;
    first.drop_db().await.unwrap();
    second.drop_db().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_outlives_the_log_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    history_outlives_the_log(
        format!("sqlite://{}", dir.path().join("first.db").display()),
        format!("sqlite://{}", dir.path().join("second.db").display()),
    )
    .await;
}
