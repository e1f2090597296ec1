-- The probe figures of each table over time, for the dashboard's pictures. Mirrors
-- migrations/postgres.
CREATE TABLE table_figures (
    table_name            TEXT    NOT NULL,
    probed_at             TEXT    NOT NULL,
    version               INTEGER NOT NULL,
    files                 INTEGER NOT NULL CHECK (files >= 0),
    small_files           INTEGER NOT NULL CHECK (small_files >= 0),
    size_bytes            INTEGER NOT NULL CHECK (size_bytes >= 0),
    erasure_pending_since TEXT,
    PRIMARY KEY (table_name, probed_at)
);

CREATE TABLE fleet_health (
    hour    TEXT PRIMARY KEY,
    counts  TEXT NOT NULL
);
