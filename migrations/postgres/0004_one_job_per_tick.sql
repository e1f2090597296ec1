-- One cron tick of a (table, operation) makes at most one job across every replica, even
-- after that job started (jobs_one_queued_per_table_operation covers queued jobs only, so a
-- replica whose tick arrived while another replica's job for the same tick already ran used
-- to queue a second one). scheduled_for is the tick's scheduled time; NULL for manual and
-- automatic (repair) jobs.
ALTER TABLE jobs ADD COLUMN scheduled_for TIMESTAMPTZ;

CREATE UNIQUE INDEX jobs_one_per_tick
    ON jobs (table_name, operation, scheduled_for) WHERE scheduled_for IS NOT NULL;

-- Failure streaks (tablekeeper_consecutive_failures, fleet-wide) read attempts by outcome.
CREATE INDEX job_attempts_outcome_finished ON job_attempts (outcome, finished_at);
