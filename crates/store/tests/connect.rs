//! Opening stores: URL schemes, clear errors for bad URLs, retryable errors when the
//! database is unreachable, recovery after the server drops our sessions, SQLite file
//! creation and WAL mode, and the observer hook.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::{Connection, PgConnection, SqlitePool};
use tablekeeper_store::testing::{base_url, TestDatabase};
use tablekeeper_store::{
    connect, Backend, JobId, JobState, NewJob, Operation, StoreError, StoreObserver, StoreOp,
    StoreOptions, Trigger,
};

fn quick() -> StoreOptions {
    StoreOptions {
        acquire_timeout: Duration::from_secs(1),
        ..StoreOptions::default()
    }
}

#[tokio::test]
async fn unknown_scheme_is_a_config_error_that_hides_the_password() {
    let err = connect("mysql://tk:hunter2@db/tk", quick())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Config { .. }), "{err}");
    assert!(!err.is_retryable());
    let text = err.to_string();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        text.contains("postgres://") && text.contains("sqlite://"),
        "{text}"
    );
}

#[tokio::test]
async fn missing_database_is_a_config_error() {
    let mut url = url::Url::parse(&base_url()).unwrap();
    url.set_path(&format!("/tk_missing_{}", uuid::Uuid::new_v4().simple()));
    let err = connect(url.as_str(), quick()).await.unwrap_err();
    assert!(matches!(err, StoreError::Config { .. }), "{err}");
    assert!(err.to_string().contains("does not exist"), "{err}");
}

#[tokio::test]
async fn unreachable_postgres_is_unavailable_and_retryable() {
    // Port 1 on localhost: nothing listens there.
    let url = "postgres://postgres@127.0.0.1:1/tablekeeper";
    let started = Instant::now();
    let err = connect(url, quick()).await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "gave up after {:?}",
        started.elapsed()
    );

    // Lazily: the store opens, and ping reports the outage.
    let lazy = StoreOptions {
        connect_lazily: true,
        ..quick()
    };
    let store = connect(url, lazy).await.unwrap();
    let err = store.ping().await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
}

#[tokio::test]
async fn pool_recovers_when_the_server_drops_its_sessions() {
    let db = TestDatabase::create().await.unwrap();
    let store = db.connect_store_with(quick()).await.unwrap();
    store
        .enqueue(NewJob::new("a", Operation::Compact, Trigger::Schedule))
        .await
        .unwrap();

    // What a database restart does to open connections.
    let mut admin = PgConnection::connect(&base_url()).await.unwrap();
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(&db.name)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(!killed.is_empty(), "the store had no session to kill");
    admin.close().await.unwrap();

    // Stale pooled connections are tested before use and replaced.
    store.ping().await.unwrap();
    let counts = store.counts_by_state().await.unwrap();
    assert_eq!(counts[&JobState::Queued], 1);
    store.close().await;
    db.drop_db().await.unwrap();
}

#[tokio::test]
async fn sqlite_file_and_directory_are_created_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/tk.db");
    let url = format!("sqlite://{}", path.display());
    let store = connect(&url, quick()).await.unwrap();
    assert_eq!(store.backend(), Backend::Sqlite);
    store.migrate().await.unwrap();
    assert!(path.exists());
    let pool = SqlitePool::connect(&url).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    pool.close().await;
    store.close().await;
}

#[tokio::test]
async fn sqlite_in_memory_is_one_database_for_the_whole_pool() {
    let store = connect("sqlite::memory:", StoreOptions::default())
        .await
        .unwrap();
    store.migrate().await.unwrap();
    // Concurrent calls would open separate empty databases if the pool had more than
    // one connection.
    let calls = (0..8).map(|i| {
        let store = store.clone();
        async move {
            store
                .enqueue(NewJob::new(
                    format!("t{i}"),
                    Operation::Vacuum,
                    Trigger::Manual,
                ))
                .await
                .unwrap()
        }
    });
    futures::future::join_all(calls).await;
    assert_eq!(store.counts_by_state().await.unwrap()[&JobState::Queued], 8);
}

#[tokio::test]
async fn unusable_sqlite_path_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, b"not a directory").unwrap();
    let url = format!("sqlite://{}/sub/tk.db", blocker.display());
    let err = connect(&url, quick()).await.unwrap_err();
    assert!(matches!(err, StoreError::Config { .. }), "{err}");
    assert!(err.to_string().contains("cannot create directory"), "{err}");
}

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<(StoreOp, bool)>>);

impl StoreObserver for Recorder {
    fn observe(
        &self,
        backend: Backend,
        op: StoreOp,
        _elapsed: Duration,
        error: Option<&StoreError>,
    ) {
        assert_eq!(backend, Backend::Sqlite);
        self.0.lock().unwrap().push((op, error.is_some()));
    }
}

#[tokio::test]
async fn observer_sees_every_call_and_its_errors() {
    let recorder = Arc::new(Recorder::default());
    let opts = StoreOptions {
        observer: Some(recorder.clone()),
        ..StoreOptions::default()
    };
    let store = connect("sqlite::memory:", opts).await.unwrap();
    store.migrate().await.unwrap();
    store
        .enqueue(NewJob::new("a", Operation::Compact, Trigger::Schedule))
        .await
        .unwrap();
    store.claim("w", Duration::from_secs(5)).await.unwrap();
    assert!(store.cancel(JobId(42)).await.is_err());
    let seen = recorder.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            (StoreOp::Migrate, false),
            (StoreOp::Enqueue, false),
            (StoreOp::Claim, false),
            (StoreOp::Cancel, true),
        ]
    );
}

#[tokio::test]
async fn plain_sql_sees_the_contract_columns() {
    // Operators query the table by the names in DESIGN.md, in its order; later migrations
    // only append columns.
    let harness = common::Harness::postgres().await;
    let mut conn = PgConnection::connect(&harness.url).await.unwrap();
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns \
         WHERE table_name = 'jobs' ORDER BY ordinal_position",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        columns,
        [
            "id",
            "table_name",
            "operation",
            "concurrency_key",
            "state",
            "trigger",
            "priority",
            "run_at",
            "attempt",
            "max_attempts",
            "worker_id",
            "lease_token",
            "lease_expires_at",
            "created_at",
            "started_at",
            "finished_at",
            "result",
            "error",
            // additive, after the contract's columns: the cron tick a scheduled job is for
            // (one job per tick across replicas, migration 0004)
            "scheduled_for",
            // additive: the budget's estimate and the latest round's verdict (migration 0012)
            "estimate",
            "budget_class",
            "budget_reason",
            "budget_note",
            "deferred_at"
        ]
    );
    let attempt_columns: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns \
         WHERE table_name = 'job_attempts' ORDER BY ordinal_position",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    for column in [
        "job_id",
        "attempt",
        "worker_id",
        "started_at",
        "finished_at",
        "outcome",
        "error",
    ] {
        assert!(
            attempt_columns.iter().any(|c| c == column),
            "{column} missing"
        );
    }
    conn.close().await.unwrap();
    harness.finish().await;
}
