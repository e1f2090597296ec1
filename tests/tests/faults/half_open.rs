//! Half-open connections: every connection a replica has open to Postgres goes silent for
//! good (a peer that vanished without a FIN, a dropped NAT entry) while new connections
//! work. sqlx has neither a query timeout nor TCP keepalive, so without tablekeeper's
//! `store_timeout` each worker would hang on its dead connection until the kernel gives
//! up (up to 15 minutes). With it, calls fail after the timeout, the pool opens new
//! connections, and the replica goes on maintaining tables.

use std::time::Duration;

use tablekeeper_store::testing::TestDatabase;
use tablekeeper_tests::jobs::{assert_no_overlap, count, wait_until};
use tablekeeper_tests::proxy::PgProxy;
use tablekeeper_tests::setup::{daemon_env, serial, InventoryFile, TableEntry};
use tablekeeper_tests::writer::ModelWriter;
use tablekeeper_tests::Daemon;

const DEFAULTS: &str =
    "  compaction: { schedule: \"* * * * * *\", target_file_size: 64MiB, min_small_files: 2 }
  zorder: { enabled: false }
  vacuum: { enabled: false }
  checkpoint: { schedule: \"*/2 * * * * *\", max_commits_since_checkpoint: 2 }
  max_attempts: 10
  timeout: 2m
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_whose_connections_go_silent_recovers() {
    let _serial = serial().await;
    let db = TestDatabase::create().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let mut writer = ModelWriter::create(&table, true, 2, 100).await.unwrap();
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
    let (proxy, proxied_url) = PgProxy::in_front_of(&db.url).await.unwrap();
    let mut env = daemon_env(&proxied_url, &inv.path, Duration::from_secs(4), 2);
    env.push(("TABLEKEEPER_STORE_TIMEOUT", "3s".to_string()));
    let r1 = Daemon::start("r1", dir.path(), &env).unwrap();
    r1.wait_ready(Duration::from_secs(60)).await.unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let succeeded = "SELECT count(*) FROM jobs WHERE state = 'succeeded' AND worker_id LIKE 'r1/%'";
    for _ in 0..10 {
        writer.append(20).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_until(Duration::from_secs(60), "r1 to work", || async {
        count(&pool, succeeded).await >= 2
    })
    .await
    .unwrap();

    proxy.cut_existing();
    let before = count(&pool, succeeded).await;
    // Small files keep arriving; r1 must get back to compacting them.
    let mut rounds = 0;
    loop {
        writer.append(20).await.unwrap();
        rounds += 1;
        if count(&pool, succeeded).await >= before + 3 {
            break;
        }
        assert!(
            rounds < 600,
            "r1 did no work for 120 s after its connections went silent; log:\n{}",
            r1.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        r1.log().contains("no answer within"),
        "no call timed out: the cut did not hit a call in flight; log:\n{}",
        r1.log()
    );
    wait_until(Duration::from_secs(30), "/readyz 200", || async {
        reqwest::get(format!("{}/readyz", r1.base_url))
            .await
            .is_ok_and(|r| r.status().as_u16() == 200)
    })
    .await
    .unwrap();
    writer.check().await.unwrap();
    assert_no_overlap(&pool).await.unwrap();
    pool.close().await;
    drop((r1, proxy));
    db.drop_db().await.unwrap();
}
