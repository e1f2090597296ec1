//! Every SQL statement the SQLite backend runs.
//!
//! Timestamps are written as `strftime('%Y-%m-%dT%H:%M:%fZ', ...)` (UTC, milliseconds)
//! and compared through `julianday()`, which also reads the `datetime('now')` form an
//! operator may type. Durations are bound as SQLite date modifiers ("+1.500000 seconds").

/// The columns of `jobs`, in `Job` order.
macro_rules! job_columns {
    () => {
        "id, table_name, operation, concurrency_key, state, \"trigger\", priority, run_at, \
         attempt, max_attempts, worker_id, lease_token, lease_expires_at, created_at, \
         started_at, finished_at, result, error"
    };
}

/// ?1 table, ?2 operation, ?3 key, ?4 trigger, ?5 priority, ?6 run_at or NULL (= now),
/// ?7 max_attempts. Returns no row if a queued job for (table, operation) exists.
pub(super) const INSERT_QUEUED: &str = concat!(
    "INSERT INTO jobs (table_name, operation, concurrency_key, state, \"trigger\", priority, \
     run_at, max_attempts, scheduled_for) \
     VALUES (?1, ?2, ?3, 'queued', ?4, ?5, \
             COALESCE(strftime('%Y-%m-%dT%H:%M:%fZ', ?6), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), \
             ?7, strftime('%Y-%m-%dT%H:%M:%fZ', ?8)) \
     ON CONFLICT DO NOTHING \
     RETURNING ",
    job_columns!()
);

/// The job of one cron tick. ?1 table, ?2 operation, ?3 scheduled_for.
pub(super) const SELECT_TICK: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE table_name = ?1 AND operation = ?2 \
       AND scheduled_for = strftime('%Y-%m-%dT%H:%M:%fZ', ?3)"
);

/// A manual request joining the queued job. ?1 table, ?2 operation, ?3 run_at or NULL
/// (= now), ?4 priority.
pub(super) const JOIN_QUEUED_MANUAL: &str = concat!(
    "UPDATE jobs SET \
       run_at = CASE \
         WHEN julianday(COALESCE(?3, 'now')) < julianday(run_at) \
         THEN strftime('%Y-%m-%dT%H:%M:%fZ', COALESCE(?3, 'now')) \
         ELSE run_at END, \
       priority = max(priority, ?4), \"trigger\" = 'manual' \
     WHERE table_name = ?1 AND operation = ?2 AND state = 'queued' \
     RETURNING ",
    job_columns!()
);

/// ?1 table, ?2 operation.
pub(super) const SELECT_QUEUED: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE table_name = ?1 AND operation = ?2 AND state = 'queued'"
);

/// The best due job whose key is free. Runs inside BEGIN IMMEDIATE: SQLite has one
/// writer at a time, so no other claim can slip in before our update.
pub(super) const CLAIM_CANDIDATE: &str = "\
    SELECT j.id FROM jobs j \
    WHERE j.state = 'queued' AND julianday(j.run_at) <= julianday('now') \
      AND NOT EXISTS (SELECT 1 FROM jobs r \
                      WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key) \
    ORDER BY j.priority DESC, julianday(j.run_at), j.id \
    LIMIT 1";

/// ?1 id, ?2 worker, ?3 token, ?4 lease modifier.
pub(super) const CLAIM_UPDATE: &str = concat!(
    "UPDATE jobs SET state = 'running', attempt = attempt + 1, worker_id = ?2, \
     lease_token = ?3, lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?4), \
     started_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), finished_at = NULL \
     WHERE id = ?1 AND state = 'queued' \
     RETURNING ",
    job_columns!()
);

/// ?1 job id, ?2 error.
pub(super) const CLOSE_STRAY_ATTEMPTS: &str = "\
    UPDATE job_attempts SET finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
    outcome = 'lost_lease', error = ?2 \
    WHERE job_id = ?1 AND outcome IS NULL";

/// ?1 job id, ?2 attempt, ?3 worker, ?4 token; started_at = the job's.
pub(super) const INSERT_ATTEMPT: &str = "\
    INSERT INTO job_attempts (job_id, attempt, worker_id, lease_token, started_at) \
    SELECT ?1, ?2, ?3, ?4, started_at FROM jobs WHERE id = ?1";

/// Due queued jobs whose key is held, ranked ahead of the claimed job
/// (?1 id, ?2 priority, ?3 run_at; all NULL when nothing was claimed), at most ?4.
pub(super) const KEY_WAITS: &str = "\
    SELECT j.id, j.table_name, j.operation, j.concurrency_key FROM jobs j \
    WHERE j.state = 'queued' AND julianday(j.run_at) <= julianday('now') \
      AND EXISTS (SELECT 1 FROM jobs r \
                  WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key) \
      AND (?1 IS NULL OR j.priority > ?2 \
           OR (j.priority = ?2 AND (julianday(j.run_at) < julianday(?3) \
               OR (julianday(j.run_at) = julianday(?3) AND j.id < ?1)))) \
    ORDER BY j.priority DESC, julianday(j.run_at), j.id \
    LIMIT ?4";

