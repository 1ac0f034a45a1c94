-- SQLite twin of sql/postgres/0018: job results (docs/results.md), JSON text written by
-- the fenced finish that completes the job. SQLite has no notifications: a waiting caller
-- reads the row again with a bounded backoff (docs/results.md, "Waiting").
ALTER TABLE background_jobs ADD COLUMN result TEXT;
