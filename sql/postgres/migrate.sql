-- Queries of `gochatd migrate` (daemon/migrate/backends.py). {table}, {key}, {columns},
-- {placeholders} and {assignments} are filled from daemon/migrate/tables.py, never from input.
-- Text keys compare with COLLATE "C" (byte order) so both dialects walk rows in the same order.

-- name: schema_version
SELECT coalesce(max(version), 0) FROM gochatd_schema_migrations

-- name: has_schema_table
SELECT to_regclass('gochatd_schema_migrations') IS NOT NULL

-- name: tenants
SELECT tenant_id FROM background_jobs UNION SELECT tenant_id FROM reply_outbox
UNION SELECT tenant_id FROM gochatd_job_dependencies UNION SELECT tenant_id FROM gochatd_batches
ORDER BY 1

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

-- name: migrator_write
-- First in each of the migrator's write transactions on the destination: the rows it writes
-- are the source's as they are, so 0019's trigger must not resolve edges over again there
-- (local to the transaction: every other writer of the destination resolves as always).
SELECT set_config('gochatd.migrator_write', 'on', true)

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

-- name: route_get
-- Tenant routes (daemon/migrate/route_control.py; the daemons read them in store/router.py).
SELECT tenant_id, state, destination, version, readonly_until,
       readonly_until IS NOT NULL AND readonly_until < now() AS window_over
FROM gochatd_routes WHERE tenant_id = %(tenant)s

-- name: route_list
SELECT tenant_id, state, destination, version, readonly_until,
       readonly_until IS NOT NULL AND readonly_until < now() AS window_over
FROM gochatd_routes ORDER BY tenant_id

-- name: route_set
INSERT INTO gochatd_routes (tenant_id, destination, state, readonly_until)
VALUES (%(tenant)s, %(destination)s, %(state)s,
        CASE WHEN %(window_s)s::float8 IS NULL THEN NULL
             ELSE now() + make_interval(secs => %(window_s)s::float8) END)
ON CONFLICT (tenant_id) DO UPDATE SET
    destination = excluded.destination, state = excluded.state,
    readonly_until = excluded.readonly_until,
    version = nextval('gochatd_route_version'), updated_at = now()
RETURNING version

-- name: route_acks
-- The live daemons and the route version each has seen: those whose fleet heartbeat
-- (gochatd_daemons) is within the liveness window, 0 when one has acknowledged nothing yet
-- (a daemon acknowledges each version it sees, once: migrate/follower.py), and those that
-- acknowledged within it (a daemon of an older release re-acknowledges every 5 s).
SELECT worker_id, max(version) FROM (
    SELECT d.id AS worker_id, coalesce(a.version, 0) AS version
    FROM gochatd_daemons AS d LEFT JOIN gochatd_route_acks AS a ON a.worker_id = d.id
    WHERE d.last_heartbeat > now() - make_interval(secs => %(live_s)s::float8)
    UNION ALL
    SELECT worker_id, version FROM gochatd_route_acks
    WHERE acked_at > now() - make_interval(secs => %(live_s)s::float8)
) AS live
GROUP BY worker_id
ORDER BY worker_id

-- name: destination_writes_after
-- Rows of a scope the destination changed (or deleted) after the cutover's watermark.
SELECT
    (SELECT count(*) FROM background_jobs
      WHERE change_seq > %(after)s AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s))
  + (SELECT count(*) FROM reply_outbox
      WHERE change_seq > %(after)s AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s))
  + (SELECT count(*) FROM gochatd_job_dependencies
      WHERE change_seq > %(after)s AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s))
  + (SELECT count(*) FROM gochatd_batches
      WHERE change_seq > %(after)s AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s))
  + (SELECT count(*) FROM gochatd_change_tombstones
      WHERE change_seq > %(after)s AND (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s))
  + (SELECT count(*) FROM gochatd_queue_pauses
      WHERE change_seq > %(after)s AND %(tenant)s::text IS NULL)
  + (SELECT count(*) FROM gochatd_periodic_slots
      WHERE change_seq > %(after)s AND %(tenant)s::text IS NULL)

-- name: id_floor
-- Past every id the source has handed out (partial moves: the two databases keep allocating
-- ids, so the destination's are put far above the source's), never backwards. Per tenant
-- table: jobs, replies, edges and batches all keep their ids when they move.
SELECT setval(pg_get_serial_sequence('{table}', '{key}'),
              greatest(%(floor)s::bigint,
                       coalesce(pg_sequence_last_value(
                           pg_get_serial_sequence('{table}', '{key}')::regclass), 1)))

