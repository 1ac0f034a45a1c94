-- PostgreSQL's 0016 announces pauses, route and fleet changes by NOTIFY. SQLite has no
-- notifications: its daemons keep reading these tables on their short period (one
-- process, an embedded file: a read costs no round trip). Kept so the numbering matches.
SELECT 1;
