-- The tasks a rewrite job is split into (DESIGN.md "Job table (contract)", README "Tasks"):
-- one compaction bin group, one partition's Z-order, one set of purge files, each of at most
-- `maintenance.max_task_bytes` input. The replica running the job plans them at one table
-- version; any replica claims a queued task of a running job (FOR UPDATE SKIP LOCKED),
-- heartbeats its lease and commits the task's files on its own. The job keeps its table's
-- concurrency key (jobs_one_running_per_key) while any task runs, so no other maintenance
-- job of that table overlaps the tasks.
CREATE TABLE job_tasks (
    job_id           BIGINT      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    -- 0, 1, ... in plan order; a re-planned task's successors get the next numbers.
    task             INTEGER     NOT NULL CHECK (task >= 0),
    -- queued → running → succeeded | failed; `replanned`: its inputs were no longer active
    -- when it ran, so it committed nothing and the job planned their successors; `cancelled`:
    -- its job ended before the task ran.
    state            TEXT        NOT NULL DEFAULT 'queued',
    worker_id        TEXT,
    lease_token      UUID,
    lease_expires_at TIMESTAMPTZ,
    -- Attempts consumed so far (a claim increments it); at max_attempts a failed or
    -- expired attempt fails the task, and with it the job.
    attempt          INTEGER     NOT NULL DEFAULT 0,
    max_attempts     INTEGER     NOT NULL DEFAULT 3,
    -- What the task rewrites: {"kind", "partition", "files": [paths], "bytes"}.
    input            JSONB       NOT NULL,
    -- What it committed (versions, files and bytes removed and added) once succeeded.
    result           JSONB,
    error            TEXT,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    started_at       TIMESTAMPTZ,
    finished_at      TIMESTAMPTZ,

    PRIMARY KEY (job_id, task),
    CONSTRAINT job_tasks_state_check
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'replanned', 'cancelled')),
    CONSTRAINT job_tasks_attempts_check
        CHECK (attempt >= 0 AND max_attempts >= 1),
    CONSTRAINT job_tasks_lease_iff_running
        CHECK (CASE WHEN state = 'running'
                    THEN lease_token IS NOT NULL AND lease_expires_at IS NOT NULL
                         AND worker_id IS NOT NULL
                    ELSE lease_token IS NULL AND lease_expires_at IS NULL
               END)
);

COMMENT ON TABLE job_tasks IS
    'tasks of rewrite jobs; any replica claims a queued task of a running job';

-- Claims: queued tasks in plan order. Reaper: running tasks by lease expiry.
CREATE INDEX job_tasks_queued ON job_tasks (job_id, task) WHERE state = 'queued';
CREATE INDEX job_tasks_running_lease ON job_tasks (lease_expires_at) WHERE state = 'running';
-- tablekeeper_tasks{state}
CREATE INDEX job_tasks_state ON job_tasks (state);
