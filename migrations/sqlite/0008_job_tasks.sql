-- The tasks a rewrite job is split into. Mirrors migrations/postgres/0008_job_tasks.sql
-- (times are TEXT as in 0001_jobs.sql; input and result are JSON text).
CREATE TABLE job_tasks (
    job_id           INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    task             INTEGER NOT NULL CHECK (task >= 0),
    state            TEXT    NOT NULL DEFAULT 'queued',
    worker_id        TEXT,
    lease_token      TEXT,
    lease_expires_at TEXT,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 3,
    input            TEXT    NOT NULL,
    result           TEXT,
    error            TEXT,
    created_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    started_at       TEXT,
    finished_at      TEXT,

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

CREATE INDEX job_tasks_queued ON job_tasks (job_id, task) WHERE state = 'queued';
CREATE INDEX job_tasks_running_lease ON job_tasks (lease_expires_at) WHERE state = 'running';
CREATE INDEX job_tasks_state ON job_tasks (state);
