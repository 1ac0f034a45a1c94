-- Fleet-wide queue pauses: every daemon on this database stops claiming from a paused queue.
CREATE TABLE IF NOT EXISTS gochatd_queue_pauses (
    queue     text        PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now(),
    paused_by text        NOT NULL DEFAULT ''
);
