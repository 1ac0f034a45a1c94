-- Dependent jobs and batches (docs/workflows.md).
--
-- A job enqueued with depends_on waits as a queued job due at 9999-12-31 (no claim, no
-- dispatch and no sweep ever takes it) with waits_on = the number of its dependencies that
-- have not finished. Each dependency is one row of gochatd_job_dependencies. When a job
-- with has_dependents reaches a final state, whoever moved it there (a fenced finish, the
-- reaper, an operator, foreign SQL), the trigger below resolves its edges in the same
-- transaction: each edge once (resolved_status IS NULL is the guard), each dependent's
-- waits_on counted down under its row lock. The last edge releases the dependent (due now,
-- dispatched by the scheduler's NOTIFY as any due job); an edge to a dead or cancelled job
-- cancels the dependent ('dependency_failed') unless the edge says run_if_failed, and that
-- cancellation cascades through the same trigger to the dependent's own dependents.
ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS waits_on integer NOT NULL DEFAULT 0;
ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS has_dependents boolean NOT NULL DEFAULT false;
ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS batch_id bigint;

CREATE TABLE IF NOT EXISTS gochatd_job_dependencies (
    id              bigserial PRIMARY KEY,
    tenant_id       text    NOT NULL,  -- the dependent's (and so the dependency's) tenant
    job_id          bigint  NOT NULL,  -- the dependent
    depends_on_id   bigint  NOT NULL,  -- the job it waits for
    run_if_failed   boolean NOT NULL DEFAULT false,
    resolved_status text,              -- the dependency's final status once seen; NULL: open
    change_seq      bigint  NOT NULL DEFAULT 0,  -- `gochatd move` (0007): numbered while tracked
    CONSTRAINT gochatd_job_dependencies_edge_key UNIQUE (job_id, depends_on_id)
);
CREATE INDEX IF NOT EXISTS gochatd_job_dependencies_open_idx
    ON gochatd_job_dependencies (depends_on_id) WHERE resolved_status IS NULL;

-- A batch: its members carry batch_id; its callbacks are jobs that depend on every member
-- (on_success: plainly; on_complete: run_if_failed).
CREATE TABLE IF NOT EXISTS gochatd_batches (
    id             bigserial   PRIMARY KEY,
    tenant_id      text        NOT NULL,
    size           integer     NOT NULL,
    on_success_id  bigint,
    on_complete_id bigint,
    created_at     timestamptz NOT NULL DEFAULT now(),
    change_seq     bigint      NOT NULL DEFAULT 0  -- `gochatd move` (0007)
);
CREATE INDEX IF NOT EXISTS background_jobs_batch_idx
    ON background_jobs (batch_id) WHERE batch_id IS NOT NULL;
-- A callback finds its batch (get_job_links' callback_of: the admin API's job answer).
CREATE INDEX IF NOT EXISTS gochatd_batches_on_success_idx
    ON gochatd_batches (on_success_id) WHERE on_success_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS gochatd_batches_on_complete_idx
    ON gochatd_batches (on_complete_id) WHERE on_complete_id IS NOT NULL;

-- `gochatd move` writes a tenant's rows into the destination as the source has them, edges
-- and dependents included: its transactions set gochatd.migrator_write (set_config, local to
-- the transaction; daemon/migrate/backends.py), and the trigger leaves their copy alone
-- instead of resolving a second time what the source already resolved.
-- One dependency ended (dep_status) or was deleted (as 'cancelled'): its open edges are
-- resolved, each once, and each dependent is counted down under its row lock: the last edge
-- makes it due now; a failure its edge does not run past (run_if_failed) cancels it with
-- why, and that cancellation resolves its own dependents in turn (the trigger below).
CREATE OR REPLACE FUNCTION gochatd_resolve_edges(dep_id bigint, dep_status text, why text)
RETURNS void LANGUAGE sql AS $$
    WITH edges AS (
        UPDATE gochatd_job_dependencies
        SET resolved_status = dep_status
        WHERE depends_on_id = dep_id AND resolved_status IS NULL
        RETURNING job_id, (dep_status <> 'completed' AND NOT run_if_failed) AS fails
    )
    UPDATE background_jobs AS j
    SET waits_on = j.waits_on - 1,
        status = CASE WHEN e.fails THEN 'cancelled' ELSE j.status END,
        error_class = CASE WHEN e.fails THEN 'dependency_failed' ELSE j.error_class END,
        last_error = CASE WHEN e.fails THEN why ELSE j.last_error END,
        scheduled_at = CASE WHEN NOT e.fails AND j.waits_on = 1 THEN now()
                            ELSE j.scheduled_at END,
        updated_at = now()
    FROM edges AS e
    WHERE j.id = e.job_id AND j.status = 'queued' AND j.waits_on > 0;
$$;

CREATE OR REPLACE FUNCTION gochatd_resolve_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('gochatd.migrator_write', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM gochatd_resolve_edges(NEW.id, NEW.status,
                                  'dependency ' || NEW.id || ' ended ' || NEW.status);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS background_jobs_resolve_dependents ON background_jobs;
CREATE TRIGGER background_jobs_resolve_dependents
    AFTER UPDATE OF status ON background_jobs
    FOR EACH ROW
    WHEN (NEW.has_dependents AND NEW.status IN ('completed', 'dead', 'cancelled')
          AND OLD.status <> NEW.status)
    EXECUTE FUNCTION gochatd_resolve_dependents();

-- A deleted job takes its own edges with it (retention, an operator's delete, foreign SQL),
-- and a job deleted before it finished counts as cancelled for those still waiting on it:
-- cancelled in turn (dependency_failed), or released if the edge says run_if_failed. Once
-- per statement, from its transition table, each deleted dependency in id order.
CREATE OR REPLACE FUNCTION gochatd_forget_dependencies() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('gochatd.migrator_write', true) = 'on' THEN
        RETURN NULL;  -- a move's delete: the source's own deletes and updates follow it
    END IF;
    DELETE FROM gochatd_job_dependencies AS d USING gone WHERE d.job_id = gone.id;
    PERFORM gochatd_resolve_edges(d.id, 'cancelled', 'dependency ' || d.id || ' was deleted')
    FROM (SELECT DISTINCT e.depends_on_id AS id
          FROM gochatd_job_dependencies AS e JOIN gone ON gone.id = e.depends_on_id
          WHERE e.resolved_status IS NULL ORDER BY 1) AS d;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS background_jobs_forget_dependencies ON background_jobs;
CREATE TRIGGER background_jobs_forget_dependencies
    AFTER DELETE ON background_jobs
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT
    EXECUTE FUNCTION gochatd_forget_dependencies();
