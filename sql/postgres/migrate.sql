-- Queries of `gochatd migrate` (daemon/migrate/backends.py). {table}, {key}, {columns},
-- {placeholders} and {assignments} are filled from daemon/migrate/tables.py, never from input.
-- Text keys compare with COLLATE "C" (byte order) so both dialects walk rows in the same order.

-- name: schema_version
SELECT coalesce(max(version), 0) FROM gochatd_schema_migrations

-- name: has_schema_table
SELECT to_regclass('gochatd_schema_migrations') IS NOT NULL

-- name: tenants
SELECT tenant_id FROM background_jobs UNION SELECT tenant_id FROM reply_outbox ORDER BY 1

-- name: count_tenant_rows
SELECT count(*) FROM {table} WHERE tenant_id = %(tenant)s

-- name: count_rows
SELECT count(*) FROM {table}

-- name: tenant_batch
SELECT {columns} FROM {table}
WHERE tenant_id = %(tenant)s AND {key} > %(after)s
ORDER BY {key} LIMIT %(limit)s

-- name: global_batch
SELECT {columns} FROM {table}
WHERE {key} COLLATE "C" > %(after)s
ORDER BY {key} COLLATE "C" LIMIT %(limit)s

-- name: upsert
INSERT INTO {table} ({columns}) VALUES ({placeholders})
ON CONFLICT ({key}) DO UPDATE SET {assignments}

-- name: advance_sequence
-- Past every id in the table and never backwards, so new inserts cannot collide.
SELECT setval(
    pg_get_serial_sequence('{table}', '{key}'),
    greatest(
        (SELECT coalesce(max({key}), 1) FROM {table}),
        coalesce(pg_sequence_last_value(pg_get_serial_sequence('{table}', '{key}')::regclass), 1)
    )
)

-- name: state_upsert
INSERT INTO gochatd_migrations (tenant_id, phase, destination, status, report)
VALUES (%(tenant)s, %(phase)s, %(destination)s, %(status)s, %(report)s::jsonb)
ON CONFLICT (tenant_id, phase, destination) DO UPDATE SET
    status = excluded.status,
    report = excluded.report,
    updated_at = now(),
    finished_at = CASE WHEN excluded.status = 'running' THEN NULL ELSE now() END,
    started_at = CASE WHEN gochatd_migrations.status = 'running'
                      THEN gochatd_migrations.started_at ELSE now() END

-- name: state_get
SELECT tenant_id, phase, destination, status, started_at, finished_at, report, updated_at
FROM gochatd_migrations
WHERE tenant_id = %(tenant)s AND phase = %(phase)s AND destination = %(destination)s

-- name: state_list
SELECT tenant_id, phase, destination, status, started_at, finished_at, report, updated_at
FROM gochatd_migrations ORDER BY destination, tenant_id, phase