/// ?1 id, ?2 token, ?3 lease modifier.
pub(super) const HEARTBEAT: &str = "\
    UPDATE jobs SET lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3) \
    WHERE id = ?1 AND lease_token = ?2 AND state = 'running' \
    RETURNING lease_expires_at";

/// ?1 id, ?2 token, ?3 result (JSON text).
pub(super) const COMPLETE: &str = "\
    UPDATE jobs SET state = 'succeeded', finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
    result = ?3, error = NULL, lease_token = NULL, lease_expires_at = NULL \
    WHERE id = ?1 AND lease_token = ?2 AND state = 'running' \
    RETURNING id";

/// Did this token's attempt already succeed? ?1 job id, ?2 token.
pub(super) const COMPLETED_BY_TOKEN: &str = "\
    SELECT id FROM job_attempts WHERE job_id = ?1 AND lease_token = ?2 AND outcome = 'succeeded'";

/// Close the open attempt. ?1 job id, ?2 outcome, ?3 error.
pub(super) const CLOSE_ATTEMPT: &str = "\
    UPDATE job_attempts SET finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
    outcome = ?2, error = ?3 \
    WHERE job_id = ?1 AND outcome IS NULL";

/// The job if `token` holds its lease. ?1 id, ?2 token.
pub(super) const SELECT_LEASED: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE id = ?1 AND lease_token = ?2 AND state = 'running'"
);

/// Another queued job for the same (table, operation)? ?1 table, ?2 operation, ?3 id.
pub(super) const OTHER_QUEUED: &str = "\
    SELECT id FROM jobs \
    WHERE table_name = ?1 AND operation = ?2 AND state = 'queued' AND id <> ?3";

/// ?1 id, ?2 delay modifier, ?3 attempts to give back (0 or 1), ?4 error or NULL (keep).
pub(super) const REQUEUE: &str = "\
    UPDATE jobs SET state = 'queued', run_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2), \
    attempt = attempt - ?3, error = COALESCE(?4, error), \
    lease_token = NULL, lease_expires_at = NULL \
    WHERE id = ?1 \
    RETURNING run_at";

/// Terminal state without success. ?1 id, ?2 state, ?3 error.
pub(super) const FINISH: &str = "\
    UPDATE jobs SET state = ?2, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
    error = ?3, lease_token = NULL, lease_expires_at = NULL \
    WHERE id = ?1";

/// ?1 negative grace modifier, ?2 limit.
pub(super) const REAP_CANDIDATES: &str = "\
    SELECT id FROM jobs \
    WHERE state = 'running' AND julianday(lease_expires_at) < julianday('now', ?1) \
    ORDER BY julianday(lease_expires_at) \
    LIMIT ?2";

/// The job if its lease is still expired. ?1 id, ?2 negative grace modifier.
pub(super) const SELECT_EXPIRED: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE id = ?1 AND state = 'running' \
      AND julianday(lease_expires_at) < julianday('now', ?2)"
);

/// ?1 id, ?2 error.
pub(super) const CANCEL_QUEUED: &str = "\
    UPDATE jobs SET state = 'cancelled', finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
    error = ?2 \
    WHERE id = ?1 AND state = 'queued'";

/// ?1 id.
pub(super) const JOB_EXISTS: &str = "SELECT id FROM jobs WHERE id = ?1";

/// ?1 id.
pub(super) const GET_JOB: &str = concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = ?1");

/// ?1 table or NULL, ?2 state or NULL, ?3 limit.
pub(super) const LIST_JOBS: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE (?1 IS NULL OR table_name = ?1) AND (?2 IS NULL OR state = ?2) \
      ORDER BY id DESC LIMIT ?3"
);

/// ?1 job id.
pub(super) const ATTEMPTS: &str = "\
    SELECT id, job_id, attempt, worker_id, lease_token, started_at, finished_at, outcome, error \
    FROM job_attempts WHERE job_id = ?1 ORDER BY id";

pub(super) const COUNTS_BY_STATE: &str = "SELECT state, count(*) AS n FROM jobs GROUP BY state";

/// The latest success per (table, operation). julianday orders mixed text forms right.
pub(super) const LAST_SUCCESS: &str = "\
    SELECT table_name, operation, \
           strftime('%Y-%m-%dT%H:%M:%fZ', max(julianday(finished_at))) AS finished_at \
    FROM jobs WHERE state = 'succeeded' AND finished_at IS NOT NULL \
    GROUP BY table_name, operation ORDER BY table_name, operation";

/// ?1 table.
pub(super) const LATEST_JOBS_FOR_TABLE: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE id IN (SELECT max(id) FROM jobs WHERE table_name = ?1 GROUP BY operation) \
      ORDER BY operation"
);

/// ?1 table_name, ?2 paused. Upsert of an API pause override.
pub(super) const SET_PAUSED: &str = "INSERT INTO table_pauses (table_name, paused) VALUES (?1, ?2) \
     ON CONFLICT (table_name) DO UPDATE SET paused = excluded.paused, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')";

