-- The gochat background_jobs contract, plus leases, fences and dispatch bookkeeping.
CREATE TABLE IF NOT EXISTS background_jobs (
    id               bigserial PRIMARY KEY,
    tenant_id        text        NOT NULL DEFAULT 'default',
    job_type         text        NOT NULL,
    queue            text        NOT NULL DEFAULT 'default',
    payload          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    status           text        NOT NULL DEFAULT 'queued',
    priority         integer     NOT NULL DEFAULT 0,
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL DEFAULT 25,
    scheduled_at     timestamptz NOT NULL DEFAULT now(),
    idempotency_key  text,
    locked_by        text,
    locked_at        timestamptz,
    last_error       text,
    error_class      text,
    failed_at        timestamptz,
    completed_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    fence            bigint      NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    dispatched_at    timestamptz,
    traceparent      text,
    cancel_requested boolean     NOT NULL DEFAULT false,
    CONSTRAINT background_jobs_status_check
        CHECK (status IN ('queued', 'running', 'retrying', 'completed', 'dead', 'cancelled')),
    CONSTRAINT background_jobs_max_attempts_check CHECK (max_attempts BETWEEN 1 AND 1000),
    CONSTRAINT background_jobs_attempts_check CHECK (attempts >= 0),
    CONSTRAINT background_jobs_job_type_check CHECK (length(job_type) BETWEEN 1 AND 200),
    CONSTRAINT background_jobs_queue_check CHECK (queue ~ '^[A-Za-z0-9_-]{1,64}$'),
    CONSTRAINT background_jobs_tenant_check CHECK (length(tenant_id) BETWEEN 1 AND 200),
    CONSTRAINT background_jobs_payload_check CHECK (jsonb_typeof(payload) = 'object'),
    CONSTRAINT background_jobs_tenant_idempotency_key UNIQUE (tenant_id, idempotency_key)
);

-- Polling claims: due work per queue in priority order.
CREATE INDEX IF NOT EXISTS background_jobs_claimable_idx
    ON background_jobs (queue, priority DESC, scheduled_at, id)
    WHERE status IN ('queued', 'retrying');
-- Scheduler: the next undispatched due time.
CREATE INDEX IF NOT EXISTS background_jobs_undispatched_idx
    ON background_jobs (scheduled_at, id)
    WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL;
-- Reaper: expired leases.
CREATE INDEX IF NOT EXISTS background_jobs_lease_idx
    ON background_jobs (lease_expires_at)
    WHERE status = 'running';
-- Listing by status.
CREATE INDEX IF NOT EXISTS background_jobs_status_idx ON background_jobs (status, id);

-- Wake the daemons when a row becomes claimable without having been dispatched:
-- foreign producers' plain INSERTs, delayed jobs, retries, manual retries.
CREATE OR REPLACE FUNCTION gochatd_notify_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('gochatd_jobs', NEW.queue);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS background_jobs_notify ON background_jobs;
CREATE TRIGGER background_jobs_notify
    AFTER INSERT OR UPDATE OF status, scheduled_at, dispatched_at ON background_jobs
    FOR EACH ROW
    WHEN (NEW.status IN ('queued', 'retrying') AND NEW.dispatched_at IS NULL)
    EXECUTE FUNCTION gochatd_notify_job();
