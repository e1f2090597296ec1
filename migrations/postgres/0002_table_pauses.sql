-- Pauses set through the API (POST /api/v1/tables/{name}/pause and /resume), shared by
-- every replica. A row overrides the inventory's `maintenance.paused` for that table
-- until the next pause/resume; no row means the inventory decides.
CREATE TABLE table_pauses (
    table_name  TEXT        PRIMARY KEY,
    paused      BOOLEAN     NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
