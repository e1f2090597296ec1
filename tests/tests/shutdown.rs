//! SIGTERM while tables are being loaded from an object store (moto's S3 server): the replica
//! waits for what it started (probes, ticks, workers) before the async runtime stops, exits
//! 0 and logs no panic, twenty times in a row at random moments. Cutting a load off was
//! reported to crash deltalake's kernel executor ("TokioMultiThreadExecutor has crashed:
//! RecvError") after "tablekeeper stopped"; this scenario did not reproduce that crash on
//! this machine with the binary from before the fix either, so it guards the clean exit
//! rather than proving the fix.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use deltalake::arrow::array::{Int64Array, RecordBatch};
use deltalake::arrow::datatypes::{DataType, Field, Schema};
use deltalake::protocol::SaveMode;
use rand::Rng;
use tablekeeper_delta::fixtures::peers::S3Server;
use tablekeeper_tests::Daemon;

/// Commits per table, and tables: the first load of each reads a checkpoint and the commits
/// after it from moto, and the schedule ticks of tables not probed yet load them at once.
const COMMITS: i64 = 45;
const TABLES: usize = 3;

async fn slow_table(uri: &str) {
    let url = url::Url::parse(uri).unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let mut table = deltalake::DeltaTableBuilder::from_url(url)
        .unwrap()
        .build()
        .unwrap();
    for i in 0..COMMITS {
        let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![i]))])
            .unwrap();
        table = table
            .write(vec![batch])
            .with_save_mode(SaveMode::Append)
            // checkpoints, as writers leave them: a load reads a checkpoint and the commits after
            .with_configuration([("delta.checkpointInterval", Some("20"))])
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_slow_table_load_exits_cleanly_every_time() {
    S3Server::shared().expect("moto S3 server");
    let run = uuid::Uuid::new_v4();
    let mut yaml = String::from(
        "defaults:\n  checkpoint: { schedule: \"* * * * * *\", max_commits_since_checkpoint: 100000 }\n  compaction: { schedule: \"* * * * * *\", min_small_files: 100000 }\ntables:\n",
    );
    for t in 0..TABLES {
        let uri = format!("s3://tablekeeper/slow-{run}-{t}");
        slow_table(&uri).await;
        yaml.push_str(&format!(
            "  - name: s3.slow{t}\n    path: \"{uri}\"\n    owner: o\n"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.yaml");
    std::fs::write(&inventory, yaml).unwrap();
    let mut rng = rand::rng();
    for round in 0..20 {
        let mut daemon = Daemon::start(
            &format!("round-{round}"),
            dir.path(),
            &[
                (
                    "TABLEKEEPER_DATABASE_URL",
                    format!(
                        "sqlite://{}",
                        dir.path().join(format!("r{round}.db")).display()
                    ),
                ),
                ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
                ("TABLEKEEPER_PROBE_INTERVAL", "60s".into()),
                ("TABLEKEEPER_SHUTDOWN_GRACE", "5s".into()),
            ],
        )
        .unwrap();
        daemon.wait_ready(Duration::from_secs(60)).await.unwrap();
        // the first probe round and every second's ticks load the tables
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..2500))).await;
        daemon.signal("TERM").unwrap();
        let code = daemon.wait_exit(Duration::from_secs(90)).unwrap();
        let log = daemon.log();
        assert_eq!(code, Some(0), "round {round}: exit {code:?}; log:\n{log}");
        assert!(
            !log.contains("panicked") && !log.contains("has crashed"),
            "round {round}: a panic at shutdown; log:\n{log}"
        );
        assert!(
            log.contains("tablekeeper stopped"),
            "round {round}; log:\n{log}"
        );
    }
}

/// A pull request that adds a thousand tables reaches a replica as a reload; SIGTERM right
/// after it starts the drain at once (within a second), and the added tables' first probes go
/// to the ordinary probe rounds instead of holding up the replica's signals one probe after
/// another. The tables are on moto's S3 server, at paths that hold no table, so each probe
/// costs a round trip and fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_starts_the_drain_at_once_after_a_reload_that_adds_a_thousand_tables() {
    S3Server::shared().expect("moto S3 server");
    let run = uuid::Uuid::new_v4();
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.yaml");
    let table = |i: usize| {
        format!("  - name: s3.added{i}\n    path: \"s3://tablekeeper/absent-{run}-{i}\"\n    owner: o\n")
    };
    let defaults = "defaults:\n  compaction: { schedule: \"0 0 1 1 *\" }\n  vacuum: { enabled: false }\n  checkpoint: { enabled: false }\ntables:\n";
    std::fs::write(&inventory, format!("{defaults}{}", table(0))).unwrap();
    let mut daemon = Daemon::start(
        "reload",
        dir.path(),
        &[
            (
                "TABLEKEEPER_DATABASE_URL",
                format!("sqlite://{}", dir.path().join("store.db").display()),
            ),
            ("TABLEKEEPER_INVENTORY", inventory.display().to_string()),
            ("TABLEKEEPER_SHUTDOWN_GRACE", "5s".into()),
        ],
    )
    .unwrap();
    daemon.wait_ready(Duration::from_secs(60)).await.unwrap();

    let thousand: String = (0..1000).map(table).collect();
    std::fs::write(&inventory, format!("{defaults}{thousand}")).unwrap();
    daemon.signal("HUP").unwrap();
    tablekeeper_tests::wait_for(Duration::from_secs(60), "the reload", || {
        daemon.log().contains("inventory reloaded").then_some(())
    })
    .unwrap();
    daemon.signal("TERM").unwrap();
    let signalled = std::time::Instant::now();
    tablekeeper_tests::wait_for(Duration::from_secs(120), "the drain", || {
        daemon.log().contains("shutting down").then_some(())
    })
    .unwrap();
    let answered = signalled.elapsed();
    let code = daemon.wait_exit(Duration::from_secs(90)).unwrap();
    let log = daemon.log();
    assert!(
        answered < Duration::from_secs(1),
        "SIGTERM answered after {answered:?}; log:\n{log}"
    );
    assert_eq!(code, Some(0), "exit {code:?}; log:\n{log}");
}
