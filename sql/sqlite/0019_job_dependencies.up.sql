-- SQLite twin of sql/postgres/0019: dependent jobs and batches (docs/workflows.md). A job
-- with depends_on waits as a queued job due at 9999-12-31 (253402214400.0) with waits_on
-- open dependencies; the trigger resolves a finished job's edges in its transaction. The
-- cascade (a cancelled dependent cancelling its own dependents) needs
-- PRAGMA recursive_triggers = ON, which gochatd sets on every connection it opens.
ALTER TABLE background_jobs ADD COLUMN waits_on INTEGER NOT NULL DEFAULT 0;
ALTER TABLE background_jobs ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0;
ALTER TABLE background_jobs ADD COLUMN batch_id INTEGER;

CREATE TABLE IF NOT EXISTS gochatd_job_dependencies (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id       TEXT    NOT NULL,
    job_id          INTEGER NOT NULL,
    depends_on_id   INTEGER NOT NULL,
    run_if_failed   INTEGER NOT NULL DEFAULT 0,
    resolved_status TEXT,
    change_seq      INTEGER NOT NULL DEFAULT 0,  -- `gochatd move` (0007)
    UNIQUE (job_id, depends_on_id)
);
CREATE INDEX IF NOT EXISTS gochatd_job_dependencies_open_idx
    ON gochatd_job_dependencies (depends_on_id) WHERE resolved_status IS NULL;

CREATE TABLE IF NOT EXISTS gochatd_batches (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id      TEXT    NOT NULL,
    size           INTEGER NOT NULL,
    on_success_id  INTEGER,
    on_complete_id INTEGER,
    created_at     REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    change_seq     INTEGER NOT NULL DEFAULT 0  -- `gochatd move` (0007)
);
-- `gochatd move` copies and validates one tenant in id order (migrate.sql's tenant_batch).
CREATE INDEX IF NOT EXISTS gochatd_job_dependencies_tenant_idx
    ON gochatd_job_dependencies (tenant_id);
CREATE INDEX IF NOT EXISTS gochatd_batches_tenant_idx ON gochatd_batches (tenant_id);
-- A callback finds its batch (get_job_links' callback_of: the admin API's job answer).
CREATE INDEX IF NOT EXISTS gochatd_batches_on_success_idx
    ON gochatd_batches (on_success_id) WHERE on_success_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS gochatd_batches_on_complete_idx
    ON gochatd_batches (on_complete_id) WHERE on_complete_id IS NOT NULL;

-- `gochatd move` writes a tenant's rows into the destination as the source has them, edges
-- and dependents included: a row here exists only inside its write transactions (inserted
-- first, deleted before COMMIT: daemon/migrate/backends.py), and the trigger leaves their
-- copy alone instead of resolving a second time what the source already resolved.
CREATE TABLE IF NOT EXISTS gochatd_migrator_writes (
    id INTEGER PRIMARY KEY CHECK (id = 1)
);
CREATE INDEX IF NOT EXISTS background_jobs_batch_idx
    ON background_jobs (batch_id) WHERE batch_id IS NOT NULL;

CREATE TRIGGER IF NOT EXISTS background_jobs_resolve_dependents
AFTER UPDATE OF status ON background_jobs
WHEN NEW.has_dependents AND NEW.status IN ('completed', 'dead', 'cancelled')
     AND OLD.status <> NEW.status
     AND NOT EXISTS (SELECT 1 FROM gochatd_migrator_writes)
BEGIN
    UPDATE background_jobs
    SET waits_on = waits_on - 1, status = 'cancelled', error_class = 'dependency_failed',
        last_error = 'dependency ' || NEW.id || ' ended ' || NEW.status,
        updated_at = ((julianday('now') - 2440587.5) * 86400.0)
    WHERE NEW.status <> 'completed' AND status = 'queued' AND waits_on > 0
      AND id IN (SELECT job_id FROM gochatd_job_dependencies
                 WHERE depends_on_id = NEW.id AND resolved_status IS NULL
                   AND NOT run_if_failed);
    UPDATE background_jobs
    SET waits_on = waits_on - 1,
        scheduled_at = CASE WHEN waits_on = 1 THEN ((julianday('now') - 2440587.5) * 86400.0)
                            ELSE scheduled_at END,
        updated_at = ((julianday('now') - 2440587.5) * 86400.0)
    WHERE status = 'queued' AND waits_on > 0
      AND id IN (SELECT job_id FROM gochatd_job_dependencies
                 WHERE depends_on_id = NEW.id AND resolved_status IS NULL
                   AND (NEW.status = 'completed' OR run_if_failed));
    UPDATE gochatd_job_dependencies SET resolved_status = NEW.status
    WHERE depends_on_id = NEW.id AND resolved_status IS NULL;
END;

-- A deleted job takes its own edges with it, and a job deleted before it finished counts
-- as cancelled for those still waiting on it (see PostgreSQL's 0019).
CREATE TRIGGER IF NOT EXISTS background_jobs_forget_dependencies
AFTER DELETE ON background_jobs
WHEN NOT EXISTS (SELECT 1 FROM gochatd_migrator_writes)
BEGIN
    DELETE FROM gochatd_job_dependencies WHERE job_id = OLD.id;
    UPDATE background_jobs
    SET waits_on = waits_on - 1, status = 'cancelled', error_class = 'dependency_failed',
        last_error = 'dependency ' || OLD.id || ' was deleted',
        updated_at = ((julianday('now') - 2440587.5) * 86400.0)
    WHERE status = 'queued' AND waits_on > 0
      AND id IN (SELECT job_id FROM gochatd_job_dependencies
                 WHERE depends_on_id = OLD.id AND resolved_status IS NULL
                   AND NOT run_if_failed);
    UPDATE background_jobs
    SET waits_on = waits_on - 1,
        scheduled_at = CASE WHEN waits_on = 1 THEN ((julianday('now') - 2440587.5) * 86400.0)
                            ELSE scheduled_at END,
        updated_at = ((julianday('now') - 2440587.5) * 86400.0)
    WHERE status = 'queued' AND waits_on > 0
      AND id IN (SELECT job_id FROM gochatd_job_dependencies
                 WHERE depends_on_id = OLD.id AND resolved_status IS NULL AND run_if_failed);
    UPDATE gochatd_job_dependencies SET resolved_status = 'cancelled'
    WHERE depends_on_id = OLD.id AND resolved_status IS NULL;
END;
