DROP INDEX IF EXISTS background_jobs_dispatched_idx;
