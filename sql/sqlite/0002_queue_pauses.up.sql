-- Fleet-wide queue pauses: every daemon on this database stops claiming from a paused queue.
CREATE TABLE IF NOT EXISTS gochatd_queue_pauses (
    queue     TEXT PRIMARY KEY,
    paused_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    paused_by TEXT NOT NULL DEFAULT ''
);
