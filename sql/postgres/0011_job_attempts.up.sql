-- Per-attempt history (docs/operations.md, "A job's attempts"): one row per run of a job,
-- written in the same statement as the fenced state change that ended it (finish_jobs,
-- finish_jobs_with_replies, reap_expired_leases), and only for rows that change applied.
-- attempt is the run's number, the job's fence at its claim: every claim counts, an
-- interrupted run and the runs after an operator's retry included. At most
-- ATTEMPTS_KEPT_PER_JOB (daemon/store/attempts.py) rows per job: the finish that writes a
-- newer one deletes the oldest. The rows go with their job: every DELETE of a job
-- (retention, an operator, foreign SQL) cascades here.
CREATE TABLE IF NOT EXISTS job_attempts (
    job_id      bigint      NOT NULL REFERENCES background_jobs (id) ON DELETE CASCADE,
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
