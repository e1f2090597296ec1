//! The refresher: keeps table health, staleness, failure streaks and the job-count gauges
//! current between schedule ticks. It probes the tables that are due (the probe rounds are
//! `schedule::probes`), then reads what the job store says about the fleet (fleet-wide
//! counts, failure streaks, last successes, stale writes, other engines' rewrites, pins,
//! pauses) and republishes every gauge. A `role: worker` replica runs only the counts.
//!
//! It survives any single failure: it logs with fields and goes on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tracing::warn;

use crate::shared::Shared;

/// Probes the tables that are due (every `probe_interval` while their log moves, less and
/// less often up to `max_probe_interval` while it does not: `fleet::cadence`), and refreshes
/// the fleet gauges every few seconds (staleness grows with time, not with probes).
pub(crate) async fn refresher(rt: Arc<Shared>) {
    // Staleness and job counts are cheap; refresh them often enough that a scrape every
    // 15 s (Prometheus's common interval) sees current values.
    let gauges_every = Duration::from_secs(5).min(rt.config.probe_interval);
    let mut health_recorded = None;
    let mut probe_costs = super::cost_flush::Pending::default();
    loop {
        crate::schedule::probes::probe_due(&rt).await;
        refresh_store_gauges(&rt).await;
        crate::metrics::publish::all(&rt.metrics, &rt.fleet, Utc::now());
        super::fleet_health::record(&rt, &mut health_recorded).await;
        super::cost_flush::flush(&rt, &mut probe_costs, false).await;
        tokio::select! {
            () = rt.shutdown.cancelled() => {
                super::cost_flush::flush(&rt, &mut probe_costs, true).await;
                return;
            }
            () = tokio::time::sleep(gauges_every) => {}
        }
    }
}

/// Failed attempts since the last success, per (table, operation), from the job table: every
/// replica sees the same streak whichever replica ran the attempts, a success anywhere ends
/// it, and a restart neither clears nor repeats it.
pub(crate) async fn refresh_failure_streaks(rt: &Shared) {
    let streaks = match rt.store.failure_streaks().await {
        Ok(streaks) => streaks,
        Err(e) => {
            warn!(error = %e, "cannot read failure streaks");
            return;
        }
    };
    per_table(
        rt,
        streaks,
        |s| &s.table_name,
        |spec, streaks| {
            rt.fleet.update_state(&spec.name, |s| {
                s.consecutive_failures.clear();
                s.last_failure.clear();
                for streak in streaks {
                    let op = streak.operation;
                    s.consecutive_failures.insert(op, streak.failures);
                    s.last_failure.insert(
                        op,
                        (streak.last_failed_at, streak.last_error.unwrap_or_default()),
                    );
                }
            });
        },
    );
}

/// Hands each inventoried table its rows of `rows` (none when it has none): what the job
/// store says of the fleet, read in one query, applied table by table.
fn per_table<R>(
    rt: &Shared,
    rows: Vec<R>,
    table_of: impl Fn(&R) -> &String,
    mut apply: impl FnMut(&tablekeeper_inventory::TableSpec, Vec<R>),
) {
    let mut by_table: BTreeMap<String, Vec<R>> = BTreeMap::new();
    for row in rows {
        by_table
            .entry(table_of(&row).clone())
            .or_default()
            .push(row);
    }
    for spec in &rt.fleet.inventory().tables {
        apply(spec, by_table.remove(&spec.name).unwrap_or_default());
    }
}

