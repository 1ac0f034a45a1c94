-- Queries of `gochatd migrate` (daemon/migrate/backends.py). {table}, {key}, {columns},
-- {placeholders} and {assignments} are filled from daemon/migrate/tables.py, never from input.
-- SQLite compares text keys by bytes (BINARY), the same order as PostgreSQL's COLLATE "C".

-- name: schema_version
SELECT coalesce(max(version), 0) FROM gochatd_schema_migrations

-- name: has_schema_table
SELECT count(*) > 0 FROM sqlite_master WHERE name = 'gochatd_schema_migrations'

-- name: tenants
SELECT tenant_id FROM background_jobs UNION SELECT tenant_id FROM reply_outbox
UNION SELECT tenant_id FROM gochatd_job_dependencies UNION SELECT tenant_id FROM gochatd_batches
ORDER BY 1

-- name: count_tenant_rows
SELECT count(*) FROM {table} WHERE tenant_id = :tenant

-- name: count_rows
SELECT count(*) FROM {table}

-- name: tenant_batch
SELECT {columns} FROM {table} INDEXED BY {table}_tenant_idx
WHERE tenant_id = :tenant AND {key} > :after
ORDER BY {key} LIMIT :limit

-- name: global_batch
SELECT {columns} FROM {table}
WHERE {key} > :after
ORDER BY {key} LIMIT :limit

-- name: upsert
INSERT INTO {table} ({columns}) VALUES ({placeholders})
ON CONFLICT ({key}) DO UPDATE SET {assignments}

-- name: migrator_write
-- First in each of the migrator's write transactions on the destination: the rows it writes
-- are the source's as they are, so 0019's trigger must not resolve edges over again there.
-- The row never commits (migrator_write_end deletes it; a crash rolls it back), and writers
-- are serialised, so no other writer ever sees it.
INSERT OR IGNORE INTO gochatd_migrator_writes (id) VALUES (1)

-- name: migrator_write_end
DELETE FROM gochatd_migrator_writes

-- name: has_migrator_writes
SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'gochatd_migrator_writes'

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

-- name: route_get
-- Tenant routes (daemon/migrate/route_control.py; the daemons read them in store/router.py).
SELECT tenant_id, state, destination, version, readonly_until,
       readonly_until IS NOT NULL AND readonly_until < ((julianday('now') - 2440587.5) * 86400.0) AS window_over
FROM gochatd_routes WHERE tenant_id = :tenant

-- name: route_list
SELECT tenant_id, state, destination, version, readonly_until,
       readonly_until IS NOT NULL AND readonly_until < ((julianday('now') - 2440587.5) * 86400.0) AS window_over
FROM gochatd_routes ORDER BY tenant_id

-- name: route_set
INSERT INTO gochatd_routes (tenant_id, destination, state, readonly_until, version)
VALUES (:tenant, :destination, :state,
        CASE WHEN :window_s IS NULL THEN NULL ELSE ((julianday('now') - 2440587.5) * 86400.0) + :window_s END,
        (SELECT coalesce(max(version), 0) + 1 FROM gochatd_routes))
ON CONFLICT (tenant_id) DO UPDATE SET
    destination = excluded.destination, state = excluded.state,
    readonly_until = excluded.readonly_until,
    version = (SELECT coalesce(max(version), 0) + 1 FROM gochatd_routes), updated_at = ((julianday('now') - 2440587.5) * 86400.0)
RETURNING version

-- name: route_acks
SELECT worker_id, max(version) FROM (
    SELECT d.id AS worker_id, coalesce(a.version, 0) AS version
    FROM gochatd_daemons AS d LEFT JOIN gochatd_route_acks AS a ON a.worker_id = d.id
    WHERE d.last_heartbeat > ((julianday('now') - 2440587.5) * 86400.0) - :live_s
    UNION ALL
    SELECT worker_id, version FROM gochatd_route_acks
    WHERE acked_at > ((julianday('now') - 2440587.5) * 86400.0) - :live_s
) AS live
GROUP BY worker_id
ORDER BY worker_id

-- name: destination_writes_after
SELECT
    (SELECT count(*) FROM background_jobs
      WHERE change_seq > :after AND (:tenant IS NULL OR tenant_id = :tenant))
  + (SELECT count(*) FROM reply_outbox
      WHERE change_seq > :after AND (:tenant IS NULL OR tenant_id = :tenant))
  + (SELECT count(*) FROM gochatd_job_dependencies
      WHERE change_seq > :after AND (:tenant IS NULL OR tenant_id = :tenant))
  + (SELECT count(*) FROM gochatd_batches
      WHERE change_seq > :after AND (:tenant IS NULL OR tenant_id = :tenant))
  + (SELECT count(*) FROM gochatd_change_tombstones
      WHERE change_seq > :after AND (:tenant IS NULL OR tenant_id = :tenant))
  + (SELECT count(*) FROM gochatd_queue_pauses WHERE change_seq > :after AND :tenant IS NULL)
  + (SELECT count(*) FROM gochatd_periodic_slots WHERE change_seq > :after AND :tenant IS NULL)

