-- The maintenance budget. Mirrors migrations/postgres/0012_budget.sql (see its comments).
ALTER TABLE jobs ADD COLUMN estimate TEXT;
ALTER TABLE jobs ADD COLUMN budget_class TEXT;
ALTER TABLE jobs ADD COLUMN budget_reason TEXT;
ALTER TABLE jobs ADD COLUMN budget_note TEXT;
ALTER TABLE jobs ADD COLUMN deferred_at TEXT;

CREATE INDEX jobs_started_at ON jobs (started_at) WHERE started_at IS NOT NULL;

CREATE TABLE budget_windows (
    window_start  TEXT    PRIMARY KEY,
    window_end    TEXT    NOT NULL,
    limit_micros  INTEGER NOT NULL CHECK (limit_micros >= 0),
    mode          TEXT    NOT NULL CHECK (mode IN ('shadow', 'enforce')),
    updated_at    TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE budget_deferrals (
    job_id        INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    window_start  TEXT    NOT NULL,
    table_name    TEXT    NOT NULL,
    operation     TEXT    NOT NULL,
    reason        TEXT    NOT NULL CHECK (reason IN ('budget', 'owner_budget')),
    mode          TEXT    NOT NULL CHECK (mode IN ('shadow', 'enforce')),
    rank          INTEGER NOT NULL,
    ranked        INTEGER NOT NULL,
    deferred_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (job_id, window_start)
);

CREATE INDEX budget_deferrals_window ON budget_deferrals (window_start);
