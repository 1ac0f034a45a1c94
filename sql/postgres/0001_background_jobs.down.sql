DROP TRIGGER IF EXISTS background_jobs_notify ON background_jobs;
DROP FUNCTION IF EXISTS gochatd_notify_job();
DROP TABLE IF EXISTS background_jobs;