-- name: id_floor
-- As sql/postgres/migrate.sql: AUTOINCREMENT's counter lives in sqlite_sequence.
INSERT INTO sqlite_sequence (name, seq)
SELECT '{table}', :floor
WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = '{table}')

-- name: id_floor_existing
UPDATE sqlite_sequence SET seq = max(seq, :floor) WHERE name = '{table}'

-- name: last_id
SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = '{table}'), 0)

-- Change tracking (migration 0007): catch-up and live validate. Writers are serialised, so
-- the committed counter is the safe horizon. Tenant tables have integer keys, fleet-wide
-- ones text keys; key lists arrive as JSON arrays.

-- name: change_counter
SELECT value FROM gochatd_change_counter WHERE id = 1

-- name: tenant_changes
SELECT {columns}, change_seq FROM {table}
WHERE tenant_id = :tenant AND change_seq > :after AND change_seq <= :upto
ORDER BY change_seq LIMIT :limit

-- name: global_changes
SELECT {columns}, change_seq FROM {table}
WHERE change_seq > :after AND change_seq <= :upto
ORDER BY change_seq LIMIT :limit

-- name: tenant_changed_keys
SELECT change_seq, {key} FROM {table}
WHERE tenant_id = :tenant AND change_seq > :after AND change_seq <= :upto
ORDER BY change_seq LIMIT :limit

-- name: global_changed_keys
SELECT change_seq, {key} FROM {table}
WHERE change_seq > :after AND change_seq <= :upto
ORDER BY change_seq LIMIT :limit

-- name: tenant_tombstones
SELECT change_seq, row_key FROM gochatd_change_tombstones
WHERE tenant_id = :tenant AND table_name = '{table}'
  AND change_seq > :after AND change_seq <= :upto
ORDER BY change_seq LIMIT :limit

-- name: global_tombstones
SELECT change_seq, row_key FROM gochatd_change_tombstones
WHERE tenant_id IS NULL AND table_name = '{table}'
  AND change_seq > :after AND change_seq <= :upto
ORDER BY change_seq LIMIT :limit

-- name: delete_tenant_keys
-- The tenant guard keeps a key collision from ever deleting another tenant's row.
DELETE FROM {table} WHERE tenant_id = :tenant AND {key} IN (SELECT value FROM json_each(:keys))

-- name: delete_global_keys
DELETE FROM {table} WHERE {key} IN (SELECT value FROM json_each(:keys))

-- name: tenant_rows_by_keys
SELECT {columns} FROM {table}
WHERE tenant_id = :tenant AND {key} IN (SELECT value FROM json_each(:keys))
ORDER BY {key}

-- name: global_rows_by_keys
SELECT {columns} FROM {table}
WHERE {key} IN (SELECT value FROM json_each(:keys))
ORDER BY {key}

-- name: begin_snapshot
-- A deferred read transaction: its first SELECT fixes the snapshot (WAL) until end_snapshot.
BEGIN DEFERRED

-- name: end_snapshot
COMMIT

-- name: abort_snapshot
ROLLBACK

-- name: route_guard_installed
-- The read-only guard of moved tenants: three triggers per table (see install_route_guard).
SELECT count(*) >= 18 FROM sqlite_master WHERE type = 'trigger' AND name LIKE '%readonly%'

