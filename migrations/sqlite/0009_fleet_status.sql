-- What every replica's refresher reads every few seconds, kept current by the writes that
-- change it. Mirrors migrations/postgres/0009_fleet_status.sql (see there for why); SQLite
-- triggers run their statements inline, and times compare through julianday().

CREATE TABLE operation_status (
    table_name      TEXT    NOT NULL,
    operation       TEXT    NOT NULL,
    last_success_at TEXT,
    failures        INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
    last_failed_at  TEXT,
    last_error      TEXT,
    PRIMARY KEY (table_name, operation)
);

CREATE TABLE table_status (
    table_name                TEXT    PRIMARY KEY,
    foreign_rewrites          INTEGER NOT NULL DEFAULT 0 CHECK (foreign_rewrites >= 0),
    foreign_rewrite_version   INTEGER,
    foreign_rewrite_timestamp TEXT,
    foreign_rewrite_operation TEXT,
    foreign_rewrite_engine    TEXT,
    stale_writes              INTEGER NOT NULL DEFAULT 0 CHECK (stale_writes >= 0),
    stale_write_detected_at   TEXT
);

CREATE INDEX jobs_active ON jobs (state) WHERE state IN ('queued', 'running');

CREATE TRIGGER jobs_succeeded_inserted AFTER INSERT ON jobs
WHEN NEW.state = 'succeeded' AND NEW.finished_at IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO operation_status (table_name, operation)
    VALUES (NEW.table_name, NEW.operation);
    UPDATE operation_status SET last_success_at = NEW.finished_at
    WHERE table_name = NEW.table_name AND operation = NEW.operation
      AND (last_success_at IS NULL OR julianday(NEW.finished_at) > julianday(last_success_at));
END;

CREATE TRIGGER jobs_succeeded AFTER UPDATE OF state, finished_at ON jobs
WHEN NEW.state = 'succeeded' AND NEW.finished_at IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO operation_status (table_name, operation)
    VALUES (NEW.table_name, NEW.operation);
    UPDATE operation_status SET last_success_at = NEW.finished_at
    WHERE table_name = NEW.table_name AND operation = NEW.operation
      AND (last_success_at IS NULL OR julianday(NEW.finished_at) > julianday(last_success_at));
END;

-- An attempt is inserted open (outcome NULL) at its claim and closed once; one closed at
-- its insert (by hand) counts the same.
CREATE TRIGGER job_attempts_succeeded AFTER UPDATE OF outcome ON job_attempts
WHEN OLD.outcome IS NULL AND NEW.outcome = 'succeeded'
BEGIN
    INSERT OR IGNORE INTO operation_status (table_name, operation)
    SELECT table_name, operation FROM jobs WHERE id = NEW.job_id;
    UPDATE operation_status SET failures = 0, last_failed_at = NULL, last_error = NULL
    WHERE (table_name, operation) = (SELECT table_name, operation FROM jobs WHERE id = NEW.job_id);
END;

CREATE TRIGGER job_attempts_inserted_succeeded AFTER INSERT ON job_attempts
WHEN NEW.outcome = 'succeeded'
BEGIN
    INSERT OR IGNORE INTO operation_status (table_name, operation)
    SELECT table_name, operation FROM jobs WHERE id = NEW.job_id;
    UPDATE operation_status SET failures = 0, last_failed_at = NULL, last_error = NULL
    WHERE (table_name, operation) = (SELECT table_name, operation FROM jobs WHERE id = NEW.job_id);
END;

CREATE TRIGGER job_attempts_failed AFTER UPDATE OF outcome ON job_attempts
WHEN OLD.outcome IS NULL AND NEW.outcome IN ('failed', 'conflict')
BEGIN
    INSERT OR IGNORE INTO operation_status (table_name, operation)
    SELECT table_name, operation FROM jobs WHERE id = NEW.job_id;
    UPDATE operation_status SET
        failures = failures + 1,
        last_error = CASE WHEN last_failed_at IS NULL
                            OR julianday(NEW.finished_at) >= julianday(last_failed_at)
                          THEN NEW.error ELSE last_error END,
        last_failed_at = CASE WHEN last_failed_at IS NULL
                                OR julianday(NEW.finished_at) >= julianday(last_failed_at)
                              THEN NEW.finished_at ELSE last_failed_at END
    WHERE (table_name, operation) = (SELECT table_name, operation FROM jobs WHERE id = NEW.job_id);
END;

