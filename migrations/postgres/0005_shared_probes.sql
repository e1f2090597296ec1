-- Shared probing (README "Probes shared between replicas"). Every replica beats in
-- `replicas`; the live ones split the inventory's tables between them by rendezvous
-- hashing, so each table is probed by one replica, and the others read its result from
-- `table_probes` instead of asking the object store again.
CREATE TABLE replicas (
    replica_id  TEXT        PRIMARY KEY,
    seen_at     TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);

-- The newest probe of each table, whichever replica ran it. `probe` is the probe's facts
-- as JSON (the last good ones: a failed probe keeps them and sets `error`).
CREATE TABLE table_probes (
    table_name  TEXT        PRIMARY KEY,
    replica_id  TEXT        NOT NULL,
    probed_at   TIMESTAMPTZ NOT NULL,
    probe       JSONB,
    error       TEXT,
    error_kind  TEXT        CHECK (error_kind IN ('transient', 'unreadable')),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX table_probes_updated ON table_probes (updated_at);
