//! The SQLite texts of the driver's statements (their arguments and columns are documented on
//! [`Statements`]).
//!
//! Times are written as `strftime('%Y-%m-%dT%H:%M:%fZ', ...)` (UTC, milliseconds) and compared
//! through `julianday()`, which also reads the `datetime('now')` form an operator may type.
//! Durations arrive as microseconds and become date modifiers (`printf('%+.6f seconds', …)`).
//! Statements run under SQLite's one write lock (the driver's transactions are `BEGIN
//! IMMEDIATE`), so a claim cannot race another and the candidate needs no row lock.

use crate::dialect::Statements;
use crate::dialect::{returning_job, select_jobs, task_columns};

/// The claim's candidate query with `$gate` (a filter, or nothing) among its conditions: each
/// path keeps a fixed statement of its own, as on Postgres.
macro_rules! claim_candidate {
    ($gate:literal) => {
        concat!(
            "SELECT j.id FROM jobs j \
             WHERE j.state = 'queued' AND julianday(j.run_at) <= julianday('now') \
               AND j.id NOT IN (SELECT value FROM json_each(?1)) ",
            $gate,
            "AND NOT EXISTS (SELECT 1 FROM jobs r \
                             WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key) \
             ORDER BY j.priority DESC, julianday(j.run_at), j.id \
             LIMIT 1"
        )
    };
}

