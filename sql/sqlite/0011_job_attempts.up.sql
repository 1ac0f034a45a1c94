-- SQLite twin of sql/postgres/0011: per-attempt history, written in the same BEGIN
-- IMMEDIATE as the fenced state change that ended the attempt. As there, no foreign key
-- (connections leave foreign_keys off anyway): the trigger below removes a job's attempts
-- with the job, whoever deletes it.
CREATE TABLE IF NOT EXISTS job_attempts (
    job_id      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    started_at  REAL,
    finished_at REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    worker      TEXT,
    outcome     TEXT    NOT NULL,
    error_class TEXT,
    error       TEXT,
    PRIMARY KEY (job_id, attempt),
    CONSTRAINT job_attempts_outcome_check CHECK (outcome IN
        ('completed', 'retrying', 'dead', 'cancelled', 'lease_expired', 'interrupted'))
) WITHOUT ROWID;

CREATE TRIGGER IF NOT EXISTS background_jobs_delete_attempts
    AFTER DELETE ON background_jobs
    FOR EACH ROW
BEGIN
    DELETE FROM job_attempts WHERE job_id = OLD.id;
END;
