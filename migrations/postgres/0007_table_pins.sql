-- Pins added through the API (POST /api/v1/tables/{name}/pins, README "Pinned versions"):
-- versions someone relies on (a model registry's training set, an audit). VACUUM keeps every
-- file of a pinned version and checkpoint's log cleanup keeps the log that loads it until
-- `until`; every replica reads the same rows, so all honour the same pins after restarts.
-- An expired pin stays here (reported, no longer honoured) until someone deletes it.
-- Pins declared in the inventory (`retention.pins`) live in Git, not here.
CREATE TABLE table_pins (
    table_name  TEXT        NOT NULL,
    version     BIGINT      NOT NULL CHECK (version >= 0),
    until       TIMESTAMPTZ NOT NULL,
    reason      TEXT        NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    created_by  TEXT        NOT NULL,
    PRIMARY KEY (table_name, version)
);
