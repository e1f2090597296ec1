//! The job table's invariants hold in the database itself, for anyone writing SQL by
//! hand (operators, scripts), not only through tablekeeper: plain SQL against the
//! migrated schema, on real Postgres and real SQLite files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::Harness;
use sqlx::{Executor, PgPool, SqlitePool};
use tablekeeper_store::{JobId, JobState, Lease, Trigger};

/// The eight columns an operator has to give to enqueue by hand.
const OPERATOR_INSERT_PG: &str = "\
    INSERT INTO jobs (table_name, operation, concurrency_key, state, trigger, run_at, attempt, max_attempts) \
    VALUES ('silver.events', 'compact', 'table:silver.events', 'queued', 'manual', now(), 0, 3) \
    RETURNING id";

const OPERATOR_INSERT_SQLITE: &str = "\
    INSERT INTO jobs (table_name, operation, concurrency_key, state, trigger, run_at, attempt, max_attempts) \
    VALUES ('silver.events', 'compact', 'table:silver.events', 'queued', 'manual', datetime('now'), 0, 3) \
    RETURNING id";

fn running_row(table: &str, key: &str, now: &str, uuid: &str) -> String {
    format!(
        "INSERT INTO jobs (table_name, operation, concurrency_key, state, trigger, run_at, attempt, \
         max_attempts, worker_id, lease_token, lease_expires_at, started_at) \
         VALUES ('{table}', 'compact', '{key}', 'running', 'schedule', {now}, 1, 3, 'w', {uuid}, {now}, {now})"
    )
}

fn queued_row(table: &str, operation: &str, now: &str) -> String {
    format!(
        "INSERT INTO jobs (table_name, operation, concurrency_key, state, trigger, run_at, attempt, max_attempts) \
         VALUES ('{table}', '{operation}', 'table:{table}', 'queued', 'schedule', {now}, 0, 3)"
    )
}

/// Asserts `sql` fails on a unique index; returns the database's message.
async fn refused<'e, E>(executor: E, sql: &str) -> String
where
    E: Executor<'e>,
{
    match executor.execute(sql).await {
        Ok(_) => panic!("the database accepted: {sql}"),
        Err(sqlx::Error::Database(db)) => {
            assert!(
                db.is_unique_violation() || db.is_check_violation(),
                "unexpected refusal for {sql}: {db}"
            );
            format!("{} {}", db.constraint().unwrap_or_default(), db.message())
        }
        Err(other) => panic!("unexpected error for {sql}: {other}"),
    }
}

#[tokio::test]
async fn postgres_refuses_second_running_job_per_key_and_second_queued_job_per_table_operation() {
    let harness = Harness::postgres().await;
    let pool = PgPool::connect(&harness.url).await.unwrap();
    let now = "clock_timestamp()";

    pool.execute(running_row("a", "shared", now, "gen_random_uuid()").as_str())
        .await
        .unwrap();
    let message = refused(&pool, &running_row("b", "shared", now, "gen_random_uuid()")).await;
    assert!(message.contains("jobs_one_running_per_key"), "{message}");
    // Another key may run at the same time.
    pool.execute(running_row("c", "other", now, "gen_random_uuid()").as_str())
        .await
        .unwrap();

    pool.execute(queued_row("t", "compact", now).as_str())
        .await
        .unwrap();
    let message = refused(&pool, &queued_row("t", "compact", now)).await;
    assert!(
        message.contains("jobs_one_queued_per_table_operation"),
        "{message}"
    );
    // Another operation on the table, or the same one once the first has finished, is fine.
    pool.execute(queued_row("t", "vacuum", now).as_str())
        .await
        .unwrap();
    pool.execute(
        "UPDATE jobs SET state = 'succeeded' WHERE table_name = 't' AND operation = 'compact'",
    )
    .await
    .unwrap();
    pool.execute(queued_row("t", "compact", now).as_str())
        .await
        .unwrap();

    // Lease columns and attempts are checked too.
    let message = refused(
        &pool,
        "INSERT INTO jobs (table_name, operation, concurrency_key, state, trigger, run_at, attempt, max_attempts) \
         VALUES ('d', 'compact', 'table:d', 'running', 'schedule', now(), 1, 3)",
    )
    .await;
    assert!(message.contains("jobs_lease_iff_running"), "{message}");
    let message = refused(
        &pool,
        "INSERT INTO jobs (table_name, operation, concurrency_key, state, trigger, run_at, attempt, max_attempts) \
         VALUES ('e', 'compact', 'table:e', 'queued', 'schedule', now(), 3, 3)",
    )
    .await;
    assert!(
        message.contains("jobs_queued_has_attempts_left"),
        "{message}"
    );
    let message = refused(&pool, &queued_row("f", "optimize", now)).await;
    assert!(message.contains("jobs_operation_check"), "{message}");

    pool.close().await;
    harness.finish().await;
}

