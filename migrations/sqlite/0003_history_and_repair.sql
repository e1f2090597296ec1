-- Operations `purge` and `repair` join the job table (DESIGN.md, "Job table
-- (contract)"); `table_commits` keeps every commit's history beyond the log's retention;
-- `stale_writes` records commits planned on a snapshot older than a tablekeeper rewrite.
-- Mirrors migrations/postgres/0003_history_and_repair.sql.
--
-- SQLite cannot change a CHECK constraint in place, so `jobs` (and `job_attempts`, whose
-- foreign key points at it) are rebuilt: copy into new tables, drop the old ones (the
-- child first, so no ON DELETE CASCADE fires), rename, recreate the indexes. Renaming
-- rewrites job_attempts' foreign key and keeps the AUTOINCREMENT counters.

CREATE TABLE jobs_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name       TEXT    NOT NULL,
    operation        TEXT    NOT NULL,
    -- Jobs with equal keys never run at the same time (jobs_one_running_per_key).
    concurrency_key  TEXT    NOT NULL,
    state            TEXT    NOT NULL DEFAULT 'queued',
    "trigger"        TEXT    NOT NULL DEFAULT 'schedule',
    -- Higher runs first among due jobs.
    priority         INTEGER NOT NULL DEFAULT 0,
    -- Not before: a queued job is due once run_at <= now (retry backoff moves it).
    run_at           TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    -- Attempts consumed so far; a claim increments it, a graceful release gives it back.
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 3,
    -- Worker of the latest attempt (kept after the attempt ends, for operators).
    worker_id        TEXT,
    -- Set only while running; every write by a worker is fenced by lease_token.
    lease_token      TEXT,
    lease_expires_at TEXT,
    created_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    -- Start of the latest attempt.
    started_at       TEXT,
    -- Set when the job reaches succeeded, failed or cancelled.
    finished_at      TEXT,
    -- JSON metrics of a successful run.
    result           TEXT,
    -- Error of the latest failed attempt, or why the job was failed/cancelled.
    error            TEXT,

    CONSTRAINT jobs_operation_check
        CHECK (operation IN ('compact', 'zorder', 'vacuum', 'checkpoint', 'purge', 'repair')),
    CONSTRAINT jobs_state_check
        CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    CONSTRAINT jobs_trigger_check
        CHECK ("trigger" IN ('schedule', 'manual')),
    CONSTRAINT jobs_attempts_check
        CHECK (attempt >= 0 AND max_attempts >= 1),
    -- A queued job must be claimable; otherwise it would block its (table, operation)
    -- slot in jobs_one_queued_per_table_operation forever.
    CONSTRAINT jobs_queued_has_attempts_left
        CHECK (state <> 'queued' OR attempt < max_attempts),
    -- A running job always carries a complete lease; no other state carries one.
    CONSTRAINT jobs_lease_iff_running
        CHECK (CASE WHEN state = 'running'
                    THEN lease_token IS NOT NULL AND lease_expires_at IS NOT NULL
                         AND worker_id IS NOT NULL
                    ELSE lease_token IS NULL AND lease_expires_at IS NULL
               END),
    CONSTRAINT jobs_times_check
        CHECK (julianday(run_at) IS NOT NULL AND julianday(created_at) IS NOT NULL
               AND (lease_expires_at IS NULL OR julianday(lease_expires_at) IS NOT NULL)
               AND (started_at IS NULL OR julianday(started_at) IS NOT NULL)
               AND (finished_at IS NULL OR julianday(finished_at) IS NOT NULL)),
    CONSTRAINT jobs_result_json_check
        CHECK (result IS NULL OR json_valid(result))
);

INSERT INTO jobs_new SELECT * FROM jobs;

CREATE TABLE job_attempts_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id       INTEGER NOT NULL REFERENCES jobs_new (id) ON DELETE CASCADE,
    -- jobs.attempt after the claim. A graceful release gives the attempt back, so one
    -- job may show two rows with the same number: the first closed as 'cancelled'.
    attempt      INTEGER NOT NULL,
    worker_id    TEXT    NOT NULL,
    -- The lease token of this attempt (audit trail of the fencing).
    lease_token  TEXT,
    started_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    -- An attempt is inserted when its job is claimed, with finished_at and outcome NULL
    -- (an OPEN attempt), and closed when the job completes, fails, is released or is
    -- reaped. outcome NULL means "still open", never "unknown".
    finished_at  TEXT,
    outcome      TEXT,
    -- Why the attempt failed; for 'lost_lease' the worker and the lease expiry the reaper
    -- saw; for 'cancelled' the release reason.
    error        TEXT,

    CONSTRAINT job_attempts_outcome_check
        CHECK (outcome IN ('succeeded', 'failed', 'conflict', 'lost_lease', 'cancelled')),
    CONSTRAINT job_attempts_closed_together
        CHECK ((outcome IS NULL) = (finished_at IS NULL))
);

