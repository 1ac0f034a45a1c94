-- Change tracking (0007) only where a move needs it. Numbering every write costs every
-- write (a trigger per row, a sequence draw), and only `gochatd migrate` reads the numbers,
-- so a database that never moved a tenant runs without it: the first `gochatd migrate start`
-- installs the triggers (install_change_tracking in sql/postgres/migrate.sql) and marks the
-- database in gochatd_change_tracking.
-- A database that already took part in a move (it has routes or migration records) keeps
-- tracking: it is marked here, and `gochatd db upgrade` runs install_change_tracking again in
-- the same transaction for a marked database (pasted by hand: run it after this file).
CREATE TABLE IF NOT EXISTS gochatd_change_tracking (
    id           integer     PRIMARY KEY CHECK (id = 1),
    installed_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO gochatd_change_tracking (id)
SELECT 1 WHERE EXISTS (SELECT 1 FROM gochatd_routes) OR EXISTS (SELECT 1 FROM gochatd_migrations)
ON CONFLICT (id) DO NOTHING;

DROP TRIGGER IF EXISTS background_jobs_track_change ON background_jobs;
DROP TRIGGER IF EXISTS reply_outbox_track_change ON reply_outbox;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_track_change ON gochatd_queue_pauses;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_track_change ON gochatd_periodic_slots;
