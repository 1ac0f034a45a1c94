-- SQLite twin of sql/postgres/0012: per-minute finish counters, the daemons' fleet rows and
-- the index of waiting jobs by due time. Times are REAL epoch seconds (UTC) from SQLite's
-- clock; a counter's minute is a whole multiple of 60.
CREATE TABLE IF NOT EXISTS gochatd_job_counts (
    minute    REAL    NOT NULL,
    queue     TEXT    NOT NULL,
    job_type  TEXT    NOT NULL,
    completed INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    retried   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, job_type)
);

CREATE TABLE IF NOT EXISTS gochatd_daemons (
    id             TEXT    PRIMARY KEY,
    host           TEXT    NOT NULL,
    pid            INTEGER NOT NULL,
    mode           TEXT    NOT NULL,
    version        TEXT    NOT NULL,
    concurrency    INTEGER NOT NULL,
    in_flight      INTEGER NOT NULL,
    paused         INTEGER NOT NULL DEFAULT 0,
    draining       INTEGER NOT NULL DEFAULT 0,
    started_at     REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    last_heartbeat REAL    NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),
    requested      TEXT,
    requested_seq  INTEGER NOT NULL DEFAULT 0,
    CONSTRAINT gochatd_daemons_requested_check
        CHECK (requested IS NULL OR requested IN ('drain', 'pause', 'resume'))
);

CREATE INDEX IF NOT EXISTS background_jobs_waiting_idx
    ON background_jobs (scheduled_at, id)
    WHERE status IN ('queued', 'retrying');