CREATE TRIGGER job_attempts_inserted_failed AFTER INSERT ON job_attempts
WHEN NEW.outcome IN ('failed', 'conflict')
BEGIN
    INSERT OR IGNORE INTO operation_status (table_name, operation)
    SELECT table_name, operation FROM jobs WHERE id = NEW.job_id;
    UPDATE operation_status SET
        failures = failures + 1,
        last_error = CASE WHEN last_failed_at IS NULL
                            OR julianday(NEW.finished_at) >= julianday(last_failed_at)
                          THEN NEW.error ELSE last_error END,
        last_failed_at = CASE WHEN last_failed_at IS NULL
                                OR julianday(NEW.finished_at) >= julianday(last_failed_at)
                              THEN NEW.finished_at ELSE last_failed_at END
    WHERE (table_name, operation) = (SELECT table_name, operation FROM jobs WHERE id = NEW.job_id);
END;

CREATE TRIGGER table_commits_foreign_rewrite AFTER INSERT ON table_commits
WHEN NEW.rewrite AND NEW.tablekeeper_operation IS NULL
BEGIN
    INSERT OR IGNORE INTO table_status (table_name) VALUES (NEW.table_name);
    UPDATE table_status SET
        foreign_rewrites = foreign_rewrites + 1,
        foreign_rewrite_timestamp = CASE WHEN foreign_rewrite_version IS NULL
            OR NEW.version > foreign_rewrite_version
            THEN NEW."timestamp" ELSE foreign_rewrite_timestamp END,
        foreign_rewrite_operation = CASE WHEN foreign_rewrite_version IS NULL
            OR NEW.version > foreign_rewrite_version
            THEN NEW.operation ELSE foreign_rewrite_operation END,
        foreign_rewrite_engine = CASE WHEN foreign_rewrite_version IS NULL
            OR NEW.version > foreign_rewrite_version
            THEN NEW.engine_info ELSE foreign_rewrite_engine END,
        foreign_rewrite_version = CASE WHEN foreign_rewrite_version IS NULL
            OR NEW.version > foreign_rewrite_version
            THEN NEW.version ELSE foreign_rewrite_version END
    WHERE table_name = NEW.table_name;
END;

CREATE TRIGGER stale_writes_recorded AFTER INSERT ON stale_writes
BEGIN
    INSERT OR IGNORE INTO table_status (table_name) VALUES (NEW.table_name);
    UPDATE table_status SET
        stale_writes = stale_writes + 1,
        stale_write_detected_at = CASE WHEN stale_write_detected_at IS NULL
            OR julianday(NEW.detected_at) > julianday(stale_write_detected_at)
            THEN NEW.detected_at ELSE stale_write_detected_at END
    WHERE table_name = NEW.table_name;
END;

-- What the record already holds.
INSERT INTO operation_status (table_name, operation, last_success_at)
SELECT table_name, operation,
       strftime('%Y-%m-%dT%H:%M:%fZ', max(julianday(finished_at)))
FROM jobs WHERE state = 'succeeded' AND finished_at IS NOT NULL
GROUP BY table_name, operation;

INSERT INTO operation_status (table_name, operation, failures, last_failed_at, last_error)
SELECT table_name, operation, failures, last_failed_at, last_error FROM (
    WITH last_ok AS (
        SELECT j.table_name, j.operation, max(julianday(a.finished_at)) AS at
        FROM job_attempts a JOIN jobs j ON j.id = a.job_id
        WHERE a.outcome = 'succeeded' GROUP BY j.table_name, j.operation),
    failed AS (
        SELECT j.table_name, j.operation, julianday(a.finished_at) AS at, a.error,
               row_number() OVER (PARTITION BY j.table_name, j.operation
                                  ORDER BY julianday(a.finished_at) DESC, a.id DESC) AS newest
        FROM job_attempts a JOIN jobs j ON j.id = a.job_id
        LEFT JOIN last_ok l ON l.table_name = j.table_name AND l.operation = j.operation
        WHERE a.outcome IN ('failed', 'conflict')
          AND (l.at IS NULL OR julianday(a.finished_at) > l.at))
    SELECT table_name, operation, count(*) AS failures,
           strftime('%Y-%m-%dT%H:%M:%fZ', max(at)) AS last_failed_at,
           max(CASE WHEN newest = 1 THEN error END) AS last_error
    FROM failed GROUP BY table_name, operation) WHERE true
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
SELECT table_name, count(*), strftime('%Y-%m-%dT%H:%M:%fZ', max(julianday(detected_at)))
FROM stale_writes GROUP BY table_name
ON CONFLICT (table_name) DO UPDATE SET stale_writes = excluded.stale_writes,
    stale_write_detected_at = excluded.stale_write_detected_at;
