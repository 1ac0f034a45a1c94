-- SQLite twin of sql/postgres/0007: change tracking and tenant routes for live backend
-- migration (docs/migrate.md). SQLite has no sequences: one counter row, bumped by the
-- triggers inside the writing transaction (writers are serialised, so numbers commit in
-- order and the migrator's horizon is simply the committed counter).
-- Two ways to number a write:
--   * gochatd's own hot statements set change_seq themselves, to the counter + 1 (fragment
--     _next_change in queries.sql); the *_numbered triggers then only move the counter up;
--   * any other write (admin actions, foreign producers' plain SQL) leaves change_seq alone,
--     and a trigger draws the next number and stamps the row with an UPDATE of its own.
-- A writer that sets change_seq itself must take it from the counter like _next_change.
CREATE TABLE IF NOT EXISTS gochatd_change_counter (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO gochatd_change_counter (id, value) VALUES (1, 0);

ALTER TABLE background_jobs ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reply_outbox ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gochatd_queue_pauses ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gochatd_periodic_slots ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;

-- The catch-up index (tenant_id, change_seq) and the read-only guard of moved tenants are
-- installed by the first `gochatd migrate start` (sql/sqlite/migrate.sql): both cost every
-- write, and only a move needs them.
-- Copy and validate walk one tenant in id order: (tenant_id, rowid), with no sort per batch.
CREATE INDEX IF NOT EXISTS background_jobs_tenant_idx ON background_jobs (tenant_id);
CREATE INDEX IF NOT EXISTS reply_outbox_tenant_idx ON reply_outbox (tenant_id);

CREATE TABLE IF NOT EXISTS gochatd_change_tombstones (
    change_seq INTEGER PRIMARY KEY,
    table_name TEXT NOT NULL,
    tenant_id  TEXT,
    row_key    TEXT NOT NULL,
    deleted_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
);
CREATE INDEX IF NOT EXISTS gochatd_change_tombstones_tenant_idx
    ON gochatd_change_tombstones (tenant_id, change_seq);

-- States as in sql/postgres/0007. version: max(version) + 1 on every change (writers are
-- serialised), never reused because rows are never deleted.
CREATE TABLE IF NOT EXISTS gochatd_routes (
    tenant_id      TEXT PRIMARY KEY,
    destination    TEXT NOT NULL,
    state          TEXT NOT NULL,
    version        INTEGER NOT NULL,
    readonly_until REAL,
    updated_at     REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    CONSTRAINT gochatd_routes_state_check
        CHECK (state IN ('tracking', 'frozen', 'destination', 'source'))
);

CREATE TABLE IF NOT EXISTS gochatd_route_acks (
    worker_id TEXT PRIMARY KEY,
    version   INTEGER NOT NULL,
    acked_at  REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
);

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
