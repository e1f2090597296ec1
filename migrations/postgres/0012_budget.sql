-- The maintenance budget (DESIGN.md "Budget"): what each queued job is estimated to cost and
-- buy, what the latest budget round decided for it, and the rounds' history per window for
-- `tablekeeper report budget`. Every replica reads and writes these, so the budget is
-- fleet-wide and survives restarts.
--
-- Append-only: once released this file is never edited.

-- The estimate the daemon wrote when the job was queued (or last joined by a tick), with the
-- facts a budget round ranks it by: {"cost": {"cpu_seconds", "requests", "bytes"},
-- "benefit", "owner", "importance", "alert_after_seconds", "must_run"}.
ALTER TABLE jobs ADD COLUMN estimate JSONB;
-- The latest round's verdict on a queued job: `budget` (admitted within the budget), a
-- must-run class (`repair`, `erasure_at_risk`, `staleness_past_alert`, `asked`), or NULL (not
-- admitted, or no round yet). Kept when the job runs: the window's spend sums the `budget` ones.
ALTER TABLE jobs ADD COLUMN budget_class TEXT;
-- `budget` or `owner_budget` while the latest round deferred the job (in shadow mode: would
-- have), else NULL; with the verdict in words.
ALTER TABLE jobs ADD COLUMN budget_reason TEXT;
ALTER TABLE jobs ADD COLUMN budget_note TEXT;
-- When a round first deferred the job (or would have).
ALTER TABLE jobs ADD COLUMN deferred_at TIMESTAMPTZ;

CREATE INDEX jobs_started_at ON jobs (started_at) WHERE started_at IS NOT NULL;

-- One row per budget window a round ran in: the budget it had and the mode.
CREATE TABLE budget_windows (
    window_start  TIMESTAMPTZ PRIMARY KEY,
    window_end    TIMESTAMPTZ NOT NULL,
    limit_micros  BIGINT      NOT NULL CHECK (limit_micros >= 0),
    mode          TEXT        NOT NULL CHECK (mode IN ('shadow', 'enforce')),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);

-- Every job a round deferred (or would have) in a window, once per window.
CREATE TABLE budget_deferrals (
    job_id        BIGINT      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    window_start  TIMESTAMPTZ NOT NULL,
    table_name    TEXT        NOT NULL,
    operation     TEXT        NOT NULL,
    reason        TEXT        NOT NULL CHECK (reason IN ('budget', 'owner_budget')),
    mode          TEXT        NOT NULL CHECK (mode IN ('shadow', 'enforce')),
    -- the rank among the budgeted candidates, and how many there were, at the last round
    rank          INTEGER     NOT NULL,
    ranked        INTEGER     NOT NULL,
    deferred_at   TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job_id, window_start)
);

CREATE INDEX budget_deferrals_window ON budget_deferrals (window_start);
