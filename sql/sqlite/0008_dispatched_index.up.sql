-- The sweep (redispatch_stale_jobs) reads waiting jobs of one queue by their last dispatch.
-- With this index it reads only the window since its previous pass: a transaction held open
-- elsewhere (whose snapshot keeps every dead row version) then costs it the new entries,
-- not every dead one (docs/bench.md, idle-in-tx).
CREATE INDEX IF NOT EXISTS background_jobs_dispatched_idx
    ON background_jobs (queue, dispatched_at, id)
    WHERE status IN ('queued', 'retrying') AND dispatched_at IS NOT NULL;
