-- What every replica's refresher reads every few seconds, kept current by the writes that
-- change it (the triggers below), so that one refresh reads rows in proportion to the fleet,
-- never to the history in jobs, job_attempts, table_commits and stale_writes (which only
-- grow). The tables the refresher read before are unchanged and stay the record; these
-- summarise them. Hand-written rows in the record (an operator's INSERT) are summarised too.
--
-- Append-only: once released this file is never edited.

-- Per (table, operation): the newest successful job, and the failure streak every replica
-- exports (tablekeeper_consecutive_failures): failed or conflicting attempts since the
-- operation's last successful attempt, the newest of them and its error.
CREATE TABLE operation_status (
    table_name      TEXT        NOT NULL,
    operation       TEXT        NOT NULL,
    last_success_at TIMESTAMPTZ,
    failures        BIGINT      NOT NULL DEFAULT 0 CHECK (failures >= 0),
    last_failed_at  TIMESTAMPTZ,
    last_error      TEXT,
    PRIMARY KEY (table_name, operation)
);

-- Per table: the rewrites by other engines recorded in table_commits (how many, and the
-- newest: tablekeeper_foreign_rewrites_total), and the stale writes recorded (how many, and
-- when the newest was detected: tablekeeper_stale_writes_total).
CREATE TABLE table_status (
    table_name                TEXT   PRIMARY KEY,
    foreign_rewrites          BIGINT NOT NULL DEFAULT 0 CHECK (foreign_rewrites >= 0),
    foreign_rewrite_version   BIGINT,
    foreign_rewrite_timestamp TIMESTAMPTZ,
    foreign_rewrite_operation TEXT,
    foreign_rewrite_engine    TEXT,
    stale_writes              BIGINT NOT NULL DEFAULT 0 CHECK (stale_writes >= 0),
    stale_write_detected_at   TIMESTAMPTZ
);

-- Jobs queued or running, which tablekeeper_jobs counts (every other job is history).
CREATE INDEX jobs_active ON jobs (state) WHERE state IN ('queued', 'running');

CREATE FUNCTION operation_status_success() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO operation_status (table_name, operation, last_success_at)
    VALUES (NEW.table_name, NEW.operation, NEW.finished_at)
    ON CONFLICT (table_name, operation) DO UPDATE
        SET last_success_at = GREATEST(operation_status.last_success_at, excluded.last_success_at);
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_succeeded AFTER INSERT OR UPDATE OF state, finished_at ON jobs
    FOR EACH ROW WHEN (NEW.state = 'succeeded' AND NEW.finished_at IS NOT NULL)
    EXECUTE FUNCTION operation_status_success();

CREATE FUNCTION operation_status_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    job_table TEXT;
    job_operation TEXT;
BEGIN
    SELECT table_name, operation INTO job_table, job_operation FROM jobs WHERE id = NEW.job_id;
    IF NEW.outcome = 'succeeded' THEN
        INSERT INTO operation_status (table_name, operation) VALUES (job_table, job_operation)
        ON CONFLICT (table_name, operation) DO UPDATE
            SET failures = 0, last_failed_at = NULL, last_error = NULL;
    ELSIF NEW.outcome IN ('failed', 'conflict') THEN
        INSERT INTO operation_status (table_name, operation, failures, last_failed_at, last_error)
        VALUES (job_table, job_operation, 1, NEW.finished_at, NEW.error)
        ON CONFLICT (table_name, operation) DO UPDATE
            SET failures = operation_status.failures + 1,
                last_error = CASE
                    WHEN operation_status.last_failed_at IS NULL
                      OR excluded.last_failed_at >= operation_status.last_failed_at
                    THEN excluded.last_error ELSE operation_status.last_error END,
                last_failed_at = GREATEST(operation_status.last_failed_at, excluded.last_failed_at);
    END IF;
    RETURN NULL;
END
$$;

-- An attempt is inserted open (outcome NULL) at its claim and closed once.
CREATE TRIGGER job_attempts_closed AFTER UPDATE OF outcome ON job_attempts
    FOR EACH ROW WHEN (OLD.outcome IS NULL AND NEW.outcome IS NOT NULL)
    EXECUTE FUNCTION operation_status_attempt();
CREATE TRIGGER job_attempts_inserted_closed AFTER INSERT ON job_attempts
    FOR EACH ROW WHEN (NEW.outcome IS NOT NULL)
    EXECUTE FUNCTION operation_status_attempt();

CREATE FUNCTION table_status_foreign_rewrite() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO table_status (table_name, foreign_rewrites, foreign_rewrite_version,
        foreign_rewrite_timestamp, foreign_rewrite_operation, foreign_rewrite_engine)
    VALUES (NEW.table_name, 1, NEW.version, NEW."timestamp", NEW.operation, NEW.engine_info)
    ON CONFLICT (table_name) DO UPDATE SET
        foreign_rewrites = table_status.foreign_rewrites + 1,
        foreign_rewrite_timestamp = CASE WHEN table_status.foreign_rewrite_version IS NULL
            OR excluded.foreign_rewrite_version > table_status.foreign_rewrite_version
            THEN excluded.foreign_rewrite_timestamp ELSE table_status.foreign_rewrite_timestamp END,
        foreign_rewrite_operation = CASE WHEN table_status.foreign_rewrite_version IS NULL
            OR excluded.foreign_rewrite_version > table_status.foreign_rewrite_version
            THEN excluded.foreign_rewrite_operation ELSE table_status.foreign_rewrite_operation END,
        foreign_rewrite_engine = CASE WHEN table_status.foreign_rewrite_version IS NULL
            OR excluded.foreign_rewrite_version > table_status.foreign_rewrite_version
            THEN excluded.foreign_rewrite_engine ELSE table_status.foreign_rewrite_engine END,
        foreign_rewrite_version = GREATEST(table_status.foreign_rewrite_version,
            excluded.foreign_rewrite_version);
    RETURN NULL;
END
$$;

-- Commits are inserted once (ON CONFLICT DO NOTHING inserts no row, and fires nothing).
CREATE TRIGGER table_commits_foreign_rewrite AFTER INSERT ON table_commits
    FOR EACH ROW WHEN (NEW.rewrite AND NEW.tablekeeper_operation IS NULL)
    EXECUTE FUNCTION table_status_foreign_rewrite();

CREATE FUNCTION table_status_stale_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO table_status (table_name, stale_writes, stale_write_detected_at)
    VALUES (NEW.table_name, 1, NEW.detected_at)
    ON CONFLICT (table_name) DO UPDATE SET
        stale_writes = table_status.stale_writes + 1,
        stale_write_detected_at = GREATEST(table_status.stale_write_detected_at,
            excluded.stale_write_detected_at);
    RETURN NULL;
END
$$;

CREATE TRIGGER stale_writes_recorded AFTER INSERT ON stale_writes
    FOR EACH ROW EXECUTE FUNCTION table_status_stale_write();

-- What the record already holds.
INSERT INTO operation_status (table_name, operation, last_success_at)
SELECT table_name, operation, max(finished_at) FROM jobs
WHERE state = 'succeeded' AND finished_at IS NOT NULL
GROUP BY table_name, operation;

WITH last_ok AS (
    SELECT j.table_name, j.operation, max(a.finished_at) AS at
    FROM job_attempts a JOIN jobs j ON j.id = a.job_id
    WHERE a.outcome = 'succeeded' GROUP BY j.table_name, j.operation),
failed AS (
    SELECT j.table_name, j.operation, a.finished_at, a.error,
           row_number() OVER (PARTITION BY j.table_name, j.operation
                              ORDER BY a.finished_at DESC, a.id DESC) AS newest
    FROM job_attempts a JOIN jobs j ON j.id = a.job_id
    LEFT JOIN last_ok l ON l.table_name = j.table_name AND l.operation = j.operation
    WHERE a.outcome IN ('failed', 'conflict') AND (l.at IS NULL OR a.finished_at > l.at)),
streaks AS (
    SELECT table_name, operation, count(*) AS failures, max(finished_at) AS last_failed_at,
           max(CASE WHEN newest = 1 THEN error END) AS last_error
    FROM failed GROUP BY table_name, operation)
INSERT INTO operation_status (table_name, operation, failures, last_failed_at, last_error)
SELECT table_name, operation, failures, last_failed_at, last_error FROM streaks
ON CONFLICT (table_name, operation) DO UPDATE SET failures = excluded.failures,
    last_failed_at = excluded.last_failed_at, last_error = excluded.last_error;

INSERT INTO table_status (table_name, foreign_rewrites, foreign_rewrite_version,
    foreign_rewrite_timestamp, foreign_rewrite_operation, foreign_rewrite_engine)
SELECT table_name, rewrites, version, "timestamp", operation, engine_info
FROM (SELECT table_name, version, "timestamp", operation, engine_info,
             count(*) OVER (PARTITION BY table_name) AS rewrites,
             row_number() OVER (PARTITION BY table_name ORDER BY version DESC) AS newest
      FROM table_commits WHERE rewrite = TRUE AND tablekeeper_operation IS NULL) r
WHERE newest = 1;

INSERT INTO table_status (table_name, stale_writes, stale_write_detected_at)
SELECT table_name, count(*), max(detected_at) FROM stale_writes GROUP BY table_name
ON CONFLICT (table_name) DO UPDATE SET stale_writes = excluded.stale_writes,
    stale_write_detected_at = excluded.stale_write_detected_at;