-- name: last_id
SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('{table}', '{key}')::regclass), 0)

-- Change tracking (migration 0007): catch-up, the safe horizon and live validate.
-- Fleet-wide tables are walked by change_seq without a tenant; their tombstones have
-- tenant_id NULL. Tenant tables have bigint keys, fleet-wide ones text keys.

-- name: change_counter
-- The last number any writer drew, committed or not: the sequence ignores snapshots.
SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM gochatd_change_seq

-- name: current_snapshot
SELECT pg_current_snapshot()::text

-- name: snapshot_in_progress
SELECT count(*) FROM pg_snapshot_xip(%(snapshot)s::pg_snapshot) AS x (xid)
WHERE pg_xact_status(x.xid) = 'in progress'

-- name: tenant_changes
SELECT {columns}, change_seq FROM {table}
WHERE tenant_id = %(tenant)s AND change_seq > %(after)s AND change_seq <= %(upto)s
ORDER BY change_seq LIMIT %(limit)s

-- name: global_changes
SELECT {columns}, change_seq FROM {table}
WHERE change_seq > %(after)s AND change_seq <= %(upto)s
ORDER BY change_seq LIMIT %(limit)s

-- name: tenant_changed_keys
SELECT change_seq, {key} FROM {table}
WHERE tenant_id = %(tenant)s AND change_seq > %(after)s AND change_seq <= %(upto)s
ORDER BY change_seq LIMIT %(limit)s

-- name: global_changed_keys
SELECT change_seq, {key} FROM {table}
WHERE change_seq > %(after)s AND change_seq <= %(upto)s
ORDER BY change_seq LIMIT %(limit)s

-- name: tenant_tombstones
SELECT change_seq, row_key FROM gochatd_change_tombstones
WHERE tenant_id = %(tenant)s AND table_name = '{table}'
  AND change_seq > %(after)s AND change_seq <= %(upto)s
ORDER BY change_seq LIMIT %(limit)s

-- name: global_tombstones
SELECT change_seq, row_key FROM gochatd_change_tombstones
WHERE tenant_id IS NULL AND table_name = '{table}'
  AND change_seq > %(after)s AND change_seq <= %(upto)s
ORDER BY change_seq LIMIT %(limit)s

-- name: delete_tenant_keys
-- The tenant guard keeps a key collision from ever deleting another tenant's row.
DELETE FROM {table} WHERE tenant_id = %(tenant)s AND {key} = ANY(%(keys)s::bigint[])

-- name: delete_global_keys
DELETE FROM {table} WHERE {key} = ANY(%(keys)s::text[])

-- name: tenant_rows_by_keys
SELECT {columns} FROM {table}
WHERE tenant_id = %(tenant)s AND {key} = ANY(%(keys)s::bigint[])
ORDER BY {key}

-- name: global_rows_by_keys
SELECT {columns} FROM {table}
WHERE {key} = ANY(%(keys)s::text[])
ORDER BY {key} COLLATE "C"

-- name: begin_snapshot
-- Every read until end_snapshot sees one state; read only, so it never takes an xid.
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY

-- name: end_snapshot
COMMIT

-- name: abort_snapshot
ROLLBACK

-- name: route_guard_installed
SELECT count(*) >= 6 FROM pg_trigger WHERE tgname = 'gochatd_guard_moved' AND NOT tgisinternal

-- name: install_route_guard
-- The read-only guard of moved tenants (function in 0007), installed once by the first
-- `migrate start`. Each CREATE waits for the table's writers in progress; lock_timeout makes
-- a long-open writer an error instead of a stall.
SET lock_timeout = '10s';
CREATE OR REPLACE TRIGGER gochatd_guard_moved BEFORE INSERT OR UPDATE OR DELETE ON background_jobs
    FOR EACH ROW EXECUTE FUNCTION gochatd_guard_moved('tenant');
CREATE OR REPLACE TRIGGER gochatd_guard_moved BEFORE INSERT OR UPDATE OR DELETE ON reply_outbox
    FOR EACH ROW EXECUTE FUNCTION gochatd_guard_moved('tenant');
