-- Stale commits of every kind. Mirrors migrations/postgres/0006_stale_commit_kinds.sql: each
-- row says what the stale commit meant to do (overwrite, delete, or a rewrite that changed no
-- data); NULL for rows recorded before kinds were told apart.
ALTER TABLE stale_writes ADD COLUMN kind TEXT
    CHECK (kind IN ('overwrite', 'delete', 'rewrite'));
