-- Pins added through the API (README "Pinned versions"). Mirrors migrations/postgres.
CREATE TABLE table_pins (
    table_name  TEXT    NOT NULL,
    version     INTEGER NOT NULL CHECK (version >= 0),
    until       TEXT    NOT NULL,
    reason      TEXT    NOT NULL DEFAULT '',
    created_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    created_by  TEXT    NOT NULL,
    PRIMARY KEY (table_name, version)
);
