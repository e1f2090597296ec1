-- Operations `purge` and `repair` join the job table (DESIGN.md, "Job table
-- (contract)"); `table_commits` keeps every commit's history beyond the log's retention;
-- `stale_writes` records commits planned on a snapshot older than a tablekeeper rewrite.

ALTER TABLE jobs DROP CONSTRAINT jobs_operation_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_operation_check
    CHECK (operation IN ('compact', 'zorder', 'vacuum', 'checkpoint', 'purge', 'repair'));

-- History that outlives the log (DESIGN.md, "Log retention and history"): every
-- replica's probe copies each commit's commitInfo here, and log cleanup never deletes a
-- commit that is not here yet. Rows are never updated or deleted by tablekeeper.
CREATE TABLE table_commits (
    table_name            TEXT        NOT NULL,
    version               BIGINT      NOT NULL CHECK (version >= 0),
    -- commit time: in-commit timestamp, else commitInfo.timestamp, else the file's mtime
    "timestamp"           TIMESTAMPTZ NOT NULL,
    operation             TEXT,
    operation_parameters  JSONB,
    operation_metrics     JSONB,
    engine_info           TEXT,
    user_name             TEXT,
    is_blind_append       BOOLEAN,
    recorded_at           TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (table_name, version)
);

COMMENT ON TABLE table_commits IS
    'commitInfo of every commit of every maintained table, kept beyond the log retention';

-- Stale writes: commits by other writers planned on a snapshot older than one of
-- tablekeeper's rewrites (DESIGN.md, "Known hazards"). Inserted once per (table, version)
-- by whichever replica's probe sees it first; "rows" and repaired_by are filled in
-- when known.
CREATE TABLE stale_writes (
    table_name        TEXT        NOT NULL,
    version           BIGINT      NOT NULL,
    committed_at      TIMESTAMPTZ,
    operation         TEXT,
    engine_info       TEXT,
    -- the tablekeeper commits whose removed files it removed
    rewrite_versions  JSONB       NOT NULL,
    files             BIGINT      NOT NULL,
    -- up to ten of those files
    sample_files      JSONB       NOT NULL,
    "rows"            BIGINT,
    over_repair       BOOLEAN     NOT NULL DEFAULT FALSE,
    -- the repair commit, once there is one
    repaired_by       BIGINT,
    detected_at       TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (table_name, version)
);
