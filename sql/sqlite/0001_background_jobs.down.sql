DROP TABLE IF EXISTS background_jobs;