-- name: install_route_guard
-- Installed by the first `migrate start` (a subquery per row is a cost only a move needs):
-- a write to a row whose tenant's route is frozen or destination aborts.
CREATE TRIGGER IF NOT EXISTS background_jobs_readonly_insert BEFORE INSERT ON background_jobs
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NEW.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS background_jobs_readonly_update BEFORE UPDATE ON background_jobs
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NEW.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS background_jobs_readonly_delete BEFORE DELETE ON background_jobs
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = OLD.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS reply_outbox_readonly_insert BEFORE INSERT ON reply_outbox
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NEW.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS reply_outbox_readonly_update BEFORE UPDATE ON reply_outbox
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NEW.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS reply_outbox_readonly_delete BEFORE DELETE ON reply_outbox
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = OLD.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_job_dependencies_readonly_insert BEFORE INSERT ON gochatd_job_dependencies
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NEW.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_job_dependencies_readonly_update BEFORE UPDATE ON gochatd_job_dependencies
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NEW.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_job_dependencies_readonly_delete BEFORE DELETE ON gochatd_job_dependencies
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = OLD.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_batches_readonly_insert BEFORE INSERT ON gochatd_batches
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NEW.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_batches_readonly_update BEFORE UPDATE ON gochatd_batches
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NEW.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_batches_readonly_delete BEFORE DELETE ON gochatd_batches
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = OLD.tenant_id OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_queue_pauses_readonly_insert BEFORE INSERT ON gochatd_queue_pauses
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NULL OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_queue_pauses_readonly_update BEFORE UPDATE ON gochatd_queue_pauses
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NULL OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_queue_pauses_readonly_delete BEFORE DELETE ON gochatd_queue_pauses
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NULL OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_periodic_slots_readonly_insert BEFORE INSERT ON gochatd_periodic_slots
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NULL OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_periodic_slots_readonly_update BEFORE UPDATE ON gochatd_periodic_slots
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NULL OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;
CREATE TRIGGER IF NOT EXISTS gochatd_periodic_slots_readonly_delete BEFORE DELETE ON gochatd_periodic_slots
WHEN (SELECT r.state FROM gochatd_routes AS r WHERE r.tenant_id = NULL OR r.tenant_id = '*' ORDER BY r.tenant_id = '*' LIMIT 1) IN ('frozen', 'destination')
BEGIN
    SELECT RAISE(ABORT, 'gochatd: this tenant''s rows were moved to another database; this copy is read-only');
END;

-- name: install_change_indexes
-- Catch-up reads one tenant's changes above a watermark.
CREATE INDEX IF NOT EXISTS background_jobs_changes_idx ON background_jobs (tenant_id, change_seq);
CREATE INDEX IF NOT EXISTS reply_outbox_changes_idx ON reply_outbox (tenant_id, change_seq);
CREATE INDEX IF NOT EXISTS gochatd_job_dependencies_changes_idx
    ON gochatd_job_dependencies (tenant_id, change_seq);
CREATE INDEX IF NOT EXISTS gochatd_batches_changes_idx ON gochatd_batches (tenant_id, change_seq)

-- name: change_tracking_marked
-- The database took part in a move (0010): an upgrade keeps its change tracking.
SELECT count(*) > 0 FROM gochatd_change_tracking

-- name: change_tracking_installed
-- Five triggers per table (see install_change_tracking); the mark is written last.
SELECT count(*) >= 30 FROM sqlite_master WHERE type = 'trigger' AND name GLOB '*_change_*'

-- name: install_change_tracking
-- Change tracking (0007; off until a move, 0010), installed by the first `migrate start` in
-- the source and the destination, and by `gochatd db upgrade` in a database marked here.
-- See 0007 for the two ways a write is numbered. The mark goes last.
-- background_jobs
CREATE TRIGGER IF NOT EXISTS background_jobs_change_insert AFTER INSERT ON background_jobs
WHEN NEW.change_seq = 0
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE background_jobs SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS background_jobs_change_update AFTER UPDATE ON background_jobs
WHEN NEW.change_seq IS OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE background_jobs SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS background_jobs_change_numbered_insert AFTER INSERT ON background_jobs
WHEN NEW.change_seq <> 0
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS background_jobs_change_numbered_update AFTER UPDATE ON background_jobs
WHEN NEW.change_seq IS NOT OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS background_jobs_change_delete AFTER DELETE ON background_jobs
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    INSERT INTO gochatd_change_tombstones (change_seq, table_name, tenant_id, row_key)
    VALUES ((SELECT value FROM gochatd_change_counter WHERE id = 1), 'background_jobs', OLD.tenant_id,
            CAST(OLD.id AS TEXT));
END;
-- reply_outbox
CREATE TRIGGER IF NOT EXISTS reply_outbox_change_insert AFTER INSERT ON reply_outbox
WHEN NEW.change_seq = 0
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE reply_outbox SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS reply_outbox_change_update AFTER UPDATE ON reply_outbox
WHEN NEW.change_seq IS OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE reply_outbox SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS reply_outbox_change_numbered_insert AFTER INSERT ON reply_outbox
WHEN NEW.change_seq <> 0
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS reply_outbox_change_numbered_update AFTER UPDATE ON reply_outbox
WHEN NEW.change_seq IS NOT OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS reply_outbox_change_delete AFTER DELETE ON reply_outbox
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    INSERT INTO gochatd_change_tombstones (change_seq, table_name, tenant_id, row_key)
    VALUES ((SELECT value FROM gochatd_change_counter WHERE id = 1), 'reply_outbox', OLD.tenant_id,
            CAST(OLD.id AS TEXT));
