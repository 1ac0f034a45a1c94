-- SQLite twin of sql/postgres/0009: job types' defaults, published by the daemons that run
-- them (docs/job-types.md). gochatd's own INSERTs (the client, the CLI, the gateway,
-- periodic jobs) read this table for the columns they were not given. There is no trigger
-- for plain INSERTs here: SQLite cannot change a row in a BEFORE trigger, cannot tell a
-- column left to its default from 'default' or 25 written on purpose, and an AFTER trigger
-- that rewrote such rows would also rewrite the rows `gochatd migrate` copies in. A plain
-- INSERT that wants the published values reads them itself (docs/job-types.md shows how).
CREATE TABLE IF NOT EXISTS gochatd_job_types (
    job_type     TEXT    PRIMARY KEY,
    queue        TEXT    NOT NULL,
    max_attempts INTEGER NOT NULL,
    timeout_s    REAL,
    updated_at   REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    published_by TEXT    NOT NULL,
    CONSTRAINT gochatd_job_types_job_type_check CHECK (length(job_type) BETWEEN 1 AND 200),
    CONSTRAINT gochatd_job_types_queue_check
        CHECK (length(queue) BETWEEN 1 AND 64 AND queue NOT GLOB '*[^A-Za-z0-9_-]*'),
    CONSTRAINT gochatd_job_types_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 1000),
    CONSTRAINT gochatd_job_types_timeout_check CHECK (timeout_s IS NULL OR timeout_s > 0)
);
