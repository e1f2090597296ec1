-- Pauses set through the API (POST /api/v1/tables/{name}/pause and /resume). A row
-- overrides the inventory's `maintenance.paused` for that table until the next
-- pause/resume; no row means the inventory decides. Mirrors migrations/postgres.
CREATE TABLE table_pauses (
    table_name  TEXT    PRIMARY KEY,
    paused      INTEGER NOT NULL CHECK (paused IN (0, 1)),
    updated_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
