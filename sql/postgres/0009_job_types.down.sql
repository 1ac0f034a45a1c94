DROP TRIGGER IF EXISTS background_jobs_job_type_defaults ON background_jobs;
DROP FUNCTION IF EXISTS gochatd_job_type_defaults();
ALTER TABLE background_jobs ALTER COLUMN queue SET DEFAULT 'default';
ALTER TABLE background_jobs ALTER COLUMN max_attempts SET DEFAULT 25;
DROP TABLE IF EXISTS gochatd_job_types;
