-- SQLite twin of sql/postgres/0010: change tracking (0007) only where a move needs it. The
-- triggers and the counter bump cost every write, and only `gochatd migrate` reads the
-- numbers: the first `gochatd migrate start` installs them again (install_change_tracking in
-- sql/sqlite/migrate.sql) and marks the database in gochatd_change_tracking. A database that
-- already took part in a move is marked here, and `gochatd db upgrade` runs
-- install_change_tracking in the same transaction for a marked database (pasted by hand: run
-- it after this file).
CREATE TABLE IF NOT EXISTS gochatd_change_tracking (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    installed_at REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
);
INSERT OR IGNORE INTO gochatd_change_tracking (id)
SELECT 1 WHERE EXISTS (SELECT 1 FROM gochatd_routes) OR EXISTS (SELECT 1 FROM gochatd_migrations);

DROP TRIGGER IF EXISTS background_jobs_change_insert;
DROP TRIGGER IF EXISTS background_jobs_change_update;
DROP TRIGGER IF EXISTS background_jobs_change_numbered_insert;
DROP TRIGGER IF EXISTS background_jobs_change_numbered_update;
DROP TRIGGER IF EXISTS background_jobs_change_delete;
DROP TRIGGER IF EXISTS reply_outbox_change_insert;
DROP TRIGGER IF EXISTS reply_outbox_change_update;
DROP TRIGGER IF EXISTS reply_outbox_change_numbered_insert;
DROP TRIGGER IF EXISTS reply_outbox_change_numbered_update;
DROP TRIGGER IF EXISTS reply_outbox_change_delete;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_change_insert;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_change_update;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_change_numbered_insert;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_change_numbered_update;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_change_delete;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_change_insert;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_change_update;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_change_numbered_insert;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_change_numbered_update;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_change_delete;