INSERT INTO job_attempts_new SELECT * FROM job_attempts;

DROP TABLE job_attempts;
DROP TABLE jobs;
ALTER TABLE jobs_new RENAME TO jobs;
ALTER TABLE job_attempts_new RENAME TO job_attempts;

-- Invariant: at most one running job per concurrency key.
CREATE UNIQUE INDEX jobs_one_running_per_key
    ON jobs (concurrency_key) WHERE state = 'running';

-- Invariant: at most one queued job per (table, operation).
CREATE UNIQUE INDEX jobs_one_queued_per_table_operation
    ON jobs (table_name, operation) WHERE state = 'queued';

-- Claim order: due queued jobs by priority desc, run_at, id.
CREATE INDEX jobs_claim_order
    ON jobs (priority DESC, run_at, id) WHERE state = 'queued';

-- Reaper: running jobs.
CREATE INDEX jobs_running_lease
    ON jobs (lease_expires_at) WHERE state = 'running';

-- API: jobs of a table newest first, jobs in a state newest first, last success.
CREATE INDEX jobs_table_name_id ON jobs (table_name, id DESC);
CREATE INDEX jobs_state_id ON jobs (state, id DESC);
CREATE INDEX jobs_last_success
    ON jobs (table_name, operation, finished_at DESC) WHERE state = 'succeeded';


CREATE INDEX job_attempts_job_id ON job_attempts (job_id, id);

-- At most one open attempt per job.
CREATE UNIQUE INDEX job_attempts_one_open_per_job
    ON job_attempts (job_id) WHERE outcome IS NULL;


-- History that outlives the log (DESIGN.md, "Log retention and history"): every
-- replica's probe copies each commit's commitInfo here, and log cleanup never deletes a
-- commit that is not here yet. Rows are never updated or deleted by tablekeeper.
CREATE TABLE table_commits (
    table_name            TEXT    NOT NULL,
    version               INTEGER NOT NULL CHECK (version >= 0),
    -- commit time: in-commit timestamp, else commitInfo.timestamp, else the file's mtime
    "timestamp"           TEXT    NOT NULL CHECK (julianday("timestamp") IS NOT NULL),
    operation             TEXT,
    operation_parameters  TEXT    CHECK (operation_parameters IS NULL OR json_valid(operation_parameters)),
    operation_metrics     TEXT    CHECK (operation_metrics IS NULL OR json_valid(operation_metrics)),
    engine_info           TEXT,
    user_name             TEXT,
    is_blind_append       INTEGER CHECK (is_blind_append IN (0, 1)),
    recorded_at           TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (table_name, version)
);

-- Stale writes: commits by other writers planned on a snapshot older than one of
-- tablekeeper's rewrites (DESIGN.md, "Known hazards"). Inserted once per (table, version)
-- by whichever replica's probe sees it first; `rows` and `repaired_by` are filled in
-- when known.
CREATE TABLE stale_writes (
    table_name        TEXT    NOT NULL,
    version           INTEGER NOT NULL,
    committed_at      TEXT    CHECK (committed_at IS NULL OR julianday(committed_at) IS NOT NULL),
    operation         TEXT,
    engine_info       TEXT,
    -- JSON array of the tablekeeper commits whose removed files it removed
    rewrite_versions  TEXT    NOT NULL CHECK (json_valid(rewrite_versions)),
    files             INTEGER NOT NULL,
    -- JSON array of up to ten of those files
    sample_files      TEXT    NOT NULL CHECK (json_valid(sample_files)),
    "rows"            INTEGER,
    over_repair       INTEGER NOT NULL DEFAULT 0 CHECK (over_repair IN (0, 1)),
    -- the repair commit, once there is one
    repaired_by       INTEGER,
    detected_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (table_name, version)
);