pub(super) const PAUSED_OVERRIDES: &str =
    "SELECT table_name, paused FROM table_pauses ORDER BY table_name";

pub(super) const RUNNING_JOBS: &str = concat!(
    "SELECT ",
    job_columns!(),
    " FROM jobs WHERE state = 'running' ORDER BY julianday(started_at), id"
);

// history (table_commits) and stale writes ---------------------------------------------

/// ?1 table, ?2 version, ?3 timestamp, ?4 operation, ?5 parameters, ?6 metrics, ?7 engine,
/// ?8 user, ?9 blind append. A version already recorded is left as it is.
pub(super) const INSERT_COMMIT: &str = "INSERT INTO table_commits \
     (table_name, version, \"timestamp\", operation, operation_parameters, operation_metrics, \
      engine_info, user_name, is_blind_append) \
     VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', ?3), ?4, ?5, ?6, ?7, ?8, ?9) \
     ON CONFLICT (table_name, version) DO NOTHING";

/// ?1 table, ?2 before (exclusive) or NULL, ?3 limit.
pub(super) const HISTORY: &str = "SELECT version, \"timestamp\", operation, operation_parameters, \
       operation_metrics, engine_info, user_name, is_blind_append \
     FROM table_commits WHERE table_name = ?1 AND (?2 IS NULL OR version < ?2) \
     ORDER BY version DESC LIMIT ?3";

/// ?1 table. The oldest recorded version and the end of the run of versions recorded
/// without a hole from it.
pub(super) const RECORDED_RANGE: &str = "SELECT \
       (SELECT min(version) FROM table_commits WHERE table_name = ?1) AS oldest, \
       (SELECT min(t.version) FROM table_commits t WHERE t.table_name = ?1 \
          AND NOT EXISTS (SELECT 1 FROM table_commits u \
                          WHERE u.table_name = ?1 AND u.version = t.version + 1)) AS through";

/// ?1 table. Missing version ranges between 0 and the newest recorded version.
pub(super) const HISTORY_GAPS: &str = "SELECT prev + 1 AS gap_from, version - 1 AS gap_to FROM \
       (SELECT version, LAG(version, 1, -1) OVER (ORDER BY version) AS prev \
        FROM table_commits WHERE table_name = ?1) s \
     WHERE version - prev > 1 ORDER BY gap_from";

/// ?1 table .. ?11 repaired_by. A stale write already recorded is left for UPDATE_STALE_WRITE.
pub(super) const INSERT_STALE_WRITE: &str = "INSERT INTO stale_writes \
     (table_name, version, committed_at, operation, engine_info, rewrite_versions, files, \
      sample_files, \"rows\", over_repair, repaired_by) \
     VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', ?3), ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
     ON CONFLICT (table_name, version) DO NOTHING";

/// ?1 table, ?2 version, ?3 rows, ?4 repaired_by: fills in what was not known yet.
pub(super) const UPDATE_STALE_WRITE: &str = "UPDATE stale_writes SET \
       \"rows\" = COALESCE(\"rows\", ?3), repaired_by = COALESCE(repaired_by, ?4) \
     WHERE table_name = ?1 AND version = ?2 \
       AND ((\"rows\" IS NULL AND ?3 IS NOT NULL) OR (repaired_by IS NULL AND ?4 IS NOT NULL))";

/// ?1 table or NULL for all.
pub(super) const STALE_WRITES: &str = "SELECT table_name, version, committed_at, operation, \
       engine_info, rewrite_versions, files, sample_files, \"rows\", over_repair, repaired_by, \
       detected_at \
     FROM stale_writes WHERE (?1 IS NULL OR table_name = ?1) \
     ORDER BY table_name, version";

/// Failure streaks: attempts that ended failed or conflict after the newest succeeded attempt
/// of the same (table, operation), with the newest failure's time and error.
pub(super) const FAILURE_STREAKS: &str = "\
    WITH last_ok AS ( \
      SELECT j.table_name, j.operation, max(julianday(a.finished_at)) AS at \
      FROM job_attempts a JOIN jobs j ON j.id = a.job_id \
      WHERE a.outcome = 'succeeded' GROUP BY j.table_name, j.operation), \
    failed AS ( \
      SELECT j.table_name, j.operation, julianday(a.finished_at) AS at, a.error, \
             row_number() OVER (PARTITION BY j.table_name, j.operation \
                                ORDER BY julianday(a.finished_at) DESC, a.id DESC) AS newest \
      FROM job_attempts a JOIN jobs j ON j.id = a.job_id \
      LEFT JOIN last_ok l ON l.table_name = j.table_name AND l.operation = j.operation \
      WHERE a.outcome IN ('failed', 'conflict') AND (l.at IS NULL OR julianday(a.finished_at) > l.at)) \
    SELECT table_name, operation, count(*) AS failures, \
           strftime('%Y-%m-%dT%H:%M:%fZ', max(at)) AS last_failed_at, \
           max(CASE WHEN newest = 1 THEN error END) AS last_error \
    FROM failed GROUP BY table_name, operation ORDER BY table_name, operation";
