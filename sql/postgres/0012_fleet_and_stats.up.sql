-- The fleet dashboard's data (docs/operations.md, "The fleet" and "Throughput charts").
--
-- Per-minute finish counters: every daemon adds what its finisher committed since its last
-- flush (loops/stats.py), a few seconds' worth, to the row of the current minute by the
-- database clock. Keyed by queue and job type so the charts can split by either; pruned by
-- the retention loop (loops/retention.py keeps two days).
CREATE TABLE IF NOT EXISTS gochatd_job_counts (
    minute    timestamptz NOT NULL,
    queue     text        NOT NULL,
    job_type  text        NOT NULL,
    completed bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    retried   bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, job_type)
);

-- One row per running daemon, upserted by its fleet loop (loops/fleet.py) every few seconds
-- and deleted on a clean stop. ``requested`` is an operator's drain/pause/resume for that
-- daemon (POST /v1/fleet/<id>/<action>): the daemon applies it on its next pass and clears
-- it with a compare-and-set on (id, requested, requested_seq).
CREATE TABLE IF NOT EXISTS gochatd_daemons (
    id             text        PRIMARY KEY,
    host           text        NOT NULL,
    pid            integer     NOT NULL,
    mode           text        NOT NULL,
    version        text        NOT NULL,
    concurrency    integer     NOT NULL,
    in_flight      integer     NOT NULL,
    paused         boolean     NOT NULL DEFAULT false,
    draining       boolean     NOT NULL DEFAULT false,
    started_at     timestamptz NOT NULL DEFAULT now(),
    last_heartbeat timestamptz NOT NULL DEFAULT now(),
    requested      text,
    requested_seq  bigint      NOT NULL DEFAULT 0,
    CONSTRAINT gochatd_daemons_requested_check
        CHECK (requested IS NULL OR requested IN ('drain', 'pause', 'resume'))
);

-- The dashboard's Scheduled tab and count: waiting jobs by when they are due (the claim
-- index leads with the queue; this one serves every queue at once).
CREATE INDEX IF NOT EXISTS background_jobs_waiting_idx
    ON background_jobs (scheduled_at, id)
    WHERE status IN ('queued', 'retrying');
