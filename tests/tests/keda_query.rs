//! The KEDA query of `deploy/kubernetes/workers/scaledobject.yaml`, run as written against a
//! migrated Postgres job table: it counts the worker slots that have work now, exactly (a) the
//! queued and running tasks of running jobs, plus (b) the running jobs that have no task, plus
//! (c) one per distinct concurrency key among the due queued jobs whose key no running job
//! holds. Finished tasks (succeeded, failed, replanned, cancelled), tasks of jobs that are not
//! running, queued jobs behind a held key and queued jobs not yet due count nothing, and the
//! count follows the table as tasks finish, jobs end, a queued job is claimed and a retry
//! becomes due.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;
use sqlx::PgPool;
use tablekeeper_store::testing::TestDatabase;

/// The `query` of the ScaledObject's `postgresql` trigger, and its `targetQueryValue`.
fn keda_query() -> (String, String) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("deploy/kubernetes/workers/scaledobject.yaml");
    let text = std::fs::read_to_string(&path).expect("read scaledobject.yaml");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("scaledobject.yaml is YAML");
    let scaled: Vec<&Value> = docs
        .iter()
        .filter(|d| d["kind"] == "ScaledObject")
        .collect();
    assert_eq!(scaled.len(), 1, "one ScaledObject in {}", path.display());
    let triggers: Vec<&Value> = scaled[0]["spec"]["triggers"]
        .as_array()
        .expect("spec.triggers")
        .iter()
        .filter(|t| t["type"] == "postgresql")
        .collect();
    assert_eq!(triggers.len(), 1, "one postgresql trigger");
    let metadata = &triggers[0]["metadata"];
    let query = metadata["query"].as_str().expect("metadata.query");
    // KEDA's trigger metadata is a map of strings.
    let target = metadata["targetQueryValue"]
        .as_str()
        .expect("metadata.targetQueryValue as a string");
    (query.to_owned(), target.to_owned())
}

/// Seeds jobs and tasks with raw INSERTs, satisfying the migrations' constraints.
struct Seed<'a> {
    pool: &'a PgPool,
}

impl Seed<'_> {
    /// A running job (worker, lease token and expiry set, as `jobs_lease_iff_running` wants).
    async fn running(&self, table: &str, operation: &str, key: &str) -> i64 {
        sqlx::query_scalar(
            "INSERT INTO jobs (table_name, operation, concurrency_key, state, attempt, worker_id, \
             lease_token, lease_expires_at, started_at) \
             VALUES ($1, $2, $3, 'running', 1, 'planner-0/0', gen_random_uuid(), \
             clock_timestamp() + interval '1 minute', clock_timestamp()) RETURNING id",
        )
        .bind(table)
        .bind(operation)
        .bind(key)
        .fetch_one(self.pool)
        .await
        .unwrap()
    }

    /// A queued job (attempt 0 of 3), due `due_in` from now (negative: overdue).
    async fn queued(&self, table: &str, operation: &str, key: &str, due_in: &str) -> i64 {
        sqlx::query_scalar(
            "INSERT INTO jobs (table_name, operation, concurrency_key, state, run_at) \
             VALUES ($1, $2, $3, 'queued', clock_timestamp() + $4::interval) RETURNING id",
        )
        .bind(table)
        .bind(operation)
        .bind(key)
        .bind(due_in)
        .fetch_one(self.pool)
        .await
        .unwrap()
    }

    /// A job that ended in `state` (succeeded, failed or cancelled): no lease.
    async fn ended(&self, table: &str, operation: &str, key: &str, state: &str) -> i64 {
        sqlx::query_scalar(
            "INSERT INTO jobs (table_name, operation, concurrency_key, state, attempt, worker_id, \
             started_at, finished_at) \
             VALUES ($1, $2, $3, $4, 1, 'planner-0/0', clock_timestamp(), clock_timestamp()) \
             RETURNING id",
        )
        .bind(table)
        .bind(operation)
        .bind(key)
        .bind(state)
        .fetch_one(self.pool)
        .await
        .unwrap()
    }

    /// Task `task` of `job` in `state`; a running one holds a lease.
    async fn task(&self, job: i64, task: i32, state: &str) {
        let running = state == "running";
        let finished = matches!(state, "succeeded" | "failed" | "replanned" | "cancelled");
        sqlx::query(
            "INSERT INTO job_tasks (job_id, task, state, worker_id, lease_token, lease_expires_at, \
             attempt, input, started_at, finished_at) \
             VALUES ($1, $2, $3, \
               CASE WHEN $4 THEN 'worker-0/1' END, \
               CASE WHEN $4 THEN gen_random_uuid() END, \
               CASE WHEN $4 THEN clock_timestamp() + interval '1 minute' END, \
               CASE WHEN $4 OR $5 THEN 1 ELSE 0 END, \
               jsonb_build_object('kind', 'compact', 'files', jsonb_build_array(), 'bytes', 0), \
               CASE WHEN $4 OR $5 THEN clock_timestamp() END, \
               CASE WHEN $5 THEN clock_timestamp() END)",
        )
        .bind(job)
        .bind(task)
        .bind(state)
        .bind(running)
        .bind(finished)
        .execute(self.pool)
        .await
        .unwrap();
    }
}

async fn slots(pool: &PgPool, query: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(query)
        .fetch_one(pool)
        .await
        .expect("the KEDA query runs and returns one bigint")
}

