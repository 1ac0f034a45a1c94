-- Job types' defaults, published by the daemons that run them (docs/job-types.md). Each
-- daemon upserts one row per registered handler when it starts, before it claims anything;
-- the last writer wins. Producers that leave queue or max_attempts out get these values:
-- gochatd's own INSERTs look them up themselves, and a plain INSERT that omits the columns
-- gets them from the trigger below. A type no daemon has published lands in 'default' with
-- 25 attempts, as before.
CREATE TABLE IF NOT EXISTS gochatd_job_types (
    job_type     text             PRIMARY KEY,
    queue        text             NOT NULL,
    max_attempts integer          NOT NULL,
    timeout_s    double precision,
    updated_at   timestamptz      NOT NULL DEFAULT now(),
    published_by text             NOT NULL,
    CONSTRAINT gochatd_job_types_job_type_check CHECK (length(job_type) BETWEEN 1 AND 200),
    CONSTRAINT gochatd_job_types_queue_check CHECK (queue ~ '^[A-Za-z0-9_-]{1,64}$'),
    CONSTRAINT gochatd_job_types_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 1000),
    CONSTRAINT gochatd_job_types_timeout_check CHECK (timeout_s IS NULL OR timeout_s > 0)
);

-- A column left out of an INSERT is NULL now, so that the trigger can tell it from a value
-- written on purpose ('default' and 25 included). NOT NULL still holds: PostgreSQL checks it
-- after the BEFORE triggers, and the trigger always fills both.
ALTER TABLE background_jobs ALTER COLUMN queue DROP DEFAULT;
ALTER TABLE background_jobs ALTER COLUMN max_attempts DROP DEFAULT;

CREATE OR REPLACE FUNCTION gochatd_job_type_defaults() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    published_queue text;
    published_max_attempts integer;
BEGIN
    SELECT t.queue, t.max_attempts INTO published_queue, published_max_attempts
    FROM gochatd_job_types AS t WHERE t.job_type = NEW.job_type;
    NEW.queue := COALESCE(NEW.queue, published_queue, 'default');
    NEW.max_attempts := COALESCE(NEW.max_attempts, published_max_attempts, 25);
    RETURN NEW;
END
$$;

-- Fires only for rows that left a column out: gochatd's own INSERTs fill both themselves.
DROP TRIGGER IF EXISTS background_jobs_job_type_defaults ON background_jobs;
CREATE TRIGGER background_jobs_job_type_defaults
    BEFORE INSERT ON background_jobs
    FOR EACH ROW
    WHEN (NEW.queue IS NULL OR NEW.max_attempts IS NULL)
    EXECUTE FUNCTION gochatd_job_type_defaults();