CREATE OR REPLACE TRIGGER gochatd_guard_moved BEFORE INSERT OR UPDATE OR DELETE ON gochatd_job_dependencies
    FOR EACH ROW EXECUTE FUNCTION gochatd_guard_moved('tenant');
CREATE OR REPLACE TRIGGER gochatd_guard_moved BEFORE INSERT OR UPDATE OR DELETE ON gochatd_batches
    FOR EACH ROW EXECUTE FUNCTION gochatd_guard_moved('tenant');
CREATE OR REPLACE TRIGGER gochatd_guard_moved BEFORE INSERT OR UPDATE OR DELETE ON gochatd_queue_pauses
    FOR EACH ROW EXECUTE FUNCTION gochatd_guard_moved('fleet');
CREATE OR REPLACE TRIGGER gochatd_guard_moved BEFORE INSERT OR UPDATE OR DELETE ON gochatd_periodic_slots
    FOR EACH ROW EXECUTE FUNCTION gochatd_guard_moved('fleet');
RESET lock_timeout

-- name: install_change_index_jobs
-- Catch-up reads one tenant's changes above a watermark. CONCURRENTLY: the daemons keep
-- writing while it builds (it cannot run inside a transaction: one statement per query).
CREATE INDEX CONCURRENTLY IF NOT EXISTS background_jobs_changes_idx
    ON background_jobs (tenant_id, change_seq)

-- name: install_change_index_outbox
CREATE INDEX CONCURRENTLY IF NOT EXISTS reply_outbox_changes_idx
    ON reply_outbox (tenant_id, change_seq)

-- name: install_change_index_dependencies
CREATE INDEX CONCURRENTLY IF NOT EXISTS gochatd_job_dependencies_changes_idx
    ON gochatd_job_dependencies (tenant_id, change_seq)

-- name: install_change_index_batches
CREATE INDEX CONCURRENTLY IF NOT EXISTS gochatd_batches_changes_idx
    ON gochatd_batches (tenant_id, change_seq)


-- name: change_tracking_marked
-- The database took part in a move (0010): an upgrade keeps its change tracking.
SELECT count(*) > 0 FROM gochatd_change_tracking

-- name: change_tracking_installed
SELECT count(*) >= 6 FROM pg_trigger
WHERE tgname IN ('background_jobs_track_change', 'reply_outbox_track_change',
                 'gochatd_queue_pauses_track_change', 'gochatd_periodic_slots_track_change',
                 'gochatd_job_dependencies_track_change', 'gochatd_batches_track_change')
  AND NOT tgisinternal

-- name: install_change_tracking
-- Change tracking (function in 0007; off until a move, 0010), installed by the first
-- `migrate start` in the source and the destination, and by `gochatd db upgrade` in a
-- database marked here. Each CREATE waits for the table's writers in progress.
SET lock_timeout = '10s';
INSERT INTO gochatd_change_tracking (id) VALUES (1) ON CONFLICT (id) DO NOTHING;
CREATE OR REPLACE TRIGGER background_jobs_track_change
    BEFORE INSERT OR UPDATE OR DELETE ON background_jobs
    FOR EACH ROW EXECUTE FUNCTION gochatd_track_change('tenant');
CREATE OR REPLACE TRIGGER reply_outbox_track_change
    BEFORE INSERT OR UPDATE OR DELETE ON reply_outbox
    FOR EACH ROW EXECUTE FUNCTION gochatd_track_change('tenant');
CREATE OR REPLACE TRIGGER gochatd_job_dependencies_track_change
    BEFORE INSERT OR UPDATE OR DELETE ON gochatd_job_dependencies
    FOR EACH ROW EXECUTE FUNCTION gochatd_track_change('tenant');
CREATE OR REPLACE TRIGGER gochatd_batches_track_change
    BEFORE INSERT OR UPDATE OR DELETE ON gochatd_batches
    FOR EACH ROW EXECUTE FUNCTION gochatd_track_change('tenant');
CREATE OR REPLACE TRIGGER gochatd_queue_pauses_track_change
    BEFORE INSERT OR UPDATE OR DELETE ON gochatd_queue_pauses
    FOR EACH ROW EXECUTE FUNCTION gochatd_track_change('fleet');
CREATE OR REPLACE TRIGGER gochatd_periodic_slots_track_change
    BEFORE INSERT OR UPDATE OR DELETE ON gochatd_periodic_slots
    FOR EACH ROW EXECUTE FUNCTION gochatd_track_change('fleet');
RESET lock_timeout
