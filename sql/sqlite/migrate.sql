-- Queries of `gochatd migrate` (daemon/migrate/backends.py). {table}, {key}, {columns},
-- {placeholders} and {assignments} are filled from daemon/migrate/tables.py, never from input.
-- SQLite compares text keys by bytes (BINARY), the same order as PostgreSQL's COLLATE "C".

-- name: schema_version
SELECT coalesce(max(version), 0) FROM gochatd_schema_migrations

-- name: has_schema_table
SELECT count(*) > 0 FROM sqlite_master WHERE name = 'gochatd_schema_migrations'

-- name: tenants
SELECT tenant_id FROM background_jobs UNION SELECT tenant_id FROM reply_outbox ORDER BY 1

-- name: count_tenant_rows
SELECT count(*) FROM {table} WHERE tenant_id = :tenant

-- name: count_rows
SELECT count(*) FROM {table}

-- name: tenant_batch
SELECT {columns} FROM {table}
WHERE tenant_id = :tenant AND {key} > :after
ORDER BY {key} LIMIT :limit

-- name: global_batch
SELECT {columns} FROM {table}
WHERE {key} > :after
ORDER BY {key} LIMIT :limit

-- name: upsert
INSERT INTO {table} ({columns}) VALUES ({placeholders})
ON CONFLICT ({key}) DO UPDATE SET {assignments}

-- name: advance_sequence
-- AUTOINCREMENT keeps its high-water mark in sqlite_sequence; an explicit id normally moves
-- it, this makes sure of it (and never moves it backwards).
INSERT INTO sqlite_sequence (name, seq)
SELECT '{table}', coalesce(max({key}), 0) FROM {table}
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = '{table}')

-- name: advance_sequence_existing
UPDATE sqlite_sequence
SET seq = max(seq, (SELECT coalesce(max({key}), 0) FROM {table}))
WHERE name = '{table}'

-- name: state_upsert
INSERT INTO gochatd_migrations (tenant_id, phase, destination, status, report)
VALUES (:tenant, :phase, :destination, :status, :report)
ON CONFLICT (tenant_id, phase, destination) DO UPDATE SET
    status = excluded.status,
    report = excluded.report,
    updated_at = ((julianday('now') - 2440587.5) * 86400.0),
    finished_at = CASE WHEN excluded.status = 'running' THEN NULL
                       ELSE ((julianday('now') - 2440587.5) * 86400.0) END,
    started_at = CASE WHEN gochatd_migrations.status = 'running'
                      THEN gochatd_migrations.started_at
                      ELSE ((julianday('now') - 2440587.5) * 86400.0) END

-- name: state_get
SELECT tenant_id, phase, destination, status, started_at, finished_at, report, updated_at
FROM gochatd_migrations
WHERE tenant_id = :tenant AND phase = :phase AND destination = :destination

-- name: state_list
SELECT tenant_id, phase, destination, status, started_at, finished_at, report, updated_at
FROM gochatd_migrations ORDER BY destination, tenant_id, phase
