-- What each table's probes cost (operation `probe` of the cost reports), a day at a time per
-- replica: every replica adds what its probes of the table spent since its last flush to the
-- day's row. Jobs' costs live in their `result` (`cost`), not here.
--
-- Append-only: once released this file is never edited.
CREATE TABLE probe_costs (
    table_name       TEXT        NOT NULL,
    -- the table's owner when the costs were counted
    owner            TEXT        NOT NULL,
    replica_id       TEXT        NOT NULL,
    -- midnight UTC of the day
    day              TIMESTAMPTZ NOT NULL,
    cpu_micros       BIGINT      NOT NULL DEFAULT 0 CHECK (cpu_micros >= 0),
    get_requests     BIGINT      NOT NULL DEFAULT 0 CHECK (get_requests >= 0),
    put_requests     BIGINT      NOT NULL DEFAULT 0 CHECK (put_requests >= 0),
    list_requests    BIGINT      NOT NULL DEFAULT 0 CHECK (list_requests >= 0),
    head_requests    BIGINT      NOT NULL DEFAULT 0 CHECK (head_requests >= 0),
    delete_requests  BIGINT      NOT NULL DEFAULT 0 CHECK (delete_requests >= 0),
    bytes_read       BIGINT      NOT NULL DEFAULT 0 CHECK (bytes_read >= 0),
    bytes_written    BIGINT      NOT NULL DEFAULT 0 CHECK (bytes_written >= 0),
    PRIMARY KEY (table_name, replica_id, day)
);

CREATE INDEX probe_costs_day ON probe_costs (day);

-- The operations view (`GET /api/v1/operations`, `report costs`): finished jobs by finish time.
CREATE INDEX jobs_finished_at ON jobs (finished_at DESC) WHERE finished_at IS NOT NULL;
