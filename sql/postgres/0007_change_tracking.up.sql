-- Change tracking and tenant routes for live backend migration (gochatd migrate; see
-- docs/migrate.md). Every write to a migrated table draws a number from one sequence
-- (change_seq); deletes leave a tombstone with theirs. The migrator copies up to a watermark
-- and then applies everything above it, so no write is lost however it arrived (daemon,
-- client, gateway or a foreign producer's plain SQL).
CREATE SEQUENCE IF NOT EXISTS gochatd_change_seq;

ALTER TABLE background_jobs ADD COLUMN IF NOT EXISTS change_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE reply_outbox ADD COLUMN IF NOT EXISTS change_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE gochatd_queue_pauses ADD COLUMN IF NOT EXISTS change_seq bigint NOT NULL DEFAULT 0;
ALTER TABLE gochatd_periodic_slots ADD COLUMN IF NOT EXISTS change_seq bigint NOT NULL DEFAULT 0;

-- The catch-up index, (tenant_id, change_seq), is built by the first `gochatd migrate start`
-- (CREATE INDEX CONCURRENTLY; sql/postgres/migrate.sql): maintaining it costs every write,
-- and only a move reads it.

-- Deleted rows (retention, queue resumes, foreign deletes). tenant_id is NULL for the
-- fleet-wide tables. Pruned by the migrator once no migration needs them.
CREATE TABLE IF NOT EXISTS gochatd_change_tombstones (
    change_seq bigint      PRIMARY KEY,
    table_name text        NOT NULL,
    tenant_id  text,
    row_key    text        NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS gochatd_change_tombstones_tenant_idx
    ON gochatd_change_tombstones (tenant_id, change_seq);

-- Where each tenant's rows live. No row: here. tenant_id '*' covers every tenant without a
-- row of its own (a whole-database move, `--all`) and the fleet-wide tables.
--   tracking     being copied; this database stays the writer
--   frozen       cutover in progress: writes are held by the daemons and refused here
--   destination  moved: the daemons use `destination`; this copy is read-only
--   source       moved back (rollback) or abandoned: this database is the writer again
-- version rises with every change (one sequence), so a daemon polls max(version) only.
CREATE SEQUENCE IF NOT EXISTS gochatd_route_version;
CREATE TABLE IF NOT EXISTS gochatd_routes (
    tenant_id      text        PRIMARY KEY,
    destination    text        NOT NULL,  -- the destination URL without its password
    state          text        NOT NULL,
    version        bigint      NOT NULL DEFAULT nextval('gochatd_route_version'),
    readonly_until timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT gochatd_routes_state_check
        CHECK (state IN ('tracking', 'frozen', 'destination', 'source'))
);

-- Each daemon's last seen route version: the migrator's barrier waits for every live one.
CREATE TABLE IF NOT EXISTS gochatd_route_acks (
    worker_id text        PRIMARY KEY,
    version   bigint      NOT NULL,
    acked_at  timestamptz NOT NULL DEFAULT now()
);

-- Numbering is on every write's path, so it is only assignments (plpgsql evaluates those
-- without a query); deletes, which are rare, also insert their tombstone.
CREATE OR REPLACE FUNCTION gochatd_track_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    writer xid8;
    tenant text;
    row_key text;
BEGIN
    -- Take a transaction id before the number: the migrator's horizon waits for the
    -- transactions in progress, and a writer must already be one when it draws a number.
    writer := pg_current_xact_id();
    IF TG_OP <> 'DELETE' THEN
        NEW.change_seq := nextval('gochatd_change_seq');
        RETURN NEW;
    END IF;
    IF TG_ARGV[0] = 'tenant' THEN
        tenant := OLD.tenant_id;
    END IF;
    IF TG_TABLE_NAME = 'gochatd_queue_pauses' THEN
        row_key := OLD.queue;
    ELSIF TG_TABLE_NAME = 'gochatd_periodic_slots' THEN
        row_key := OLD.name;
    ELSE
        row_key := OLD.id::text;
    END IF;
    INSERT INTO gochatd_change_tombstones (change_seq, table_name, tenant_id, row_key)
    VALUES (nextval('gochatd_change_seq'), TG_TABLE_NAME, tenant, row_key);
    RETURN OLD;
END
$$;

-- The read-only guard of moved tenants: a query per row, so it is not installed here but by
-- `gochatd migrate start` (trigger gochatd_guard_moved on the four tables; see
-- sql/postgres/migrate.sql, install_route_guard): a database that never moved anything
-- never pays for it. TG_ARGV[0]: 'tenant' or 'fleet' (the fleet-wide tables).
CREATE OR REPLACE FUNCTION gochatd_guard_moved() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    tenant text;
    route_state text;
BEGIN
    IF TG_ARGV[0] = 'tenant' THEN
        IF TG_OP = 'DELETE' THEN tenant := OLD.tenant_id; ELSE tenant := NEW.tenant_id; END IF;
    END IF;
    SELECT r.state INTO route_state FROM gochatd_routes AS r
    WHERE r.tenant_id = tenant OR r.tenant_id = '*'
    ORDER BY r.tenant_id = '*' LIMIT 1;
    IF route_state IN ('frozen', 'destination') THEN
        RAISE EXCEPTION 'gochatd: this tenant''s rows were moved to another database (route %); this copy is read-only',
            route_state USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS background_jobs_track_change ON background_jobs;
CREATE TRIGGER background_jobs_track_change
    BEFORE INSERT OR UPDATE OR DELETE ON background_jobs
    FOR EACH ROW EXECUTE FUNCTION gochatd_track_change('tenant');
DROP TRIGGER IF EXISTS reply_outbox_track_change ON reply_outbox;
CREATE TRIGGER reply_outbox_track_change
    BEFORE INSERT OR UPDATE OR DELETE ON reply_outbox
    FOR EACH ROW EXECUTE FUNCTION gochatd_track_change('tenant');
DROP TRIGGER IF EXISTS gochatd_queue_pauses_track_change ON gochatd_queue_pauses;
CREATE TRIGGER gochatd_queue_pauses_track_change
    BEFORE INSERT OR UPDATE OR DELETE ON gochatd_queue_pauses
    FOR EACH ROW EXECUTE FUNCTION gochatd_track_change('fleet');
DROP TRIGGER IF EXISTS gochatd_periodic_slots_track_change ON gochatd_periodic_slots;
CREATE TRIGGER gochatd_periodic_slots_track_change
    BEFORE INSERT OR UPDATE OR DELETE ON gochatd_periodic_slots
    FOR EACH ROW EXECUTE FUNCTION gochatd_track_change('fleet');
