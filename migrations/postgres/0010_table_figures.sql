-- The probe figures of each table over time, for the dashboard's pictures (files, small
-- files and average file size against the jobs that changed them; erasure pending). The
-- probing replica adds a row when a figure changed since the table's newest row or an hour
-- has passed since it, and keeps each table's newest rows only (a bound the daemon passes):
-- the history is bounded whatever the fleet's age, and an idle table adds a row an hour.
--
-- Append-only: once released this file is never edited.
CREATE TABLE table_figures (
    table_name            TEXT        NOT NULL,
    probed_at             TIMESTAMPTZ NOT NULL,
    version               BIGINT      NOT NULL,
    files                 BIGINT      NOT NULL CHECK (files >= 0),
    small_files           BIGINT      NOT NULL CHECK (small_files >= 0),
    size_bytes            BIGINT      NOT NULL CHECK (size_bytes >= 0),
    -- the oldest deletion whose rows storage still holds; NULL when none
    erasure_pending_since TIMESTAMPTZ,
    PRIMARY KEY (table_name, probed_at)
);

-- How many tables were of each health, an hour at a time, for the fleet page's picture: one
-- row per hour, `counts` a JSON object of health → tables. Every replica sees the same
-- fleet; the first to record an hour keeps it (the others' inserts do nothing), and rows
-- older than the picture's span are deleted by the replica that adds a row.
CREATE TABLE fleet_health (
    hour    TIMESTAMPTZ PRIMARY KEY,
    counts  JSONB       NOT NULL
);
