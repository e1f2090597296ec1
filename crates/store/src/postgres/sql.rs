//! Every SQL statement the Postgres backend runs. Timestamps come from
//! `clock_timestamp()` (the database clock when the statement runs, not the transaction
//! start) and durations are bound as whole microseconds.

/// The columns of `jobs`, in `Job` order.
macro_rules! job_columns {
    () => {
        "id, table_name, operation, concurrency_key, state, \"trigger\", priority, run_at, \
         attempt, max_attempts, worker_id, lease_token, lease_expires_at, created_at, \
         started_at, finished_at, result, error"
    };
}

/// The columns of `jobs` qualified by table (for statements joining another relation).
macro_rules! qualified_job_columns {
    () => {
        "jobs.id, jobs.table_name, jobs.operation, jobs.concurrency_key, jobs.state, \
         jobs.\"trigger\", jobs.priority, jobs.run_at, jobs.attempt, jobs.max_attempts, \
         jobs.worker_id, jobs.lease_token, jobs.lease_expires_at, jobs.created_at, \
         jobs.started_at, jobs.finished_at, jobs.result, jobs.error"
    };
}

/// Names of the invariant indexes (migrations/postgres/0001_jobs.sql).
pub(super) const ONE_RUNNING_PER_KEY: &str = "jobs_one_running_per_key";
pub(super) const ONE_QUEUED_PER_TABLE_OPERATION: &str = "jobs_one_queued_per_table_operation";

/// $1 table, $2 operation, $3 key, $4 trigger, $5 priority, $6 run_at or NULL (= now),
/// $7 max_attempts. Returns no row if a queued job for (table, operation) exists.
pub(super) const INSERT_QUEUED: &str = concat!(
    "INSERT INTO jobs (table_name, operation, concurrency_key, state, \"trigger\", priority, \
     run_at, max_attempts, scheduled_for) \
     VALUES ($1, $2, $3, 'queued', $4, $5, COALESCE($6, clock_timestamp()), $7, $8) \
     ON CONFLICT DO NOTHING \
     RETURNING ",
    job_columns!()
);

/// The job of one cron tick. $1 table, $2 operation, $3 scheduled_for.
pub(super) const SELECT_TICK: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE table_name = $1 AND operation = $2 AND scheduled_for = $3"
);

/// A manual request joining the queued job: run it no later than asked, at least as
/// urgently. $1 table, $2 operation, $3 run_at or NULL (= now), $4 priority.
pub(super) const JOIN_QUEUED_MANUAL: &str = concat!(
    "UPDATE jobs SET run_at = LEAST(run_at, COALESCE($3, clock_timestamp())), \
     priority = GREATEST(priority, $4), \"trigger\" = 'manual' \
     WHERE table_name = $1 AND operation = $2 AND state = 'queued' \
     RETURNING ",
    job_columns!()
);

/// $1 table, $2 operation.
pub(super) const SELECT_QUEUED: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE table_name = $1 AND operation = $2 AND state = 'queued'"
);

/// The best due job whose key is free, locked, skipping rows other claimers hold.
/// $1 ids to skip (lost a race on the running-key index in this claim).
pub(super) const CLAIM_CANDIDATE: &str = "\
    SELECT j.id FROM jobs j \
    WHERE j.state = 'queued' AND j.run_at <= clock_timestamp() \
      AND NOT (j.id = ANY($1)) \
      AND NOT EXISTS (SELECT 1 FROM jobs r \
                      WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key) \
    ORDER BY j.priority DESC, j.run_at, j.id \
    LIMIT 1 \
    FOR UPDATE OF j SKIP LOCKED";

/// Takes the running-key slot. $1 id, $2 worker, $3 token, $4 lease (µs).
///
/// The times set here are provisional: Postgres evaluates them before the unique check
/// on `jobs_one_running_per_key`, which may wait for the previous holder's transaction
/// to commit. [`START_ATTEMPT`] stamps the real start once the slot is ours, so an
/// attempt never appears to start before the previous attempt on its key finished.
pub(super) const CLAIM_UPDATE: &str = "\
    UPDATE jobs SET state = 'running', attempt = attempt + 1, worker_id = $2, \
    lease_token = $3, lease_expires_at = clock_timestamp() + $4 * interval '1 microsecond', \
    started_at = clock_timestamp(), finished_at = NULL \
    WHERE id = $1 AND state = 'queued' \
    RETURNING attempt";