/// A `role: worker` replica's refresher: only the fleet-wide job and task counts, so every
/// replica exports the same `tablekeeper_jobs` and `tablekeeper_tasks` (a worker probes and
/// publishes no table).
pub(crate) async fn count_refresher(rt: Arc<Shared>) {
    loop {
        refresh_counts(&rt).await;
        tokio::select! {
            () = rt.shutdown.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

/// Jobs and tasks per state, fleet-wide from the job table.
async fn refresh_counts(rt: &Shared) {
    match rt.store.active_counts().await {
        Ok(counts) => rt.metrics.set_job_counts(&counts),
        Err(e) => warn!(error = %e, "cannot read job counts"),
    }
    match rt.store.task_counts().await {
        Ok(counts) => rt.metrics.set_task_counts(&counts),
        Err(e) => warn!(error = %e, "cannot read task counts"),
    }
}

async fn refresh_store_gauges(rt: &Shared) {
    refresh_counts(rt).await;
    refresh_failure_streaks(rt).await;
    match rt.store.last_success().await {
        Ok(rows) => rt.fleet.set_store_successes(
            rows.into_iter()
                .map(|r| (r.table_name, r.operation, r.finished_at)),
        ),
        Err(e) => warn!(error = %e, "cannot read last successes"),
    }
    // Stale writes any replica recorded: the counter follows the store's count, so every
    // replica exports the same value and a restart neither loses nor repeats one.
    match rt.store.stale_write_counts().await {
        Ok(rows) => per_table(
            rt,
            rows,
            |r| &r.table_name,
            |spec, mut rows| {
                let (count, last_detected) = rows
                    .pop()
                    .map_or((0, None), |r| (r.stale_writes, r.last_detected_at));
                rt.metrics.set_stale_writes(
                    &spec.name,
                    u64::try_from(count).unwrap_or(0),
                    last_detected,
                );
            },
        ),
        Err(e) => warn!(error = %e, "cannot read stale writes"),
    }
    // Rewrites by other engines, from the history every replica records: the same count on
    // every replica, the alert's time only where tablekeeper owns the table's rewrites.
    match rt.store.foreign_rewrites().await {
        Ok(rows) => per_table(
            rt,
            rows,
            |r| &r.table_name,
            |spec, mut rows| {
                let row = rows.pop();
                if let Some(r) = &row {
                    let owned =
                        spec.writers.rewrites == tablekeeper_inventory::RewriteOwner::Tablekeeper;
                    rt.metrics.set_foreign_rewrites(
                        &spec.name,
                        u64::try_from(r.rewrites).unwrap_or(0),
                        Some(r.last_timestamp),
                        owned,
                    );
                }
                rt.fleet
                    .update_state(&spec.name, |s| s.foreign_rewrites = row);
            },
        ),
        Err(e) => warn!(error = %e, "cannot read other engines' rewrites"),
    }
    // Pins added through the API on any replica: the restore drill checks them.
    match rt.store.pins(None).await {
        Ok(pins) => per_table(
            rt,
            pins,
            |p| &p.table_name,
            |spec, pins| {
                rt.fleet
                    .update_state(&spec.name, |s| s.api_pins = Some(pins));
            },
        ),
        Err(e) => warn!(error = %e, "cannot read pins"),
    }
    // Pauses set through the API on any replica.
    match rt.store.paused_overrides().await {
        Ok(overrides) => {
            for spec in &rt.fleet.inventory().tables {
                let value = overrides.get(&spec.name).copied();
                rt.fleet
                    .update_state(&spec.name, |s| s.paused_by_api = value);
            }
        }
        Err(e) => warn!(error = %e, "cannot read pause overrides"),
    }
}

#[cfg(test)]
mod tests {
    //! The refresher's reads against a real Postgres whose history has grown: what a refresh
    //! reads is counted by Postgres itself (`pg_stat_user_tables`), from the sessions of a
    //! job store opened for the refresh alone.

    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::time::Duration;

    use sqlx::{Connection, PgConnection, Row};
    use tablekeeper_inventory::{Inventory, Operation};
    use tablekeeper_store::testing::TestDatabase;
    use tablekeeper_store::StoreOptions;

    use super::*;
    use crate::config::DaemonConfig;
    use crate::fleet::{Fleet, FleetOptions};
    use crate::metrics::Metrics;

    const HISTORY: [&str; 4] = ["jobs", "job_attempts", "table_commits", "stale_writes"];

    /// Ten tables, each with `jobs` finished jobs (one attempt each, every tenth a failure),
    /// `jobs` commits (every fifth another engine's rewrite) and a stale write.
    async fn seed(conn: &mut PgConnection, jobs: i64) {
        for sql in [
            "INSERT INTO jobs (table_name, operation, concurrency_key, state, attempt, \
               started_at, finished_at) \
             SELECT 't' || (n % 10), 'compact', 'table:t' || (n % 10), \
               CASE WHEN n % 10 = 3 THEN 'failed' ELSE 'succeeded' END, 1, \
               now() - n * interval '1 second', now() - n * interval '1 second' \
             FROM generate_series(1, $1) n",
            "INSERT INTO job_attempts (job_id, attempt, worker_id, started_at, finished_at, \
               outcome, error) \
             SELECT id, 1, 'r/0', started_at, finished_at, \
               CASE state WHEN 'failed' THEN 'failed' ELSE 'succeeded' END, \
               CASE state WHEN 'failed' THEN 'disk full' END \
             FROM jobs WHERE id > coalesce((SELECT max(job_id) FROM job_attempts), 0)",
            "INSERT INTO table_commits (table_name, version, \"timestamp\", operation, \
               rewrite, tablekeeper_operation) \
             SELECT 't' || (n % 10), \
               coalesce((SELECT max(version) FROM table_commits), 0) + n, now(), \
               CASE WHEN n % 5 = 0 THEN 'OPTIMIZE' ELSE 'WRITE' END, n % 5 = 0, NULL \
             FROM generate_series(1, $1) n",
            "INSERT INTO stale_writes (table_name, version, operation, rewrite_versions, files, \
               sample_files, over_repair, kind) \
             SELECT 't' || n, coalesce((SELECT max(version) FROM stale_writes), 0) + n, \
               'WRITE', '[]', 1, '[]', false, 'overwrite' \
             FROM generate_series(0, 9) n",
            "ANALYZE",
        ] {
            let query = sqlx::query(sql);
            let query = if sql.contains("$1") {
                query.bind(jobs)
            } else {
                query
            };
            query.execute(&mut *conn).await.unwrap();
        }
    }

    /// Rows read from each history table so far, by every session that has ended.
    async fn reads(url: &str) -> BTreeMap<String, i64> {
        let mut conn = PgConnection::connect(url).await.unwrap();
        // the other sessions' counts arrive when they end: wait until this one is alone
        for _ in 0..200 {
            let others: i64 = sqlx::query(
                "SELECT count(*) AS n FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
            )
            .fetch_one(&mut conn)
            .await
            .unwrap()
            .get("n");
            if others == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sqlx::query("SELECT pg_stat_clear_snapshot()")
            .execute(&mut conn)
            .await
            .unwrap();
        let rows = sqlx::query(
            "SELECT relname::TEXT AS name, \
               coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) AS n \
             FROM pg_stat_user_tables WHERE relname = ANY($1)",
        )
        .bind(HISTORY.as_slice())
        .fetch_all(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
        rows.iter().map(|r| (r.get("name"), r.get("n"))).collect()
    }

    /// Runs one refresh on a replica with a job store of its own, and returns the rows it
    /// read from each history table.
    async fn refresh(db: &TestDatabase) -> (BTreeMap<String, i64>, Arc<Shared>) {
        let before = reads(&db.url).await;
        let yaml: String = (0..10)
            .map(|n| format!("  - {{ name: t{n}, path: /data/t{n}, owner: o }}\n"))
            .collect();
        let inventory = Inventory::parse(
            std::path::Path::new("inventory.yaml"),
            &format!("tables:\n{yaml}"),
        )
        .unwrap();
        let url = db.url.clone();
        let config = DaemonConfig::load_with_env(None, move |key| {
            (key == "TABLEKEEPER_DATABASE_URL").then(|| url.clone())
        })
        .unwrap();
        let store = tablekeeper_store::connect(&db.url, StoreOptions::default())
            .await
            .unwrap();
        let fleet = Arc::new(Fleet::new(inventory, FleetOptions::probe_once()));
        let shared = Arc::new(Shared::new(config, store, fleet, Metrics::new().unwrap()));
        refresh_store_gauges(&shared).await;
        shared.store.close().await;
        let after = reads(&db.url).await;
        let read = HISTORY
            .iter()
            .map(|t| (t.to_string(), after[*t] - before[*t]))
            .collect();
        (read, shared)
    }

    #[tokio::test]
    async fn a_refresh_reads_the_fleets_status_not_its_history() {
        let db = TestDatabase::create().await.unwrap();
        db.connect_store().await.unwrap().close().await;
        let mut conn = PgConnection::connect(&db.url).await.unwrap();
        seed(&mut conn, 200).await;
        let (small, shared) = refresh(&db).await;
        let streak = shared
            .fleet
            .with_state("t3", |s| s.consecutive_failures.clone())
            .unwrap();
        assert_eq!(
            streak.get(&Operation::Compact),
            Some(&20),
            "every job of t3 failed: its streak is all of them"
        );
        assert!(
            shared
                .fleet
                .last_success("t1", Operation::Compact)
                .is_some(),
            "t1's compactions succeeded"
        );

        seed(&mut conn, 20_000).await;
        conn.close().await.unwrap();
        let (large, shared) = refresh(&db).await;
        let streak = shared
            .fleet
            .with_state("t3", |s| s.consecutive_failures.clone())
            .unwrap();
        assert_eq!(streak.get(&Operation::Compact), Some(&2_020));
        // a table of a few hundred rows may be scanned whole (the planner's choice); what a
        // refresh reads must not grow with the history
        for table in HISTORY {
            assert!(
                large[table] <= small[table],
                "a hundred times the history, more rows of {table} read: {small:?} then {large:?}"
            );
        }
        assert!(
            large.values().all(|n| *n == 0),
            "no finished job, attempt, commit or stale write is read: {large:?}"
        );
        db.drop_db().await.unwrap();
    }
}
