-- Backend migration state (gochatd migrate, daemon/migrate/state.py): one row per tenant,
-- phase and destination, kept in the SOURCE database so a re-run after a crash resumes.
-- tenant_id '' stands for the fleet-wide tables (queue pauses, periodic slots).
-- destination is the destination URL with its password masked; report holds no secrets.
CREATE TABLE IF NOT EXISTS gochatd_migrations (
    tenant_id   text        NOT NULL,
    phase       text        NOT NULL,
    destination text        NOT NULL,
    status      text        NOT NULL DEFAULT 'running',
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    report      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, phase, destination),
    CONSTRAINT gochatd_migrations_status_check CHECK (status IN ('running', 'done', 'failed'))
);
