-- Unique jobs (docs/unique-jobs.md): a job enqueued with a unique key holds it within its
-- tenant, and a second enqueue of the same key gets the holder back instead of a new row,
-- while the holder is queued, retrying or running, or completed before unique_until
-- (enqueue time + unique_for_s, by the database clock). The index makes the key one row's
-- at a time; a holder that no longer counts gives it up when the next enqueue of the key
-- asks (release_unique_key, a guarded UPDATE). Rows without a key (every job that does not
-- ask for uniqueness) are not in the index: their INSERT and every later UPDATE are as
-- before. Both columns are nullable with no default: adding them rewrites nothing.
ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS unique_key text;
ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS unique_until timestamptz;
CREATE UNIQUE INDEX IF NOT EXISTS background_jobs_unique_key_idx
    ON background_jobs (tenant_id, unique_key) WHERE unique_key IS NOT NULL;