pub(super) const STATEMENTS: Statements = Statements {
    insert_queued: returning_job!(
        "INSERT INTO jobs (table_name, operation, concurrency_key, state, \"trigger\", priority, \
         run_at, max_attempts, scheduled_for) \
         VALUES (?1, ?2, ?3, 'queued', ?4, ?5, \
                 COALESCE(strftime('%Y-%m-%dT%H:%M:%fZ', ?6), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')), \
                 ?7, strftime('%Y-%m-%dT%H:%M:%fZ', ?8)) \
         ON CONFLICT DO NOTHING"
    ),
    select_tick: select_jobs!(
        "WHERE table_name = ?1 AND operation = ?2 \
           AND scheduled_for = strftime('%Y-%m-%dT%H:%M:%fZ', ?3)"
    ),
    join_queued_manual: returning_job!(
        "UPDATE jobs SET \
           run_at = CASE \
             WHEN julianday(COALESCE(?3, 'now')) < julianday(run_at) \
             THEN strftime('%Y-%m-%dT%H:%M:%fZ', COALESCE(?3, 'now')) \
             ELSE run_at END, \
           priority = max(priority, ?4), \"trigger\" = 'manual' \
         WHERE table_name = ?1 AND operation = ?2 AND state = 'queued'"
    ),
    select_queued: select_jobs!(
        "WHERE table_name = ?1 AND operation = ?2 AND state = 'queued'"
    ),
    claim_candidate: claim_candidate!(""),
    claim_candidate_admitted: claim_candidate!("AND j.budget_class IS NOT NULL "),
    claim_update: "\
        UPDATE jobs SET state = 'running', attempt = attempt + 1, worker_id = ?2, lease_token = ?3, \
        lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.6f seconds', ?4 / 1e6)), \
        started_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), finished_at = NULL \
        WHERE id = ?1 AND state = 'queued' \
        RETURNING attempt",
    close_stray_attempts: "\
        UPDATE job_attempts SET finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
        outcome = 'lost_lease', error = ?2 \
        WHERE job_id = ?1 AND outcome IS NULL",
    start_attempt: "\
        INSERT INTO job_attempts (job_id, attempt, worker_id, lease_token, started_at) \
        SELECT ?1, ?2, ?3, ?4, started_at FROM jobs WHERE id = ?1",
    key_waits: "\
        SELECT j.id, j.table_name, j.operation, j.concurrency_key FROM jobs j \
        WHERE j.state = 'queued' AND julianday(j.run_at) <= julianday('now') \
          AND EXISTS (SELECT 1 FROM jobs r \
                      WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key) \
          AND (?1 IS NULL OR j.priority > ?2 \
               OR (j.priority = ?2 AND (julianday(j.run_at) < julianday(?3) \
                   OR (julianday(j.run_at) = julianday(?3) AND j.id < ?1)))) \
        ORDER BY j.priority DESC, julianday(j.run_at), j.id \
        LIMIT ?4",
    heartbeat: "\
        UPDATE jobs SET \
          lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.6f seconds', ?3 / 1e6)) \
        WHERE id = ?1 AND lease_token = ?2 AND state = 'running' \
        RETURNING lease_expires_at",
    complete: "\
        UPDATE jobs SET state = 'succeeded', finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
        result = ?3, error = NULL, lease_token = NULL, lease_expires_at = NULL \
        WHERE id = ?1 AND lease_token = ?2 AND state = 'running' \
        RETURNING id",
    keep_spent: "\
        UPDATE jobs SET result = ?3 WHERE id = ?1 AND lease_token = ?2 AND state = 'running' \
        RETURNING id",
    completed_by_token: "\
        SELECT id FROM job_attempts WHERE job_id = ?1 AND lease_token = ?2 AND outcome = 'succeeded'",
    close_attempt: "\
        UPDATE job_attempts SET finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
        outcome = ?2, error = ?3 \
        WHERE job_id = ?1 AND outcome IS NULL",
    lock_leased: select_jobs!(
        "WHERE id = ?1 AND lease_token = ?2 AND state = 'running'"
    ),
    other_queued: "\
        SELECT id FROM jobs \
        WHERE table_name = ?1 AND operation = ?2 AND state = 'queued' AND id <> ?3",
    requeue: "\
        UPDATE jobs SET state = 'queued', \
        run_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.6f seconds', ?2 / 1e6)), \
        attempt = attempt - ?3, error = COALESCE(?4, error), \
        lease_token = NULL, lease_expires_at = NULL \
        WHERE id = ?1 \
        RETURNING run_at",
    finish: "\
        UPDATE jobs SET state = ?2, finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
        error = ?3, lease_token = NULL, lease_expires_at = NULL \
        WHERE id = ?1",
    reap_candidates: "\
        SELECT id FROM jobs \
        WHERE state = 'running' \
          AND julianday(lease_expires_at) < julianday('now', printf('%+.6f seconds', -?1 / 1e6)) \
        ORDER BY julianday(lease_expires_at) \
        LIMIT ?2",
    lock_expired: select_jobs!(
        "WHERE id = ?1 AND state = 'running' \
          AND julianday(lease_expires_at) < julianday('now', printf('%+.6f seconds', -?2 / 1e6))"
    ),
    cancel_queued: "\
        UPDATE jobs SET state = 'cancelled', finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), \
        error = ?2 \
        WHERE id = ?1 AND state = 'queued'",
    get_job: select_jobs!("WHERE id = ?1"),
    list_jobs: select_jobs!(
        "WHERE (?1 IS NULL OR table_name = ?1) AND (?2 IS NULL OR state = ?2) \
          AND (?4 IS NULL OR operation = ?4) \
          ORDER BY id DESC LIMIT ?3"
    ),
    attempts: "\
        SELECT id, job_id, attempt, worker_id, lease_token, started_at, finished_at, outcome, error \
        FROM job_attempts WHERE job_id = ?1 ORDER BY id",
    counts_by_state: "SELECT state, count(*) AS n FROM jobs GROUP BY state",
    active_counts: "SELECT state, count(*) AS n FROM jobs \
         WHERE state IN ('queued', 'running') GROUP BY state",
    last_success: "\
        SELECT table_name, operation, last_success_at AS finished_at FROM operation_status \
        WHERE last_success_at IS NOT NULL ORDER BY table_name, operation",
    failure_streaks: "\
        SELECT table_name, operation, failures, last_failed_at, last_error \
        FROM operation_status WHERE failures > 0 ORDER BY table_name, operation",
    set_paused: "INSERT INTO table_pauses (table_name, paused) VALUES (?1, ?2) \
         ON CONFLICT (table_name) DO UPDATE SET paused = excluded.paused, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    paused_overrides: "SELECT table_name, paused FROM table_pauses ORDER BY table_name",
    add_pin: "INSERT INTO table_pins (table_name, version, until, reason, created_by) \
         VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (table_name, version) DO UPDATE SET until = excluded.until, \
           reason = excluded.reason, created_by = excluded.created_by, created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
         RETURNING table_name, version, until, reason, created_at, created_by",
    pins: "SELECT table_name, version, until, reason, created_at, created_by FROM table_pins \
         WHERE (?1 IS NULL OR table_name = ?1) ORDER BY table_name, version",
    remove_pin: "DELETE FROM table_pins WHERE table_name = ?1 AND version = ?2",
    insert_commit: "INSERT INTO table_commits \
         (table_name, version, \"timestamp\", operation, operation_parameters, operation_metrics, \
          engine_info, user_name, is_blind_append, rewrite, tablekeeper_operation) \
         VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', ?3), ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
         ON CONFLICT (table_name, version) DO NOTHING",
    history: "SELECT version, \"timestamp\", operation, operation_parameters, \
           operation_metrics, engine_info, user_name, is_blind_append, rewrite, \
           tablekeeper_operation \
         FROM table_commits WHERE table_name = ?1 AND (?2 IS NULL OR version < ?2) \
         ORDER BY version DESC LIMIT ?3",
    foreign_rewrites: "SELECT table_name, foreign_rewrites AS rewrites, \
           foreign_rewrite_version AS version, foreign_rewrite_timestamp AS \"timestamp\", \
           foreign_rewrite_operation AS operation, foreign_rewrite_engine AS engine_info \
         FROM table_status WHERE foreign_rewrites > 0 ORDER BY table_name",
    stale_write_counts: "SELECT table_name, stale_writes, stale_write_detected_at \
         FROM table_status WHERE stale_writes > 0 ORDER BY table_name",
    recorded_range: "SELECT \
           (SELECT min(version) FROM table_commits WHERE table_name = ?1) AS oldest, \
           (SELECT min(t.version) FROM table_commits t WHERE t.table_name = ?1 \
              AND NOT EXISTS (SELECT 1 FROM table_commits u \
                              WHERE u.table_name = ?1 AND u.version = t.version + 1)) AS through",
    history_gaps: "SELECT prev + 1 AS gap_from, version - 1 AS gap_to FROM \
           (SELECT version, LAG(version, 1, -1) OVER (ORDER BY version) AS prev \
            FROM table_commits WHERE table_name = ?1) s \
         WHERE version - prev > 1 ORDER BY gap_from",
    insert_stale_write: "INSERT INTO stale_writes \
         (table_name, version, committed_at, operation, engine_info, rewrite_versions, files, \
          sample_files, \"rows\", over_repair, repaired_by, kind) \
         VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', ?3), ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
         ON CONFLICT (table_name, version) DO NOTHING",
    update_stale_write: "UPDATE stale_writes SET \
           \"rows\" = COALESCE(\"rows\", ?3), repaired_by = COALESCE(repaired_by, ?4) \
         WHERE table_name = ?1 AND version = ?2 \
           AND ((\"rows\" IS NULL AND ?3 IS NOT NULL) OR (repaired_by IS NULL AND ?4 IS NOT NULL))",
    stale_writes: "SELECT table_name, version, committed_at, operation, \
           engine_info, rewrite_versions, files, sample_files, \"rows\", over_repair, repaired_by, \
           detected_at, kind \
         FROM stale_writes WHERE (?1 IS NULL OR table_name = ?1) \
         ORDER BY table_name, version",
    beat_replica: "INSERT INTO replicas (replica_id) VALUES (?1) \
         ON CONFLICT (replica_id) DO UPDATE SET seen_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    forget_replicas: "DELETE FROM replicas \
         WHERE seen_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%.6f seconds', ?1 / 1e6))",
    live_replicas: "SELECT replica_id FROM replicas \
         WHERE seen_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('-%.6f seconds', ?1 / 1e6)) \
         ORDER BY replica_id",
    leave_replica: "DELETE FROM replicas WHERE replica_id = ?1",
    record_probe: "INSERT INTO table_probes \
           (table_name, replica_id, probed_at, probe, error, error_kind) \
         VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', ?3), ?4, ?5, ?6) \
         ON CONFLICT (table_name) DO UPDATE SET replica_id = excluded.replica_id, \
           probed_at = excluded.probed_at, probe = COALESCE(excluded.probe, table_probes.probe), \
           error = excluded.error, error_kind = excluded.error_kind, \
           updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') \
         WHERE table_probes.probed_at <= excluded.probed_at",
    probes_since: "SELECT table_name, replica_id, probed_at, probe, error, error_kind, updated_at \
         FROM table_probes WHERE (?1 IS NULL OR updated_at > strftime('%Y-%m-%dT%H:%M:%fZ', ?1) \
           OR (?3 IS NOT NULL AND updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', ?1) AND table_name > ?3)) \
           AND (?2 IS NULL OR replica_id <> ?2) \
         ORDER BY updated_at, table_name LIMIT ?4",
    record_figures: "INSERT INTO table_figures \
           (table_name, probed_at, version, files, small_files, size_bytes, erasure_pending_since) \
         SELECT ?1, strftime('%Y-%m-%dT%H:%M:%fZ', ?2), ?3, ?4, ?5, ?6, \
           strftime('%Y-%m-%dT%H:%M:%fZ', ?7) \
         WHERE NOT EXISTS (SELECT 1 FROM (SELECT * FROM table_figures WHERE table_name = ?1 \
             ORDER BY julianday(probed_at) DESC LIMIT 1) n \
           WHERE julianday(n.probed_at) >= julianday(?2) \
             OR (julianday(n.probed_at) > julianday(?8) AND n.version = ?3 AND n.files = ?4 \
               AND n.small_files = ?5 AND n.size_bytes = ?6 \
               AND n.erasure_pending_since IS strftime('%Y-%m-%dT%H:%M:%fZ', ?7))) \
         ON CONFLICT DO NOTHING",
    prune_figures: "DELETE FROM table_figures WHERE table_name = ?1 AND julianday(probed_at) < \
         (SELECT julianday(probed_at) FROM table_figures WHERE table_name = ?1 \
          ORDER BY julianday(probed_at) DESC LIMIT 1 OFFSET ?2)",
    figures: "SELECT probed_at, version, files, small_files, size_bytes, erasure_pending_since \
         FROM table_figures WHERE table_name = ?1 \
           AND julianday(probed_at) >= julianday(?2) ORDER BY julianday(probed_at)",
    record_fleet_health: "INSERT INTO fleet_health (hour, counts) \
         VALUES (strftime('%Y-%m-%dT%H:%M:%fZ', ?1), ?2) ON CONFLICT DO NOTHING",
    prune_fleet_health: "DELETE FROM fleet_health WHERE julianday(hour) < julianday(?1)",
    fleet_health: "SELECT hour, counts FROM fleet_health \
         WHERE julianday(hour) >= julianday(?1) ORDER BY julianday(hour)",
    finished_jobs: select_jobs!(
        "WHERE finished_at IS NOT NULL AND state IN ('succeeded', 'failed', 'cancelled') \
          AND (?1 IS NULL OR table_name = ?1) \
          AND (?2 IS NULL OR json_extract(result, '$.owner') = ?2) \
          AND (?3 IS NULL OR operation = ?3) \
          AND (?4 IS NULL OR julianday(finished_at) >= julianday(?4)) \
          ORDER BY julianday(finished_at) DESC, id DESC LIMIT ?5"
    ),
    record_probe_costs: "\
        INSERT INTO probe_costs (table_name, owner, replica_id, day, cpu_micros, get_requests, \
          put_requests, list_requests, head_requests, delete_requests, bytes_read, bytes_written) \
        VALUES (?1, ?2, ?3, strftime('%Y-%m-%dT%H:%M:%fZ', ?4), ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) \
        ON CONFLICT (table_name, replica_id, day) DO UPDATE SET owner = excluded.owner, \
          cpu_micros = probe_costs.cpu_micros + excluded.cpu_micros, \
          get_requests = probe_costs.get_requests + excluded.get_requests, \
          put_requests = probe_costs.put_requests + excluded.put_requests, \
          list_requests = probe_costs.list_requests + excluded.list_requests, \
          head_requests = probe_costs.head_requests + excluded.head_requests, \
          delete_requests = probe_costs.delete_requests + excluded.delete_requests, \
          bytes_read = probe_costs.bytes_read + excluded.bytes_read, \
          bytes_written = probe_costs.bytes_written + excluded.bytes_written",
    probe_costs: "\
        SELECT table_name, owner, day, sum(cpu_micros) AS cpu_micros, \
          sum(get_requests) AS get_requests, sum(put_requests) AS put_requests, \
          sum(list_requests) AS list_requests, sum(head_requests) AS head_requests, \
          sum(delete_requests) AS delete_requests, sum(bytes_read) AS bytes_read, \
          sum(bytes_written) AS bytes_written \
        FROM probe_costs WHERE julianday(day) >= julianday(?1) \
        GROUP BY table_name, owner, day ORDER BY table_name, owner, day",
    budget_lock: "SELECT 1",
    budget_queued: "\
        SELECT id, table_name, operation, \"trigger\", created_at, estimate FROM jobs \
        WHERE state = 'queued' AND julianday(run_at) <= julianday('now') ORDER BY id",
    budget_spent: "\
        SELECT json_extract(j.estimate, '$.owner') AS owner, \
          CAST(ROUND(SUM(COALESCE(json_extract(j.result, '$.cost.cpu_seconds'), json_extract(j.estimate, '$.cost.cpu_seconds'), 0)) * 1e6) AS INTEGER) AS cpu_micros \
        FROM jobs j WHERE (j.budget_class = 'budget' OR j.budget_class IS NULL) \
          AND julianday(j.started_at) >= julianday(?1) AND julianday(j.started_at) < julianday(?2) \
        GROUP BY 1",
    budget_verdicts: "\
        UPDATE jobs SET budget_class = v.class, budget_reason = v.reason, budget_note = v.note, \
          deferred_at = CASE WHEN v.reason IS NULL THEN jobs.deferred_at \
                             ELSE COALESCE(jobs.deferred_at, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) END \
        FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.class') AS class, \
                json_extract(value, '$.reason') AS reason, json_extract(value, '$.note') AS note \
              FROM json_each(?1)) AS v \
        WHERE jobs.id = v.id AND jobs.state = 'queued' \
          AND (jobs.budget_class IS NOT v.class OR jobs.budget_reason IS NOT v.reason \
               OR jobs.budget_note IS NOT v.note)",
    budget_window: "\
        INSERT INTO budget_windows (window_start, window_end, limit_micros, mode) \
        VALUES (?1, ?2, ?3, ?4) ON CONFLICT (window_start) DO UPDATE SET \
          window_end = excluded.window_end, limit_micros = excluded.limit_micros, \
          mode = excluded.mode, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    budget_deferrals: "\
        INSERT INTO budget_deferrals (job_id, window_start, table_name, operation, reason, mode, \
          rank, ranked) \
        SELECT json_extract(value, '$.id'), ?1, json_extract(value, '$.table'), \
          json_extract(value, '$.operation'), json_extract(value, '$.reason'), ?2, \
          json_extract(value, '$.rank'), json_extract(value, '$.ranked') \
        FROM json_each(?3) WHERE EXISTS (SELECT 1 FROM jobs WHERE jobs.id = json_extract(value, '$.id')) \
        ON CONFLICT (job_id, window_start) DO UPDATE SET reason = excluded.reason, \
          mode = excluded.mode, rank = excluded.rank, ranked = excluded.ranked",
    set_estimate: "UPDATE jobs SET estimate = ?2 WHERE id = ?1 AND state = 'queued'",
    budget_queue: "\
        SELECT table_name, operation, budget_class, budget_reason, budget_note, estimate, \
          deferred_at FROM jobs WHERE state = 'queued' ORDER BY table_name, operation",
    budget_report: "\
        SELECT w.window_start, w.window_end, w.limit_micros, w.mode, \
          (SELECT CAST(ROUND(COALESCE(SUM(COALESCE(json_extract(j.result, '$.cost.cpu_seconds'), json_extract(j.estimate, '$.cost.cpu_seconds'), 0)), 0) * 1e6) AS INTEGER) FROM jobs j \
            WHERE (j.budget_class = 'budget' OR j.budget_class IS NULL) AND julianday(j.started_at) >= julianday(w.window_start) \
              AND julianday(j.started_at) < julianday(w.window_end)) AS spent_micros, \
          (SELECT COUNT(*) FROM jobs j WHERE j.budget_class IS NOT NULL \
            AND julianday(j.started_at) >= julianday(w.window_start) \
            AND julianday(j.started_at) < julianday(w.window_end)) AS runs, \
          (SELECT COUNT(*) FROM budget_deferrals d WHERE d.window_start = w.window_start \
            AND d.mode = 'enforce') AS deferrals, \
          (SELECT COUNT(*) FROM budget_deferrals d WHERE d.window_start = w.window_start \
            AND d.mode = 'shadow') AS would_defer, \
          (SELECT CAST(MAX((julianday(COALESCE(j.started_at, 'now')) - julianday(j.created_at)) \
              * 86400) AS INTEGER) \
            FROM budget_deferrals d JOIN jobs j ON j.id = d.job_id \
            WHERE d.window_start = w.window_start) AS longest_wait_seconds \
        FROM budget_windows w WHERE julianday(w.window_start) >= julianday(?1) \
        ORDER BY julianday(w.window_start)",
    estimates_and_costs: "\
        SELECT operation, \
          CAST(ROUND(json_extract(estimate, '$.cost.cpu_seconds') * 1e6) AS INTEGER) AS estimated_micros, \
          CAST(ROUND(json_extract(result, '$.cost.cpu_seconds') * 1e6) AS INTEGER) AS measured_micros \
        FROM jobs WHERE julianday(finished_at) >= julianday(?1) \
          AND json_extract(estimate, '$.cost.cpu_seconds') IS NOT NULL \
          AND json_extract(result, '$.cost.cpu_seconds') IS NOT NULL ORDER BY id",
    insert_task: "INSERT INTO job_tasks (job_id, task, max_attempts, input) \
         VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
    next_task: "SELECT COALESCE(MAX(task) + 1, 0) AS next FROM job_tasks WHERE job_id = ?1",
    job_tasks: concat!("SELECT ", task_columns!(), " FROM job_tasks WHERE job_id = ?1 ORDER BY task"),
    claim_task_candidate: "\
        SELECT t.job_id, t.task FROM job_tasks t JOIN jobs j ON j.id = t.job_id \
        WHERE t.state = 'queued' AND j.state = 'running' \
          AND (?1 IS NULL OR t.job_id = ?1) \
        ORDER BY j.priority DESC, t.job_id, t.task \
        LIMIT 1",
    claim_task_update: concat!(
        "UPDATE job_tasks SET state = 'running', attempt = attempt + 1, worker_id = ?3, \
         lease_token = ?4, \
         lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.6f seconds', ?5 / 1e6)), \
         started_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), finished_at = NULL \
         WHERE job_id = ?1 AND task = ?2 AND state = 'queued' RETURNING ",
        task_columns!()
    ),
    heartbeat_task: "\
        UPDATE job_tasks SET \
          lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.6f seconds', ?4 / 1e6)) \
        WHERE job_id = ?1 AND task = ?2 AND lease_token = ?3 AND state = 'running' \
          AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = ?1 AND j.state = 'running') \
        RETURNING lease_expires_at",
    lock_task: concat!(
        "SELECT ", task_columns!(), " FROM job_tasks \
         WHERE job_id = ?1 AND task = ?2 AND lease_token = ?3 AND state = 'running'"
    ),
    end_task: "\
        UPDATE job_tasks SET state = ?3, result = ?4, error = ?5, attempt = attempt - ?6, \
          lease_token = NULL, lease_expires_at = NULL, \
          finished_at = CASE WHEN ?3 = 'queued' THEN NULL \
                             ELSE strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END \
        WHERE job_id = ?1 AND task = ?2 AND state = 'running'",
    reap_task_candidates: "\
        SELECT job_id, task FROM job_tasks \
        WHERE state = 'running' \
          AND julianday(lease_expires_at) < julianday('now', printf('%+.6f seconds', -?1 / 1e6)) \
        ORDER BY julianday(lease_expires_at) \
        LIMIT ?2",
    lock_expired_task: concat!(
        "SELECT ", task_columns!(), ", (SELECT state FROM jobs WHERE id = job_tasks.job_id) AS job_state \
         FROM job_tasks WHERE job_id = ?1 AND task = ?2 AND state = 'running' \
           AND julianday(lease_expires_at) < julianday('now', printf('%+.6f seconds', -?3 / 1e6))"
    ),
    cancel_orphan_tasks: "\
        UPDATE job_tasks SET state = 'cancelled', \
          finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), error = ?1 \
        WHERE state = 'queued' \
          AND job_id IN (SELECT id FROM jobs WHERE state IN ('succeeded', 'failed', 'cancelled'))",
    task_counts: "\
        SELECT t.state, count(*) AS n FROM job_tasks t JOIN jobs j ON j.id = t.job_id \
        WHERE j.state = 'running' GROUP BY t.state",
};
