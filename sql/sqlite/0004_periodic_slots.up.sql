-- Periodic jobs: the last slot (scheduled time) the fleet handled per periodic job. A daemon
-- enqueues a slot only by moving last_slot forward (compare-and-set, in the same transaction
-- as the job's INSERT), so each slot is enqueued at most once, whatever jobs retention does.
CREATE TABLE IF NOT EXISTS gochatd_periodic_slots (
    name       TEXT PRIMARY KEY,
    last_slot  REAL NOT NULL,
    updated_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
);
