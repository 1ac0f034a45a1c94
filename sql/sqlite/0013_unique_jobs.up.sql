-- SQLite twin of sql/postgres/0013: unique jobs (docs/unique-jobs.md). unique_until is
-- epoch seconds like every time column here.
ALTER TABLE background_jobs ADD COLUMN unique_key TEXT;
ALTER TABLE background_jobs ADD COLUMN unique_until REAL;
CREATE UNIQUE INDEX IF NOT EXISTS background_jobs_unique_key_idx
    ON background_jobs (tenant_id, unique_key) WHERE unique_key IS NOT NULL;
