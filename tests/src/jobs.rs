//! Independent checks on the job table (the DESIGN.md contract), read with plain SQL so
//! they share no code with the store under test.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use sqlx::Row;

/// One attempt as (started, finished, job id); an attempt still open counts as lasting
/// until now.
type Interval = (DateTime<Utc>, DateTime<Utc>, i64);

/// Every attempt grouped by concurrency key, sorted by start.
async fn attempts_by_key(pool: &sqlx::PgPool) -> anyhow::Result<BTreeMap<String, Vec<Interval>>> {
    let rows = sqlx::query(
        "SELECT j.concurrency_key, a.job_id, a.started_at, coalesce(a.finished_at, now()) AS finished_at
         FROM job_attempts a JOIN jobs j ON j.id = a.job_id ORDER BY j.concurrency_key, a.started_at",
    )
    .fetch_all(pool)
    .await?;
    let mut by_key: BTreeMap<String, Vec<Interval>> = BTreeMap::new();
    for r in rows {
        by_key
            .entry(r.try_get("concurrency_key")?)
            .or_default()
            .push((
                r.try_get("started_at")?,
                r.try_get("finished_at")?,
                r.try_get("job_id")?,
            ));
    }
    Ok(by_key)
}

/// Fails if two attempts on one concurrency key overlap in time. An attempt abandoned by
/// a killed replica lasts until the reaper closed it (`lost_lease`), so a takeover that
/// came too early shows up as an overlap. Returns the number of attempts checked.
pub async fn assert_no_overlap(pool: &sqlx::PgPool) -> anyhow::Result<usize> {
    let mut checked = 0;
    for (key, attempts) in attempts_by_key(pool).await? {
        let mut busy_until: Option<(DateTime<Utc>, i64)> = None;
        for (start, end, job) in attempts {
            checked += 1;
            if let Some((until, holder)) = busy_until {
                anyhow::ensure!(
                    start >= until,
                    "attempts overlap on key {key}: job {job} started at {start} while job {holder} ran until {until}"
                );
            }
            if busy_until.is_none_or(|(u, _)| end > u) {
                busy_until = Some((end, job));
            }
        }
    }
    Ok(checked)
}

/// `SELECT count(*) ...` as an i64.
pub async fn count(pool: &sqlx::PgPool, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sql)
        .fetch_one(pool)
        .await
        .unwrap_or(-1)
}

/// A job's state in the job table.
pub async fn job_state(pool: &sqlx::PgPool, id: i64) -> String {
    sqlx::query_scalar("SELECT state FROM jobs WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap_or_else(|e| panic!("job {id}: {e}"))
}

/// Polls the async `check` every 250 ms until it returns true; fails after `timeout`.
pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        anyhow::ensure!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// After every replica stopped: no job is left `running`, every attempt was closed, and
/// no job ended `failed` (a failure for good would mean a fault cost a job its retries).
pub async fn assert_settled(pool: &sqlx::PgPool) -> anyhow::Result<()> {
    let running = count(pool, "SELECT count(*) FROM jobs WHERE state = 'running'").await;
    anyhow::ensure!(running == 0, "{running} job(s) left running");
    let open = count(
        pool,
        "SELECT count(*) FROM job_attempts WHERE outcome IS NULL",
    )
    .await;
    anyhow::ensure!(open == 0, "{open} attempt(s) never closed");
    let failed: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT table_name, operation, coalesce(error, '') FROM jobs WHERE state = 'failed'",
    )
    .fetch_all(pool)
    .await?;
    anyhow::ensure!(failed.is_empty(), "jobs failed for good: {failed:?}");
    Ok(())
}
