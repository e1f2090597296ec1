//! Pins added through the API, as deployed: two replicas on one Postgres. A pin posted to
//! one replica is listed by the other (`table_pins`), the VACUUM either replica runs keeps
//! the pinned version's files (python deltalake still reads it), and when one of them is
//! deleted by hand the restore drill counts the version as unrestorable on every replica
//! (`tablekeeper_table_unrestorable_versions`, what `TablekeeperVersionUnrestorable` reads)
//! and the API names the file. Removing the pin lets VACUUM reclaim the rest.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{json, Value};
use tablekeeper_delta::fixtures::peers::{python_rows, run_python};
use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::wait_until;
use tablekeeper_tests::setup::{
    daemon_env, first_added_file, trigger, InventoryFile, TableEntry, TOKEN, TWENTY_APPENDS,
};
use tablekeeper_tests::{metric_value, Daemon};

/// Triggers `operation` on table `t` through `base_url` and waits for its result (the job's
/// report).
async fn run_job(pool: &sqlx::PgPool, base_url: &str, operation: &str) -> Value {
    let id = trigger(base_url, "t", operation).await.unwrap();
    wait_until(
        Duration::from_secs(90),
        &format!("job {id} to finish"),
        || async {
            let (state, error): (String, Option<String>) =
                sqlx::query_as("SELECT state, error FROM jobs WHERE id = $1")
                    .bind(id)
                    .fetch_one(pool)
                    .await
                    .unwrap();
            assert_ne!(state, "failed", "job {id} failed: {error:?}");
            state == "succeeded"
        },
    )
    .await
    .unwrap();
    sqlx::query_scalar("SELECT result FROM jobs WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Waits until every replica exports `tablekeeper_table_unrestorable_versions{table="t"}` as
/// `expected` (`None`: no series).
async fn unrestorable_on_both(replicas: &[&Daemon], expected: Option<f64>) {
    for replica in replicas {
        wait_until(
            Duration::from_secs(60),
            "the drill's count on every replica",
            || async {
                let metrics = replica.metrics().await.unwrap();
                metric_value(
                    &metrics,
                    "tablekeeper_table_unrestorable_versions",
                    r#"table="t""#,
                ) == expected
            },
        )
        .await
        .unwrap();
    }
}

async fn pins_of(base_url: &str) -> Value {
    reqwest::get(format!("{base_url}/api/v1/tables/t/pins"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_pins_are_shared_kept_by_vacuum_and_drilled() {
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let uri = table.to_str().unwrap().to_owned();
    run_python(TWENTY_APPENDS, &[&uri]).unwrap();
    let pinned_rows = python_rows(&uri, Some(4)).unwrap();
    let latest_rows = python_rows(&uri, None).unwrap();
    let inventory = InventoryFile::write(
        dir.path(),
        "",
        &[TableEntry {
            name: "t",
            path: &table,
            extra: "    retention: { deleted_file_retention: 0s, log_retention: 0s, allow_short_retention: true }\n    maintenance:\n      compaction: { min_small_files: 2 }\n",
        }],
    )
    .unwrap();
    let mut env = daemon_env(&db.url, &inventory.path, Duration::from_secs(10), 1);
    env.push(("TABLEKEEPER_RESTORE_DRILL_EVERY", "1s".into()));
    let mut r1 = Daemon::start("r1", dir.path(), &env).unwrap();
    let mut r2 = Daemon::start("r2", dir.path(), &env).unwrap();
    r1.wait_ready(Duration::from_secs(60)).await.unwrap();
    r2.wait_ready(Duration::from_secs(60)).await.unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let client = reqwest::Client::new();
    let pins_url = format!("{}/api/v1/tables/t/pins", r1.base_url);
    let pin = json!({ "version": 4, "until": "2999-01-01T00:00:00Z", "reason": "model run 88" });

    let anonymous = client.post(&pins_url).json(&pin).send().await.unwrap();
    assert_eq!(
        anonymous.status().as_u16(),
        401,
        "mutating: bearer token needed"
    );
    let past = client
        .post(&pins_url)
        .bearer_auth(TOKEN)
        .json(&json!({ "version": 4, "until": "2001-01-01T00:00:00Z" }))
        .send()
        .await
        .unwrap();
    assert_eq!(past.status().as_u16(), 400);
    let added = client
        .post(&pins_url)
        .bearer_auth(TOKEN)
        .json(&pin)
        .send()
        .await
        .unwrap();
    assert_eq!(added.status().as_u16(), 201);
    let added: Value = added.json().await.unwrap();
    assert_eq!(
        (added["version"].clone(), added["created_by"].clone()),
        (json!(4), json!("api"))
    );

    // the other replica lists it: one truth in the job store
    let listed = pins_of(&r2.base_url).await;
    assert_eq!(listed["pins"][0]["version"], 4, "{listed}");
    assert_eq!(listed["pins"][0]["source"], "api", "{listed}");
    assert_eq!(listed["pins"][0]["expired"], false, "{listed}");

    run_job(&pool, &r1.base_url, "compact").await;
    let report = run_job(&pool, &r2.base_url, "vacuum").await;
    assert_eq!(
        report["kept"][0]["by"], "version 4 (model run 88)",
        "{report}"
    );
    assert_eq!(
        report["files_removed"], 15,
        "only the pinned version's 5 stay: {report}"
    );
    assert_eq!(python_rows(&uri, Some(4)).unwrap(), pinned_rows);
    assert_eq!(python_rows(&uri, None).unwrap(), latest_rows);

    // version 0's file (one of version 4's) deleted by hand
    let victim = first_added_file(&table).unwrap();
    std::fs::remove_file(table.join(&victim)).unwrap();
    unrestorable_on_both(&[&r1, &r2], Some(1.0)).await;
    let view = r2.table_view("t").await.unwrap();
    let owed = view["probe"]["restore_drill"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["reason"] == "pin")
        .cloned()
        .unwrap_or_else(|| panic!("{view}"));
    assert_eq!(owed["restorable"], false, "{owed}");
    assert_eq!(owed["missing_files"][0], victim.as_str(), "{owed}");

    // unpinned: the next VACUUM reclaims the rest, and the version is owed to no one
    let removed = client
        .delete(format!("{pins_url}?version=4"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(removed.status().as_u16(), 200);
    assert_eq!(pins_of(&r2.base_url).await["pins"], json!([]));
    let again = client
        .delete(format!("{pins_url}?version=4"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 404);
    let report = run_job(&pool, &r1.base_url, "vacuum").await;
    assert_eq!(
        report["files_removed"], 4,
        "the four left of version 4: {report}"
    );
    assert_eq!(python_rows(&uri, None).unwrap(), latest_rows, "no row lost");
    unrestorable_on_both(&[&r1, &r2], None).await;
    r1.signal("TERM").unwrap();
    r2.signal("TERM").unwrap();
    r1.wait_exit(Duration::from_secs(30)).unwrap();
    r2.wait_exit(Duration::from_secs(30)).unwrap();
}