/// $1 job id, $2 error.
pub(super) const CLOSE_STRAY_ATTEMPTS: &str = "\
    UPDATE job_attempts SET finished_at = clock_timestamp(), outcome = 'lost_lease', error = $2 \
    WHERE job_id = $1 AND outcome IS NULL";

/// Opens the attempt and stamps the job's start and lease from one clock reading.
/// $1 job id, $2 attempt, $3 worker, $4 token, $5 lease (µs).
pub(super) const START_ATTEMPT: &str = concat!(
    "WITH opened AS ( \
       INSERT INTO job_attempts (job_id, attempt, worker_id, lease_token, started_at) \
       VALUES ($1, $2, $3, $4, clock_timestamp()) \
       RETURNING started_at) \
     UPDATE jobs SET started_at = opened.started_at, \
       lease_expires_at = opened.started_at + $5 * interval '1 microsecond' \
     FROM opened WHERE jobs.id = $1 \
     RETURNING ",
    qualified_job_columns!()
);

/// Due queued jobs whose key is held, ranked ahead of the claimed job
/// ($1 id, $2 priority, $3 run_at; all NULL when nothing was claimed), at most $4.
pub(super) const KEY_WAITS: &str = "\
    SELECT j.id, j.table_name, j.operation, j.concurrency_key FROM jobs j \
    WHERE j.state = 'queued' AND j.run_at <= clock_timestamp() \
      AND EXISTS (SELECT 1 FROM jobs r \
                  WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key) \
      AND ($1::bigint IS NULL OR j.priority > $2::integer \
           OR (j.priority = $2::integer AND (j.run_at < $3::timestamptz \
               OR (j.run_at = $3::timestamptz AND j.id < $1::bigint)))) \
    ORDER BY j.priority DESC, j.run_at, j.id \
    LIMIT $4";

/// $1 id, $2 token, $3 lease (µs).
pub(super) const HEARTBEAT: &str = "\
    UPDATE jobs SET lease_expires_at = clock_timestamp() + $3 * interval '1 microsecond' \
    WHERE id = $1 AND lease_token = $2 AND state = 'running' \
    RETURNING lease_expires_at";

/// $1 id, $2 token, $3 result.
pub(super) const COMPLETE: &str = "\
    UPDATE jobs SET state = 'succeeded', finished_at = clock_timestamp(), result = $3, \
    error = NULL, lease_token = NULL, lease_expires_at = NULL \
    WHERE id = $1 AND lease_token = $2 AND state = 'running' \
    RETURNING id";

/// Did this token's attempt already succeed? $1 job id, $2 token.
pub(super) const COMPLETED_BY_TOKEN: &str = "\
    SELECT id FROM job_attempts WHERE job_id = $1 AND lease_token = $2 AND outcome = 'succeeded'";

/// Close the open attempt. $1 job id, $2 outcome, $3 error.
pub(super) const CLOSE_ATTEMPT: &str = "\
    UPDATE job_attempts SET finished_at = clock_timestamp(), outcome = $2, error = $3 \
    WHERE job_id = $1 AND outcome IS NULL";

/// Lock the job if `token` holds its lease. $1 id, $2 token.
pub(super) const LOCK_LEASED: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE id = $1 AND lease_token = $2 AND state = 'running' FOR UPDATE"
);

/// Another queued job for the same (table, operation)? $1 table, $2 operation, $3 id.
pub(super) const OTHER_QUEUED: &str = "\
    SELECT id FROM jobs \
    WHERE table_name = $1 AND operation = $2 AND state = 'queued' AND id <> $3";

