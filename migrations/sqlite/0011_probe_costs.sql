-- What each table's probes cost, a day at a time per replica. Mirrors migrations/postgres.
CREATE TABLE probe_costs (
    table_name       TEXT    NOT NULL,
    owner            TEXT    NOT NULL,
    replica_id       TEXT    NOT NULL,
    day              TEXT    NOT NULL,
    cpu_micros       INTEGER NOT NULL DEFAULT 0 CHECK (cpu_micros >= 0),
    get_requests     INTEGER NOT NULL DEFAULT 0 CHECK (get_requests >= 0),
    put_requests     INTEGER NOT NULL DEFAULT 0 CHECK (put_requests >= 0),
    list_requests    INTEGER NOT NULL DEFAULT 0 CHECK (list_requests >= 0),
    head_requests    INTEGER NOT NULL DEFAULT 0 CHECK (head_requests >= 0),
    delete_requests  INTEGER NOT NULL DEFAULT 0 CHECK (delete_requests >= 0),
    bytes_read       INTEGER NOT NULL DEFAULT 0 CHECK (bytes_read >= 0),
    bytes_written    INTEGER NOT NULL DEFAULT 0 CHECK (bytes_written >= 0),
    PRIMARY KEY (table_name, replica_id, day)
);

CREATE INDEX probe_costs_day ON probe_costs (day);

CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;