END;
-- gochatd_job_dependencies
CREATE TRIGGER IF NOT EXISTS gochatd_job_dependencies_change_insert AFTER INSERT ON gochatd_job_dependencies
WHEN NEW.change_seq = 0
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE gochatd_job_dependencies SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_job_dependencies_change_update AFTER UPDATE ON gochatd_job_dependencies
WHEN NEW.change_seq IS OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE gochatd_job_dependencies SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_job_dependencies_change_numbered_insert AFTER INSERT ON gochatd_job_dependencies
WHEN NEW.change_seq <> 0
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_job_dependencies_change_numbered_update AFTER UPDATE ON gochatd_job_dependencies
WHEN NEW.change_seq IS NOT OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_job_dependencies_change_delete AFTER DELETE ON gochatd_job_dependencies
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    INSERT INTO gochatd_change_tombstones (change_seq, table_name, tenant_id, row_key)
    VALUES ((SELECT value FROM gochatd_change_counter WHERE id = 1), 'gochatd_job_dependencies', OLD.tenant_id,
            CAST(OLD.id AS TEXT));
END;
-- gochatd_batches
CREATE TRIGGER IF NOT EXISTS gochatd_batches_change_insert AFTER INSERT ON gochatd_batches
WHEN NEW.change_seq = 0
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE gochatd_batches SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_batches_change_update AFTER UPDATE ON gochatd_batches
WHEN NEW.change_seq IS OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE gochatd_batches SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE id = NEW.id;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_batches_change_numbered_insert AFTER INSERT ON gochatd_batches
WHEN NEW.change_seq <> 0
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_batches_change_numbered_update AFTER UPDATE ON gochatd_batches
WHEN NEW.change_seq IS NOT OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_batches_change_delete AFTER DELETE ON gochatd_batches
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    INSERT INTO gochatd_change_tombstones (change_seq, table_name, tenant_id, row_key)
    VALUES ((SELECT value FROM gochatd_change_counter WHERE id = 1), 'gochatd_batches', OLD.tenant_id,
            CAST(OLD.id AS TEXT));
END;
-- gochatd_queue_pauses
CREATE TRIGGER IF NOT EXISTS gochatd_queue_pauses_change_insert AFTER INSERT ON gochatd_queue_pauses
WHEN NEW.change_seq = 0
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE gochatd_queue_pauses SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE queue = NEW.queue;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_queue_pauses_change_update AFTER UPDATE ON gochatd_queue_pauses
WHEN NEW.change_seq IS OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE gochatd_queue_pauses SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE queue = NEW.queue;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_queue_pauses_change_numbered_insert AFTER INSERT ON gochatd_queue_pauses
WHEN NEW.change_seq <> 0
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_queue_pauses_change_numbered_update AFTER UPDATE ON gochatd_queue_pauses
WHEN NEW.change_seq IS NOT OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_queue_pauses_change_delete AFTER DELETE ON gochatd_queue_pauses
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    INSERT INTO gochatd_change_tombstones (change_seq, table_name, tenant_id, row_key)
    VALUES ((SELECT value FROM gochatd_change_counter WHERE id = 1), 'gochatd_queue_pauses', NULL,
            CAST(OLD.queue AS TEXT));
END;
-- gochatd_periodic_slots
CREATE TRIGGER IF NOT EXISTS gochatd_periodic_slots_change_insert AFTER INSERT ON gochatd_periodic_slots
WHEN NEW.change_seq = 0
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE gochatd_periodic_slots SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE name = NEW.name;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_periodic_slots_change_update AFTER UPDATE ON gochatd_periodic_slots
WHEN NEW.change_seq IS OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    UPDATE gochatd_periodic_slots SET change_seq = (SELECT value FROM gochatd_change_counter WHERE id = 1)
    WHERE name = NEW.name;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_periodic_slots_change_numbered_insert AFTER INSERT ON gochatd_periodic_slots
WHEN NEW.change_seq <> 0
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_periodic_slots_change_numbered_update AFTER UPDATE ON gochatd_periodic_slots
WHEN NEW.change_seq IS NOT OLD.change_seq
BEGIN
    UPDATE gochatd_change_counter SET value = max(value, NEW.change_seq) WHERE id = 1;
END;
CREATE TRIGGER IF NOT EXISTS gochatd_periodic_slots_change_delete AFTER DELETE ON gochatd_periodic_slots
BEGIN
    UPDATE gochatd_change_counter SET value = value + 1 WHERE id = 1;
    INSERT INTO gochatd_change_tombstones (change_seq, table_name, tenant_id, row_key)
    VALUES ((SELECT value FROM gochatd_change_counter WHERE id = 1), 'gochatd_periodic_slots', NULL,
            CAST(OLD.name AS TEXT));
END;
INSERT OR IGNORE INTO gochatd_change_tracking (id) VALUES (1);
