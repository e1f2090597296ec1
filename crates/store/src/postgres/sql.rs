//! The Postgres texts of the driver's statements (their arguments and columns are documented
//! on [`Statements`]). Times come from `clock_timestamp()`; durations arrive as microseconds.

use crate::dialect::Statements;
use crate::dialect::{returning_job, select_jobs, task_columns};

/// The claim's candidate query with `$gate` (a filter, or nothing) among its conditions: each
/// path keeps a fixed statement of its own, so the planner keeps the claim's index plan (a
/// parameter deciding the filter cost it that plan).
macro_rules! claim_candidate {
    ($gate:literal) => {
        concat!(
            "SELECT j.id FROM jobs j \
             WHERE j.state = 'queued' AND j.run_at <= clock_timestamp() \
               AND j.id NOT IN (SELECT jsonb_array_elements_text($1)::bigint) ",
            $gate,
            "AND NOT EXISTS (SELECT 1 FROM jobs r \
                             WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key) \
             ORDER BY j.priority DESC, j.run_at, j.id \
             LIMIT 1 \
             FOR UPDATE OF j SKIP LOCKED"
        )
    };
}

pub(super) const STATEMENTS: Statements = Statements {
    insert_queued: returning_job!(
        "INSERT INTO jobs (table_name, operation, concurrency_key, state, \"trigger\", priority, \
         run_at, max_attempts, scheduled_for) \
         VALUES ($1, $2, $3, 'queued', $4, $5, COALESCE($6, clock_timestamp()), $7, $8) \
         ON CONFLICT DO NOTHING"
    ),
    select_tick: select_jobs!(
        "WHERE table_name = $1 AND operation = $2 AND scheduled_for = $3"
    ),
    join_queued_manual: returning_job!(
        "UPDATE jobs SET run_at = LEAST(run_at, COALESCE($3, clock_timestamp())), \
         priority = GREATEST(priority, $4), \"trigger\" = 'manual' \
         WHERE table_name = $1 AND operation = $2 AND state = 'queued'"
    ),
    select_queued: select_jobs!(
        "WHERE table_name = $1 AND operation = $2 AND state = 'queued'"
    ),
    claim_candidate: claim_candidate!(""),
    claim_candidate_admitted: claim_candidate!("AND j.budget_class IS NOT NULL "),
    claim_update: "\
        UPDATE jobs SET state = 'running', attempt = attempt + 1, worker_id = $2, \
        lease_token = $3, lease_expires_at = clock_timestamp() + $4 * interval '1 microsecond', \
        started_at = clock_timestamp(), finished_at = NULL \
        WHERE id = $1 AND state = 'queued' \
        RETURNING attempt",
    close_stray_attempts: "\
        UPDATE job_attempts SET finished_at = clock_timestamp(), outcome = 'lost_lease', error = $2 \
        WHERE job_id = $1 AND outcome IS NULL",
    // The claim's times are provisional: Postgres evaluates them before the unique check on
    // `jobs_one_running_per_key`, which may wait for the previous holder's transaction to
    // commit. This stamps the real start once the slot is ours, so an attempt never appears
    // to start before the previous attempt on its key finished.
    start_attempt: "\
        WITH opened AS ( \
          INSERT INTO job_attempts (job_id, attempt, worker_id, lease_token, started_at) \
          VALUES ($1, $2, $3, $4, clock_timestamp()) \
          RETURNING started_at) \
        UPDATE jobs SET started_at = opened.started_at, \
          lease_expires_at = opened.started_at + $5 * interval '1 microsecond' \
        FROM opened WHERE jobs.id = $1",
    key_waits: "\
        SELECT j.id, j.table_name, j.operation, j.concurrency_key FROM jobs j \
        WHERE j.state = 'queued' AND j.run_at <= clock_timestamp() \
          AND EXISTS (SELECT 1 FROM jobs r \
                      WHERE r.state = 'running' AND r.concurrency_key = j.concurrency_key) \
          AND ($1::bigint IS NULL OR j.priority > $2::integer \
               OR (j.priority = $2::integer AND (j.run_at < $3::timestamptz \
                   OR (j.run_at = $3::timestamptz AND j.id < $1::bigint)))) \
        ORDER BY j.priority DESC, j.run_at, j.id \
        LIMIT $4",
    heartbeat: "\
        UPDATE jobs SET lease_expires_at = clock_timestamp() + $3 * interval '1 microsecond' \
        WHERE id = $1 AND lease_token = $2 AND state = 'running' \
        RETURNING lease_expires_at",
    complete: "\
        UPDATE jobs SET state = 'succeeded', finished_at = clock_timestamp(), result = $3, \
        error = NULL, lease_token = NULL, lease_expires_at = NULL \
        WHERE id = $1 AND lease_token = $2 AND state = 'running' \
        RETURNING id",
    keep_spent: "\
        UPDATE jobs SET result = $3 WHERE id = $1 AND lease_token = $2 AND state = 'running' \
        RETURNING id",
    completed_by_token: "\
        SELECT id FROM job_attempts WHERE job_id = $1 AND lease_token = $2 AND outcome = 'succeeded'",
    close_attempt: "\
        UPDATE job_attempts SET finished_at = clock_timestamp(), outcome = $2, error = $3 \
        WHERE job_id = $1 AND outcome IS NULL",
    lock_leased: select_jobs!(
        "WHERE id = $1 AND lease_token = $2 AND state = 'running' FOR UPDATE"
    ),
    other_queued: "\
        SELECT id FROM jobs \
        WHERE table_name = $1 AND operation = $2 AND state = 'queued' AND id <> $3",
    requeue: "\
        UPDATE jobs SET state = 'queued', run_at = clock_timestamp() + $2 * interval '1 microsecond', \
        attempt = attempt - $3, error = COALESCE($4, error), \
        lease_token = NULL, lease_expires_at = NULL \
        WHERE id = $1 \
        RETURNING run_at",
    finish: "\
        UPDATE jobs SET state = $2, finished_at = clock_timestamp(), error = $3, \
        lease_token = NULL, lease_expires_at = NULL \
        WHERE id = $1",
    reap_candidates: "\
        SELECT id FROM jobs \
        WHERE state = 'running' \
          AND lease_expires_at + $1 * interval '1 microsecond' < clock_timestamp() \
        ORDER BY lease_expires_at \
        LIMIT $2",
    lock_expired: select_jobs!(
        "WHERE id = $1 AND state = 'running' \
          AND lease_expires_at + $2 * interval '1 microsecond' < clock_timestamp() \
          FOR UPDATE SKIP LOCKED"
    ),
    cancel_queued: "\
        UPDATE jobs SET state = 'cancelled', finished_at = clock_timestamp(), error = $2 \
        WHERE id = $1 AND state = 'queued'",
    get_job: select_jobs!("WHERE id = $1"),
    list_jobs: select_jobs!(
        "WHERE ($1::text IS NULL OR table_name = $1) \
          AND ($2::text IS NULL OR state = $2) \
          AND ($4::text IS NULL OR operation = $4) \
          ORDER BY id DESC LIMIT $3"
    ),
    attempts: "\
        SELECT id, job_id, attempt, worker_id, lease_token, started_at, finished_at, outcome, error \
        FROM job_attempts WHERE job_id = $1 ORDER BY id",
    counts_by_state: "SELECT state, count(*) AS n FROM jobs GROUP BY state",
    active_counts: "SELECT state, count(*) AS n FROM jobs \
         WHERE state IN ('queued', 'running') GROUP BY state",
    last_success: "\
        SELECT table_name, operation, last_success_at AS finished_at FROM operation_status \
        WHERE last_success_at IS NOT NULL ORDER BY table_name, operation",
    failure_streaks: "\
        SELECT table_name, operation, failures, last_failed_at, last_error \
        FROM operation_status WHERE failures > 0 ORDER BY table_name, operation",
    set_paused: "INSERT INTO table_pauses (table_name, paused) VALUES ($1, $2) \
         ON CONFLICT (table_name) DO UPDATE SET paused = excluded.paused, updated_at = clock_timestamp()",
    paused_overrides: "SELECT table_name, paused FROM table_pauses ORDER BY table_name",
    add_pin: "INSERT INTO table_pins (table_name, version, until, reason, created_by) \
         VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (table_name, version) DO UPDATE SET until = excluded.until, \
           reason = excluded.reason, created_by = excluded.created_by, created_at = clock_timestamp() \
         RETURNING table_name, version, until, reason, created_at, created_by",
    pins: "SELECT table_name, version, until, reason, created_at, created_by FROM table_pins \
         WHERE ($1::TEXT IS NULL OR table_name = $1) ORDER BY table_name, version",
    remove_pin: "DELETE FROM table_pins WHERE table_name = $1 AND version = $2",
    insert_commit: "INSERT INTO table_commits \
         (table_name, version, \"timestamp\", operation, operation_parameters, operation_metrics, \
          engine_info, user_name, is_blind_append, rewrite, tablekeeper_operation) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) \
         ON CONFLICT (table_name, version) DO NOTHING",
    history: "SELECT version, \"timestamp\", operation, operation_parameters, \
           operation_metrics, engine_info, user_name, is_blind_append, rewrite, \
           tablekeeper_operation \
         FROM table_commits WHERE table_name = $1 AND ($2::BIGINT IS NULL OR version < $2) \
         ORDER BY version DESC LIMIT $3",
    foreign_rewrites: "SELECT table_name, foreign_rewrites AS rewrites, \
           foreign_rewrite_version AS version, foreign_rewrite_timestamp AS \"timestamp\", \
           foreign_rewrite_operation AS operation, foreign_rewrite_engine AS engine_info \
         FROM table_status WHERE foreign_rewrites > 0 ORDER BY table_name",
    stale_write_counts: "SELECT table_name, stale_writes, stale_write_detected_at \
         FROM table_status WHERE stale_writes > 0 ORDER BY table_name",
    recorded_range: "SELECT \
           (SELECT min(version) FROM table_commits WHERE table_name = $1) AS oldest, \
           (SELECT min(t.version) FROM table_commits t WHERE t.table_name = $1 \
              AND NOT EXISTS (SELECT 1 FROM table_commits u \
                              WHERE u.table_name = $1 AND u.version = t.version + 1)) AS through",
    history_gaps: "SELECT prev + 1 AS gap_from, version - 1 AS gap_to FROM \
           (SELECT version, LAG(version, 1, -1::BIGINT) OVER (ORDER BY version) AS prev \
            FROM table_commits WHERE table_name = $1) s \
         WHERE version - prev > 1 ORDER BY gap_from",
    insert_stale_write: "INSERT INTO stale_writes \
         (table_name, version, committed_at, operation, engine_info, rewrite_versions, files, \
          sample_files, \"rows\", over_repair, repaired_by, kind) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (table_name, version) DO NOTHING",
    update_stale_write: "UPDATE stale_writes SET \
           \"rows\" = COALESCE(\"rows\", $3), repaired_by = COALESCE(repaired_by, $4) \
         WHERE table_name = $1 AND version = $2 \
           AND ((\"rows\" IS NULL AND $3::BIGINT IS NOT NULL) \
                OR (repaired_by IS NULL AND $4::BIGINT IS NOT NULL))",
    stale_writes: "SELECT table_name, version, committed_at, operation, \
           engine_info, rewrite_versions, files, sample_files, \"rows\", over_repair, repaired_by, \
           detected_at, kind \
         FROM stale_writes WHERE ($1::TEXT IS NULL OR table_name = $1) \
         ORDER BY table_name, version",
    beat_replica: "INSERT INTO replicas (replica_id) VALUES ($1) \
         ON CONFLICT (replica_id) DO UPDATE SET seen_at = clock_timestamp()",
    forget_replicas: "DELETE FROM replicas \
         WHERE seen_at < clock_timestamp() - $1 * interval '1 microsecond'",
    live_replicas: "SELECT replica_id FROM replicas \
         WHERE seen_at > clock_timestamp() - $1 * interval '1 microsecond' ORDER BY replica_id",
    leave_replica: "DELETE FROM replicas WHERE replica_id = $1",
    record_probe: "INSERT INTO table_probes \
           (table_name, replica_id, probed_at, probe, error, error_kind) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (table_name) DO UPDATE SET replica_id = excluded.replica_id, \
           probed_at = excluded.probed_at, probe = COALESCE(excluded.probe, table_probes.probe), \
           error = excluded.error, error_kind = excluded.error_kind, updated_at = clock_timestamp() \
         WHERE table_probes.probed_at <= excluded.probed_at",
    probes_since: "SELECT table_name, replica_id, probed_at, probe, error, error_kind, updated_at \
         FROM table_probes WHERE ($1::TIMESTAMPTZ IS NULL OR updated_at > $1 \
           OR ($3::TEXT IS NOT NULL AND updated_at = $1 AND table_name > $3)) \
           AND ($2::TEXT IS NULL OR replica_id <> $2) \
         ORDER BY updated_at, table_name LIMIT $4",
    record_figures: "INSERT INTO table_figures \
           (table_name, probed_at, version, files, small_files, size_bytes, erasure_pending_since) \
         SELECT $1, $2, $3, $4, $5, $6, $7 \
         WHERE NOT EXISTS (SELECT 1 FROM (SELECT * FROM table_figures WHERE table_name = $1 \
             ORDER BY probed_at DESC LIMIT 1) n \
           WHERE n.probed_at >= $2 OR (n.probed_at > $8 AND n.version = $3 AND n.files = $4 \
             AND n.small_files = $5 AND n.size_bytes = $6 \
             AND n.erasure_pending_since IS NOT DISTINCT FROM $7)) \
         ON CONFLICT DO NOTHING",
    prune_figures: "DELETE FROM table_figures WHERE table_name = $1 AND probed_at < \
         (SELECT probed_at FROM table_figures WHERE table_name = $1 \
          ORDER BY probed_at DESC LIMIT 1 OFFSET $2)",
    figures: "SELECT probed_at, version, files, small_files, size_bytes, erasure_pending_since \
         FROM table_figures WHERE table_name = $1 AND probed_at >= $2 ORDER BY probed_at",
    record_fleet_health: "INSERT INTO fleet_health (hour, counts) VALUES ($1, $2) \
         ON CONFLICT DO NOTHING",
    prune_fleet_health: "DELETE FROM fleet_health WHERE hour < $1",
    fleet_health: "SELECT hour, counts FROM fleet_health WHERE hour >= $1 ORDER BY hour",
    finished_jobs: select_jobs!(
        "WHERE finished_at IS NOT NULL AND state IN ('succeeded', 'failed', 'cancelled') \
          AND ($1::text IS NULL OR table_name = $1) \
          AND ($2::text IS NULL OR result->>'owner' = $2) \
          AND ($3::text IS NULL OR operation = $3) \
          AND ($4::timestamptz IS NULL OR finished_at >= $4) \
          ORDER BY finished_at DESC, id DESC LIMIT $5"
    ),
    record_probe_costs: "\
        INSERT INTO probe_costs (table_name, owner, replica_id, day, cpu_micros, get_requests, \
          put_requests, list_requests, head_requests, delete_requests, bytes_read, bytes_written) \
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
        ON CONFLICT (table_name, replica_id, day) DO UPDATE SET owner = EXCLUDED.owner, \
          cpu_micros = probe_costs.cpu_micros + EXCLUDED.cpu_micros, \
          get_requests = probe_costs.get_requests + EXCLUDED.get_requests, \
          put_requests = probe_costs.put_requests + EXCLUDED.put_requests, \
          list_requests = probe_costs.list_requests + EXCLUDED.list_requests, \
          head_requests = probe_costs.head_requests + EXCLUDED.head_requests, \
          delete_requests = probe_costs.delete_requests + EXCLUDED.delete_requests, \
          bytes_read = probe_costs.bytes_read + EXCLUDED.bytes_read, \
          bytes_written = probe_costs.bytes_written + EXCLUDED.bytes_written",
    probe_costs: "\
        SELECT table_name, owner, day, sum(cpu_micros)::bigint AS cpu_micros, \
          sum(get_requests)::bigint AS get_requests, sum(put_requests)::bigint AS put_requests, \
          sum(list_requests)::bigint AS list_requests, sum(head_requests)::bigint AS head_requests, \
          sum(delete_requests)::bigint AS delete_requests, sum(bytes_read)::bigint AS bytes_read, \
          sum(bytes_written)::bigint AS bytes_written \
        FROM probe_costs WHERE day >= $1 GROUP BY table_name, owner, day \
        ORDER BY table_name, owner, day",
    budget_lock: "SELECT pg_advisory_xact_lock(7412093815)",
    budget_queued: "\
        SELECT id, table_name, operation, \"trigger\", created_at, estimate FROM jobs \
        WHERE state = 'queued' AND run_at <= clock_timestamp() ORDER BY id",
    budget_spent: "\
        SELECT j.estimate->>'owner' AS owner, \
          CAST(ROUND(SUM(COALESCE((j.result->'cost'->>'cpu_seconds')::float8, (j.estimate->'cost'->>'cpu_seconds')::float8, 0)) * 1e6) AS BIGINT) AS cpu_micros \
        FROM jobs j WHERE (j.budget_class = 'budget' OR j.budget_class IS NULL) AND j.started_at >= $1 AND j.started_at < $2 \
        GROUP BY 1",
    budget_verdicts: "\
        UPDATE jobs j SET budget_class = v.class, budget_reason = v.reason, budget_note = v.note, \
          deferred_at = CASE WHEN v.reason IS NULL THEN j.deferred_at \
                             ELSE COALESCE(j.deferred_at, clock_timestamp()) END \
        FROM jsonb_to_recordset($1) AS v(id BIGINT, class TEXT, reason TEXT, note TEXT) \
        WHERE j.id = v.id AND j.state = 'queued' \
          AND (j.budget_class IS DISTINCT FROM v.class OR j.budget_reason IS DISTINCT FROM v.reason \
               OR j.budget_note IS DISTINCT FROM v.note)",
    budget_window: "\
        INSERT INTO budget_windows (window_start, window_end, limit_micros, mode) \
        VALUES ($1, $2, $3, $4) ON CONFLICT (window_start) DO UPDATE SET \
          window_end = excluded.window_end, limit_micros = excluded.limit_micros, \
          mode = excluded.mode, updated_at = clock_timestamp()",
    budget_deferrals: "\
        INSERT INTO budget_deferrals (job_id, window_start, table_name, operation, reason, mode, \
          rank, ranked) \
        SELECT d.id, $1, d.\"table\", d.operation, d.reason, $2, d.rank, d.ranked \
        FROM jsonb_to_recordset($3) AS d(id BIGINT, \"table\" TEXT, operation TEXT, reason TEXT, \
          rank INTEGER, ranked INTEGER) \
        WHERE EXISTS (SELECT 1 FROM jobs WHERE jobs.id = d.id) \
        ON CONFLICT (job_id, window_start) DO UPDATE SET reason = excluded.reason, \
          mode = excluded.mode, rank = excluded.rank, ranked = excluded.ranked",
    set_estimate: "UPDATE jobs SET estimate = $2 WHERE id = $1 AND state = 'queued'",
    budget_queue: "\
        SELECT table_name, operation, budget_class, budget_reason, budget_note, estimate, \
          deferred_at FROM jobs WHERE state = 'queued' ORDER BY table_name, operation",
    budget_report: "\
        SELECT w.window_start, w.window_end, w.limit_micros, w.mode, \
          (SELECT CAST(ROUND(COALESCE(SUM(COALESCE((j.result->'cost'->>'cpu_seconds')::float8, (j.estimate->'cost'->>'cpu_seconds')::float8, 0)), 0) * 1e6) AS BIGINT) FROM jobs j \
            WHERE (j.budget_class = 'budget' OR j.budget_class IS NULL) AND j.started_at >= w.window_start \
              AND j.started_at < w.window_end) AS spent_micros, \
          (SELECT COUNT(*) FROM jobs j WHERE j.budget_class IS NOT NULL \
            AND j.started_at >= w.window_start AND j.started_at < w.window_end) AS runs, \
          (SELECT COUNT(*) FROM budget_deferrals d WHERE d.window_start = w.window_start \
            AND d.mode = 'enforce') AS deferrals, \
          (SELECT COUNT(*) FROM budget_deferrals d WHERE d.window_start = w.window_start \
            AND d.mode = 'shadow') AS would_defer, \
          (SELECT CAST(MAX(EXTRACT(EPOCH FROM (COALESCE(j.started_at, clock_timestamp()) \
              - j.created_at))) AS BIGINT) \
            FROM budget_deferrals d JOIN jobs j ON j.id = d.job_id \
            WHERE d.window_start = w.window_start) AS longest_wait_seconds \
        FROM budget_windows w WHERE w.window_start >= $1 ORDER BY w.window_start",
    estimates_and_costs: "\
        SELECT operation, \
          CAST(ROUND((estimate->'cost'->>'cpu_seconds')::float8 * 1e6) AS BIGINT) AS estimated_micros, \
          CAST(ROUND((result->'cost'->>'cpu_seconds')::float8 * 1e6) AS BIGINT) AS measured_micros \
        FROM jobs WHERE finished_at >= $1 AND estimate->'cost'->>'cpu_seconds' IS NOT NULL \
          AND result->'cost'->>'cpu_seconds' IS NOT NULL ORDER BY id",
    insert_task: "INSERT INTO job_tasks (job_id, task, max_attempts, input) \
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
    next_task: "SELECT COALESCE(MAX(task) + 1, 0)::INTEGER AS next FROM job_tasks WHERE job_id = $1",
    job_tasks: concat!("SELECT ", task_columns!(), " FROM job_tasks WHERE job_id = $1 ORDER BY task"),
    claim_task_candidate: "\
        SELECT t.job_id, t.task FROM job_tasks t JOIN jobs j ON j.id = t.job_id \
        WHERE t.state = 'queued' AND j.state = 'running' \
          AND ($1::BIGINT IS NULL OR t.job_id = $1) \
        ORDER BY j.priority DESC, t.job_id, t.task \
        LIMIT 1 \
        FOR UPDATE OF t SKIP LOCKED",
    claim_task_update: concat!(
        "UPDATE job_tasks SET state = 'running', attempt = attempt + 1, worker_id = $3, \
         lease_token = $4, lease_expires_at = clock_timestamp() + $5 * interval '1 microsecond', \
         started_at = clock_timestamp(), finished_at = NULL \
         WHERE job_id = $1 AND task = $2 AND state = 'queued' RETURNING ",
        task_columns!()
    ),
    heartbeat_task: "\
        UPDATE job_tasks SET lease_expires_at = clock_timestamp() + $4 * interval '1 microsecond' \
        WHERE job_id = $1 AND task = $2 AND lease_token = $3 AND state = 'running' \
          AND EXISTS (SELECT 1 FROM jobs j WHERE j.id = $1 AND j.state = 'running') \
        RETURNING lease_expires_at",
    lock_task: concat!(
        "SELECT ", task_columns!(), " FROM job_tasks \
         WHERE job_id = $1 AND task = $2 AND lease_token = $3 AND state = 'running' FOR UPDATE"
    ),
    end_task: "\
        UPDATE job_tasks SET state = $3, result = $4, error = $5, attempt = attempt - $6, \
          lease_token = NULL, lease_expires_at = NULL, \
          finished_at = CASE WHEN $3 = 'queued' THEN NULL ELSE clock_timestamp() END \
        WHERE job_id = $1 AND task = $2 AND state = 'running'",
    reap_task_candidates: "\
        SELECT job_id, task FROM job_tasks \
        WHERE state = 'running' \
          AND lease_expires_at < clock_timestamp() - $1 * interval '1 microsecond' \
        ORDER BY lease_expires_at \
        LIMIT $2",
    lock_expired_task: concat!(
        "SELECT ", task_columns!(), ", (SELECT state FROM jobs WHERE id = job_tasks.job_id) AS job_state \
         FROM job_tasks WHERE job_id = $1 AND task = $2 AND state = 'running' \
           AND lease_expires_at < clock_timestamp() - $3 * interval '1 microsecond' \
         FOR UPDATE SKIP LOCKED"
    ),
    cancel_orphan_tasks: "\
        UPDATE job_tasks SET state = 'cancelled', finished_at = clock_timestamp(), error = $1 \
        WHERE state = 'queued' \
          AND job_id IN (SELECT id FROM jobs WHERE state IN ('succeeded', 'failed', 'cancelled'))",
    task_counts: "\
        SELECT t.state, count(*) AS n FROM job_tasks t JOIN jobs j ON j.id = t.job_id \
        WHERE j.state = 'running' GROUP BY t.state",
};
