-- Shared probing (README "Probes shared between replicas"). Mirrors migrations/postgres.
CREATE TABLE replicas (
    replica_id  TEXT PRIMARY KEY,
    seen_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE table_probes (
    table_name  TEXT PRIMARY KEY,
    replica_id  TEXT NOT NULL,
    probed_at   TEXT NOT NULL,
    probe       TEXT,
    error       TEXT,
    error_kind  TEXT CHECK (error_kind IN ('transient', 'unreadable')),
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE INDEX table_probes_updated ON table_probes (updated_at);
