-- SQLite twin of sql/postgres/0006: backend migration state, kept in the SOURCE database.
CREATE TABLE IF NOT EXISTS gochatd_migrations (
    tenant_id   TEXT NOT NULL,
    phase       TEXT NOT NULL,
    destination TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'running',
    started_at  REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    finished_at REAL,
    report      TEXT NOT NULL DEFAULT '{}',
    updated_at  REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    PRIMARY KEY (tenant_id, phase, destination),
    CONSTRAINT gochatd_migrations_status_check CHECK (status IN ('running', 'done', 'failed'))
);
