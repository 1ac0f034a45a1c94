-- Retention (daemon/loops/retention.py) deletes terminal rows by status, oldest change first.
-- Only terminal rows are in this index, so a pass that finds nothing to prune reads nothing.
CREATE INDEX IF NOT EXISTS background_jobs_finished_idx
    ON background_jobs (status, updated_at)
    WHERE status IN ('completed', 'dead', 'cancelled');