/// $1 id, $2 delay (µs), $3 attempts to give back (0 or 1), $4 error or NULL (keep).
pub(super) const REQUEUE: &str = "\
    UPDATE jobs SET state = 'queued', run_at = clock_timestamp() + $2 * interval '1 microsecond', \
    attempt = attempt - $3, error = COALESCE($4, error), \
    lease_token = NULL, lease_expires_at = NULL \
    WHERE id = $1 \
    RETURNING run_at";

/// Terminal state without success. $1 id, $2 state, $3 error.
pub(super) const FINISH: &str = "\
    UPDATE jobs SET state = $2, finished_at = clock_timestamp(), error = $3, \
    lease_token = NULL, lease_expires_at = NULL \
    WHERE id = $1";

/// $1 grace (µs), $2 limit.
pub(super) const REAP_CANDIDATES: &str = "\
    SELECT id FROM jobs \
    WHERE state = 'running' \
      AND lease_expires_at + $1 * interval '1 microsecond' < clock_timestamp() \
    ORDER BY lease_expires_at \
    LIMIT $2";

/// Lock the job if its lease is still expired; skip it if another reaper (or its
/// worker's heartbeat) holds it. $1 id, $2 grace (µs).
pub(super) const LOCK_EXPIRED: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE id = $1 AND state = 'running' \
      AND lease_expires_at + $2 * interval '1 microsecond' < clock_timestamp() \
      FOR UPDATE SKIP LOCKED"
);

/// $1 id, $2 error.
pub(super) const CANCEL_QUEUED: &str = "\
    UPDATE jobs SET state = 'cancelled', finished_at = clock_timestamp(), error = $2 \
    WHERE id = $1 AND state = 'queued'";

/// $1 id.
pub(super) const JOB_EXISTS: &str = "SELECT id FROM jobs WHERE id = $1";

/// $1 id.
pub(super) const GET_JOB: &str = concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1");

/// $1 table or NULL, $2 state or NULL, $3 limit.
pub(super) const LIST_JOBS: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE ($1::text IS NULL OR table_name = $1) \
      AND ($2::text IS NULL OR state = $2) \
      ORDER BY id DESC LIMIT $3"
);

/// $1 job id.
pub(super) const ATTEMPTS: &str = "\
    SELECT id, job_id, attempt, worker_id, lease_token, started_at, finished_at, outcome, error \
    FROM job_attempts WHERE job_id = $1 ORDER BY id";

pub(super) const COUNTS_BY_STATE: &str = "SELECT state, count(*) AS n FROM jobs GROUP BY state";

pub(super) const LAST_SUCCESS: &str = "\
    SELECT table_name, operation, max(finished_at) AS finished_at FROM jobs \
    WHERE state = 'succeeded' AND finished_at IS NOT NULL \
    GROUP BY table_name, operation ORDER BY table_name, operation";

/// $1 table.
pub(super) const LATEST_JOBS_FOR_TABLE: &str = concat!(
    "SELECT DISTINCT ON (operation) ",
    job_columns!(),
    " FROM jobs WHERE table_name = $1 ORDER BY operation, id DESC"
);

/// $1 table_name, $2 paused. Upsert of an API pause override.
pub(super) const SET_PAUSED: &str = "INSERT INTO table_pauses (table_name, paused) VALUES ($1, $2) \
     ON CONFLICT (table_name) DO UPDATE SET paused = excluded.paused, updated_at = clock_timestamp()";

pub(super) const PAUSED_OVERRIDES: &str =
    "SELECT table_name, paused FROM table_pauses ORDER BY table_name";

pub(super) const RUNNING_JOBS: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE state = 'running' ORDER BY started_at, id"
);

// history (table_commits) and stale writes ---------------------------------------------

/// $1 table, $2 version, $3 timestamp, $4 operation, $5 parameters, $6 metrics, $7 engine,
/// $8 user, $9 blind append. A version already recorded is left as it is.
pub(super) const INSERT_COMMIT: &str = "INSERT INTO table_commits \
     (table_name, version, \"timestamp\", operation, operation_parameters, operation_metrics, \
      engine_info, user_name, is_blind_append) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
     ON CONFLICT (table_name, version) DO NOTHING";

