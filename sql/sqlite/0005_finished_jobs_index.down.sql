DROP INDEX IF EXISTS background_jobs_finished_idx;
