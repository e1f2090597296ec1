-- Stale commits of every kind (README "Data safety"): a stale commit removed files that were
-- no longer active at the version before it. Until now only data-changing commits over
-- tablekeeper's rewrites were recorded; another engine's compaction planned before
-- tablekeeper's (and tablekeeper's own stale rewrite) is a stale commit too, and its repair
-- differs, so each row says what the commit meant to do. NULL: recorded before kinds were
-- told apart (those were all overwrites or deletes).
ALTER TABLE stale_writes ADD COLUMN kind TEXT
    CHECK (kind IN ('overwrite', 'delete', 'rewrite'));
COMMENT ON COLUMN stale_writes.rewrite_versions IS
    'the commits (any writer''s) that had already removed the files it removed';
