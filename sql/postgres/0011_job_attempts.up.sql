-- Per-attempt history (docs/operations.md, "A job's attempts"): one row per run of a job,
-- written in the same statement as the fenced state change that ended it (finish_jobs,
-- finish_jobs_with_replies, reap_expired_leases), and only for rows that change applied.
-- attempt is the run's number, the job's fence at its claim: every claim counts, an
-- interrupted run and the runs after an operator's retry included. At most
-- ATTEMPTS_KEPT_PER_JOB (daemon/store/attempts.py) rows per job: the finish that writes a
-- newer one deletes the oldest.
--
-- The rows go with their job: every DELETE of jobs (retention, an operator, foreign SQL)
-- deletes their attempts in the same statement, through the statement trigger below, and a
-- TRUNCATE of background_jobs empties this table too. Not a foreign key: its check on every
-- INSERT (a per-row lookup that also locks the job row again) made the finish statement
-- about a fifth slower; the trigger costs nothing until a job is deleted.
CREATE TABLE IF NOT EXISTS job_attempts (
    job_id      bigint      NOT NULL,
    attempt     bigint      NOT NULL,
    started_at  timestamptz,
    finished_at timestamptz NOT NULL DEFAULT now(),
    worker      text,
    outcome     text        NOT NULL,
    error_class text,
    error       text,
    PRIMARY KEY (job_id, attempt),
    CONSTRAINT job_attempts_outcome_check CHECK (outcome IN
        ('completed', 'retrying', 'dead', 'cancelled', 'lease_expired', 'interrupted'))
);

CREATE OR REPLACE FUNCTION gochatd_delete_job_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM job_attempts;
    ELSE
        DELETE FROM job_attempts AS a USING deleted_jobs AS d WHERE a.job_id = d.id;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS background_jobs_delete_attempts ON background_jobs;
CREATE TRIGGER background_jobs_delete_attempts
    AFTER DELETE ON background_jobs
    REFERENCING OLD TABLE AS deleted_jobs
    FOR EACH STATEMENT
    EXECUTE FUNCTION gochatd_delete_job_attempts();

DROP TRIGGER IF EXISTS background_jobs_truncate_attempts ON background_jobs;
CREATE TRIGGER background_jobs_truncate_attempts
    AFTER TRUNCATE ON background_jobs
    FOR EACH STATEMENT
    EXECUTE FUNCTION gochatd_delete_job_attempts();
