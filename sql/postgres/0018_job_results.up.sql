-- Job results (docs/results.md): what a handler returned, as JSON, written by the fenced
-- finish that completes the job (finish_jobs, finish_jobs_with_replies) and by nothing
-- else. NULL: no result (the handler returned None, or the job did not complete). The
-- column is nullable with no default: adding it rewrites nothing.
ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS result jsonb;

-- The callers waiting for a job (Client.wait, the gateway's long-poll), one row per waiting
-- client, written before the waiter reads the job and removed when it stops waiting.
-- UNLOGGED: only a wake-up list (a lost row costs a waiter its bounded fallback re-read,
-- results/wait.py), never replicated, never moved with a tenant.
CREATE UNLOGGED TABLE IF NOT EXISTS gochatd_job_waiters (
    job_id bigint NOT NULL,
    waiter text NOT NULL,
    since timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, waiter)
);

-- Wake those callers when the job reaches a final state, whoever moved it there (a finish,
-- the reaper, an operator, foreign SQL). The WHEN clause is checked in C on every UPDATE of
-- status; the function runs only for a row that just became completed, dead or cancelled,
-- and NOTIFYs only when somebody waits for it (a fleet that never waits sends no NOTIFY:
-- each one would wake every LISTENing connection of the database). The payload is the id.
CREATE OR REPLACE FUNCTION gochatd_notify_job_finished() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM gochatd_job_waiters WHERE job_id = NEW.id;
    IF FOUND THEN
        PERFORM pg_notify('gochatd_job_finished', NEW.id::text);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS background_jobs_finished_notify ON background_jobs;
CREATE TRIGGER background_jobs_finished_notify
    AFTER UPDATE OF status ON background_jobs
    FOR EACH ROW
    WHEN (NEW.status IN ('completed', 'dead', 'cancelled') AND OLD.status <> NEW.status)
    EXECUTE FUNCTION gochatd_notify_job_finished();
