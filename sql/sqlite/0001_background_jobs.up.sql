-- SQLite twin of sql/postgres/0001. Times are REAL seconds since the Unix epoch (UTC),
-- taken from SQLite's own clock.
CREATE TABLE IF NOT EXISTS background_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id        TEXT    NOT NULL DEFAULT 'default',
    job_type         TEXT    NOT NULL,
    queue            TEXT    NOT NULL DEFAULT 'default',
    payload          TEXT    NOT NULL DEFAULT '{}',
    status           TEXT    NOT NULL DEFAULT 'queued',
    priority         INTEGER NOT NULL DEFAULT 0,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 25,
    scheduled_at     REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    idempotency_key  TEXT,
    locked_by        TEXT,
    locked_at        REAL,
    last_error       TEXT,
    error_class      TEXT,
    failed_at        REAL,
    completed_at     REAL,
    created_at       REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    updated_at       REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    fence            INTEGER NOT NULL DEFAULT 0,
    lease_expires_at REAL,
    dispatched_at    REAL,
    traceparent      TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT background_jobs_status_check
        CHECK (status IN ('queued', 'running', 'retrying', 'completed', 'dead', 'cancelled')),
    CONSTRAINT background_jobs_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 1000),
    CONSTRAINT background_jobs_attempts_check CHECK (attempts >= 0),
    CONSTRAINT background_jobs_job_type_check CHECK (length(job_type) BETWEEN 1 AND 200),
    CONSTRAINT background_jobs_queue_check
        CHECK (length(queue) BETWEEN 1 AND 64 AND queue NOT GLOB '*[^A-Za-z0-9_-]*'),
    CONSTRAINT background_jobs_tenant_check CHECK (length(tenant_id) BETWEEN 1 AND 200),
    CONSTRAINT background_jobs_payload_check
        CHECK (json_valid(payload) AND json_type(payload) = 'object'),
    CONSTRAINT background_jobs_scheduled_check CHECK (typeof(scheduled_at) = 'real'),
    CONSTRAINT background_jobs_tenant_idempotency_key UNIQUE (tenant_id, idempotency_key)
);

CREATE INDEX IF NOT EXISTS background_jobs_claimable_idx
    ON background_jobs (queue, priority DESC, scheduled_at, id)
    WHERE status IN ('queued', 'retrying');
CREATE INDEX IF NOT EXISTS background_jobs_undispatched_idx
    ON background_jobs (scheduled_at, id)
    WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL;
CREATE INDEX IF NOT EXISTS background_jobs_lease_idx
    ON background_jobs (lease_expires_at)
    WHERE status = 'running';
CREATE INDEX IF NOT EXISTS background_jobs_status_idx ON background_jobs (status, id);
