-- One cron tick of a (table, operation) makes at most one job across every replica, even
-- after that job started. Mirrors migrations/postgres/0004_one_job_per_tick.sql;
-- scheduled_for is UTC RFC 3339 text with milliseconds, as tablekeeper writes timestamps.
ALTER TABLE jobs ADD COLUMN scheduled_for TEXT;

CREATE UNIQUE INDEX jobs_one_per_tick
    ON jobs (table_name, operation, scheduled_for) WHERE scheduled_for IS NOT NULL;

-- Failure streaks (tablekeeper_consecutive_failures, fleet-wide) read attempts by outcome.
CREATE INDEX job_attempts_outcome_finished ON job_attempts (outcome, finished_at);
