DROP TABLE IF EXISTS gochatd_job_types;