/// $1 table, $2 before (exclusive) or NULL, $3 limit.
pub(super) const HISTORY: &str = "SELECT version, \"timestamp\", operation, operation_parameters, \
       operation_metrics, engine_info, user_name, is_blind_append \
     FROM table_commits WHERE table_name = $1 AND ($2::BIGINT IS NULL OR version < $2) \
     ORDER BY version DESC LIMIT $3";

/// $1 table. The oldest recorded version and the end of the run of versions recorded
/// without a hole from it.
pub(super) const RECORDED_RANGE: &str = "SELECT \
       (SELECT min(version) FROM table_commits WHERE table_name = $1) AS oldest, \
       (SELECT min(t.version) FROM table_commits t WHERE t.table_name = $1 \
          AND NOT EXISTS (SELECT 1 FROM table_commits u \
                          WHERE u.table_name = $1 AND u.version = t.version + 1)) AS through";

/// $1 table. Missing version ranges between 0 and the newest recorded version.
pub(super) const HISTORY_GAPS: &str = "SELECT prev + 1 AS gap_from, version - 1 AS gap_to FROM \
       (SELECT version, LAG(version, 1, -1::BIGINT) OVER (ORDER BY version) AS prev \
        FROM table_commits WHERE table_name = $1) s \
     WHERE version - prev > 1 ORDER BY gap_from";

/// $1 table .. $11 repaired_by. A stale write already recorded is left for UPDATE_STALE_WRITE.
pub(super) const INSERT_STALE_WRITE: &str = "INSERT INTO stale_writes \
     (table_name, version, committed_at, operation, engine_info, rewrite_versions, files, \
      sample_files, \"rows\", over_repair, repaired_by) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
     ON CONFLICT (table_name, version) DO NOTHING";

/// $1 table, $2 version, $3 rows, $4 repaired_by: fills in what was not known yet.
pub(super) const UPDATE_STALE_WRITE: &str = "UPDATE stale_writes SET \
       \"rows\" = COALESCE(\"rows\", $3), repaired_by = COALESCE(repaired_by, $4) \
     WHERE table_name = $1 AND version = $2 \
       AND ((\"rows\" IS NULL AND $3::BIGINT IS NOT NULL) \
            OR (repaired_by IS NULL AND $4::BIGINT IS NOT NULL))";

/// $1 table or NULL for all.
pub(super) const STALE_WRITES: &str = "SELECT table_name, version, committed_at, operation, \
       engine_info, rewrite_versions, files, sample_files, \"rows\", over_repair, repaired_by, \
       detected_at \
     FROM stale_writes WHERE ($1::TEXT IS NULL OR table_name = $1) \
     ORDER BY table_name, version";

/// Failure streaks: attempts that ended failed or conflict after the newest succeeded attempt
/// of the same (table, operation), with the newest failure's time and error.
pub(super) const FAILURE_STREAKS: &str = "\
    WITH last_ok AS ( \
      SELECT j.table_name, j.operation, max(a.finished_at) AS at \
      FROM job_attempts a JOIN jobs j ON j.id = a.job_id \
      WHERE a.outcome = 'succeeded' GROUP BY j.table_name, j.operation), \
    failed AS ( \
      SELECT j.table_name, j.operation, a.finished_at, a.error, \
             row_number() OVER (PARTITION BY j.table_name, j.operation \
                                ORDER BY a.finished_at DESC, a.id DESC) AS newest \
      FROM job_attempts a JOIN jobs j ON j.id = a.job_id \
      LEFT JOIN last_ok l ON l.table_name = j.table_name AND l.operation = j.operation \
      WHERE a.outcome IN ('failed', 'conflict') AND (l.at IS NULL OR a.finished_at > l.at)) \
    SELECT table_name, operation, count(*) AS failures, max(finished_at) AS last_failed_at, \
           max(CASE WHEN newest = 1 THEN error END) AS last_error \
    FROM failed GROUP BY table_name, operation ORDER BY table_name, operation";
