-- Control changes reach every daemon by LISTEN/NOTIFY instead of a poll (issue 22): a
-- queue pause or resume (gochatd_pauses), a tenant route change (gochatd_routes, written
-- by gochatd migrate), and a fleet change (gochatd_fleet): a daemon row inserted or
-- deleted, an operator's request for a daemon, or a daemon's handler set changing. A
-- heartbeat alone (the fleet loop's upsert of an existing row) announces nothing. Only a
-- wake-up: each daemon then reads the table, and re-reads it on a slow period anyway
-- (loops/pauses.py, migrate/follower.py, loops/fleet.py).
CREATE OR REPLACE FUNCTION gochatd_notify_control() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_ARGV[0], '');
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS gochatd_queue_pauses_notify ON gochatd_queue_pauses;
CREATE TRIGGER gochatd_queue_pauses_notify
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gochatd_queue_pauses
    FOR EACH STATEMENT
    EXECUTE FUNCTION gochatd_notify_control('gochatd_pauses');

DROP TRIGGER IF EXISTS gochatd_routes_notify ON gochatd_routes;
CREATE TRIGGER gochatd_routes_notify
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gochatd_routes
    FOR EACH STATEMENT
    EXECUTE FUNCTION gochatd_notify_control('gochatd_routes');

DROP TRIGGER IF EXISTS gochatd_daemons_notify ON gochatd_daemons;
CREATE TRIGGER gochatd_daemons_notify
    AFTER INSERT OR DELETE ON gochatd_daemons
    FOR EACH ROW
    EXECUTE FUNCTION gochatd_notify_control('gochatd_fleet');

DROP TRIGGER IF EXISTS gochatd_daemons_changed_notify ON gochatd_daemons;
CREATE TRIGGER gochatd_daemons_changed_notify
    AFTER UPDATE ON gochatd_daemons
    FOR EACH ROW
    WHEN (OLD.requested_seq IS DISTINCT FROM NEW.requested_seq
          OR OLD.requested IS DISTINCT FROM NEW.requested
          OR OLD.job_types IS DISTINCT FROM NEW.job_types
          OR OLD.pid IS DISTINCT FROM NEW.pid
          OR OLD.host IS DISTINCT FROM NEW.host)
    EXECUTE FUNCTION gochatd_notify_control('gochatd_fleet');