#[tokio::test]
async fn sqlite_refuses_second_running_job_per_key_and_second_queued_job_per_table_operation() {
    let harness = Harness::sqlite().await;
    let pool = SqlitePool::connect(&harness.url).await.unwrap();
    let now = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";
    let uuid = "lower(hex(randomblob(16)))";

    pool.execute(running_row("a", "shared", now, uuid).as_str())
        .await
        .unwrap();
    let message = refused(&pool, &running_row("b", "shared", now, uuid)).await;
    assert!(message.contains("jobs.concurrency_key"), "{message}");
    pool.execute(running_row("c", "other", now, uuid).as_str())
        .await
        .unwrap();

    pool.execute(queued_row("t", "compact", now).as_str())
        .await
        .unwrap();
    let message = refused(&pool, &queued_row("t", "compact", now)).await;
    assert!(
        message.contains("jobs.table_name, jobs.operation"),
        "{message}"
    );
    pool.execute(queued_row("t", "vacuum", now).as_str())
        .await
        .unwrap();
    pool.execute(
        "UPDATE jobs SET state = 'succeeded' WHERE table_name = 't' AND operation = 'compact'",
    )
    .await
    .unwrap();
    pool.execute(queued_row("t", "compact", now).as_str())
        .await
        .unwrap();

    let message = refused(
        &pool,
        "INSERT INTO jobs (table_name, operation, concurrency_key, state, trigger, run_at, attempt, max_attempts) \
         VALUES ('d', 'compact', 'table:d', 'running', 'schedule', datetime('now'), 1, 3)",
    )
    .await;
    assert!(message.contains("jobs_lease_iff_running"), "{message}");
    let message = refused(
        &pool,
        "INSERT INTO jobs (table_name, operation, concurrency_key, state, trigger, run_at, attempt, max_attempts) \
         VALUES ('e', 'compact', 'table:e', 'queued', 'schedule', datetime('now'), 3, 3)",
    )
    .await;
    assert!(
        message.contains("jobs_queued_has_attempts_left"),
        "{message}"
    );
    let message = refused(
        &pool,
        "INSERT INTO jobs (table_name, operation, concurrency_key, state, trigger, run_at, attempt, max_attempts) \
         VALUES ('g', 'compact', 'table:g', 'queued', 'schedule', 'tomorrow', 0, 3)",
    )
    .await;
    assert!(message.contains("jobs_times_check"), "{message}");

    pool.close().await;
    harness.finish().await;
}

/// An operator enqueues with the eight documented columns; tablekeeper claims and
/// finishes the job like any other.
async fn operator_insert_is_a_normal_job(harness: Harness, insert: &str) {
    let id: JobId = JobId(match harness.store.backend() {
        tablekeeper_store::Backend::Postgres => {
            let pool = PgPool::connect(&harness.url).await.unwrap();
            let id = sqlx::query_scalar(insert).fetch_one(&pool).await.unwrap();
            pool.close().await;
            id
        }
        tablekeeper_store::Backend::Sqlite => {
            let pool = SqlitePool::connect(&harness.url).await.unwrap();
            let id = sqlx::query_scalar(insert).fetch_one(&pool).await.unwrap();
            pool.close().await;
            id
        }
    });
    let store = &harness.store;
    let job = store.get_job(id).await.unwrap().expect("inserted job");
    assert_eq!(job.state, JobState::Queued);
    assert_eq!(job.trigger, Trigger::Manual);
    assert_eq!(job.priority, 0);
    assert!(job.lease_token.is_none() && job.result.is_none() && job.error.is_none());

    let claimed = store
        .claim("operator-test", Duration::from_secs(60))
        .await
        .unwrap()
        .job
        .expect("the hand-made job is claimable");
    assert_eq!(claimed.job.id, id);
    assert_eq!(claimed.job.attempt, 1);
    assert!(store
        .complete(
            &Lease::new(id, claimed.lease.token),
            serde_json::json!({"files_rewritten": 3})
        )
        .await
        .unwrap());
    let attempts = store.attempts(id).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        attempts[0].outcome,
        Some(tablekeeper_store::AttemptOutcome::Succeeded)
    );
    harness.finish().await;
}

#[tokio::test]
async fn postgres_operator_insert_with_eight_columns() {
    operator_insert_is_a_normal_job(Harness::postgres().await, OPERATOR_INSERT_PG).await;
}

#[tokio::test]
async fn sqlite_operator_insert_with_eight_columns() {
    // datetime('now') ("YYYY-MM-DD HH:MM:SS"), not tablekeeper's own format: still due.
    operator_insert_is_a_normal_job(Harness::sqlite().await, OPERATOR_INSERT_SQLITE).await;
}