async fn exec(pool: &PgPool, sql: &str, id: i64) {
    let done = sqlx::query(sql).bind(id).execute(pool).await.unwrap();
    assert_eq!(done.rows_affected(), 1, "{sql} ({id})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keda_query_counts_the_worker_slots_that_have_work() {
    let (query, target) = keda_query();
    assert_eq!(
        target, "4",
        "targetQueryValue is `workers` in tablekeeper.yaml"
    );

    let db = TestDatabase::create().await.unwrap();
    let store = db.connect_store().await.unwrap(); // every migration, 0008_job_tasks included
    let pool = PgPool::connect(&db.url).await.unwrap();
    assert_eq!(slots(&pool, &query).await, 0, "an empty job table");
    let seed = Seed { pool: &pool };

    // (a) A running rewrite split into tasks: its 3 queued or running tasks count, its
    // succeeded, failed, replanned and cancelled ones do not.
    let split = seed.running("t1", "compact", "table:t1").await;
    for (n, state) in [
        "queued",
        "running",
        "succeeded",
        "failed",
        "replanned",
        "cancelled",
        "queued",
    ]
    .into_iter()
    .enumerate()
    {
        seed.task(split, i32::try_from(n).unwrap(), state).await;
    }
    // A running job whose tasks have all finished (its coordinator adds up the report): no
    // task to count, and it has task rows, so it is not a job running whole either.
    let summing = seed.running("t5", "zorder", "table:t5").await;
    seed.task(summing, 0, "succeeded").await;
    seed.task(summing, 1, "succeeded").await;
    // Tasks of jobs that are not running are never claimed: a succeeded job's and a failed
    // job's leftover queued and running tasks count nothing (their keys are free).
    let succeeded = seed.ended("t2", "compact", "table:t2", "succeeded").await;
    seed.task(succeeded, 0, "queued").await;
    seed.task(succeeded, 1, "running").await;
    let failed = seed.ended("t6", "purge", "table:t6", "failed").await;
    seed.task(failed, 0, "queued").await;
    assert_eq!(slots(&pool, &query).await, 3, "(a) alone");

    // (b) A running job with no task (a VACUUM runs whole on one slot): 1.
    let whole = seed.running("t4", "vacuum", "table:t4").await;
    assert_eq!(slots(&pool, &query).await, 4, "(a) + (b)");

    // (c) Due queued jobs, one per free key.
    // Two due jobs on one free key (two operations of one table): counted once.
    let free_compact = seed.queued("t7", "compact", "table:t7", "-1 second").await;
    seed.queued("t7", "checkpoint", "table:t7", "-1 minute")
        .await;
    // A due job on a key only a finished job used (t2's succeeded compaction): free, 1.
    seed.queued("t2", "vacuum", "table:t2", "-1 second").await;
    // A due job whose tasks were planned by a coordinator that died (the reaper queued the
    // job again): the job counts in (c), its queued task not in (a).
    let requeued = seed.queued("t8", "zorder", "table:t8", "-1 second").await;
    seed.task(requeued, 0, "queued").await;
    // Due jobs whose keys running jobs hold (t1's split compaction, t4's VACUUM): they wait.
    seed.queued("t1", "vacuum", "table:t1", "-1 second").await;
    seed.queued("t4", "checkpoint", "table:t4", "-1 second")
        .await;
    // A job on a free key not due yet (a retry's backoff): not counted.
    let later = seed.queued("t9", "compact", "table:t9", "1 hour").await;
    // (a) 3 + (b) 1 + (c) 3 (table:t7, table:t2, table:t8)
    assert_eq!(slots(&pool, &query).await, 7, "every case");

    // A running task succeeds: one slot fewer.
    let done = sqlx::query(
        "UPDATE job_tasks SET state = 'succeeded', lease_token = NULL, lease_expires_at = NULL, \
         finished_at = clock_timestamp() \
         WHERE job_id = $1 AND state = 'running'",
    )
    .bind(split)
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(done.rows_affected(), 1);
    assert_eq!(slots(&pool, &query).await, 6, "a task finished");

    // The whole-running VACUUM succeeds: (b) loses it, and the checkpoint queued behind its
    // key becomes claimable, so (c) gains table:t4. The count stays.
    exec(
        &pool,
        "UPDATE jobs SET state = 'succeeded', lease_token = NULL, lease_expires_at = NULL, \
         finished_at = clock_timestamp() WHERE id = $1",
        whole,
    )
    .await;
    assert_eq!(
        slots(&pool, &query).await,
        6,
        "a key freed: its waiting job counts"
    );

    // A worker claims t7's compaction: it runs whole, (b) +1, and its key is held now, so t7's
    // due checkpoint waits, (c) -1. The count stays.
    exec(
        &pool,
        "UPDATE jobs SET state = 'running', attempt = attempt + 1, worker_id = 'worker-1/0', \
         lease_token = gen_random_uuid(), lease_expires_at = clock_timestamp() + interval '1 minute', \
         started_at = clock_timestamp() WHERE id = $1",
        free_compact,
    )
    .await;
    assert_eq!(
        slots(&pool, &query).await,
        6,
        "a claim moves a slot from (c) to (b)"
    );

    // The split compaction fails (its remaining queued tasks stay queued until cancelled):
    // its 2 queued tasks count no more, and the VACUUM queued behind table:t1 counts. 6-2+1.
    exec(
        &pool,
        "UPDATE jobs SET state = 'failed', lease_token = NULL, lease_expires_at = NULL, \
         finished_at = clock_timestamp() WHERE id = $1",
        split,
    )
    .await;
    assert_eq!(
        slots(&pool, &query).await,
        5,
        "a job ended: its tasks count no more"
    );

    // The backed-off retry becomes due: +1.
    exec(
        &pool,
        "UPDATE jobs SET run_at = clock_timestamp() - interval '1 second' WHERE id = $1",
        later,
    )
    .await;
    assert_eq!(slots(&pool, &query).await, 6, "a retry became due");

    pool.close().await;
    store.close().await;
    db.drop_db().await.unwrap();
}
