-- gochatd bench only (benchmarks/bench/): probes of a scratch database, never run by the
-- daemon. Loaded like sql/<dialect>/queries.sql (store/queries.py).

-- name: bench_insert_backlog
-- A backlog of due no-op jobs in one statement.
INSERT INTO background_jobs (job_type, queue, max_attempts, payload)
SELECT 'sys:noop', 'default', 25, '{}'::jsonb FROM generate_series(1, %(count)s);

-- name: bench_job_times
-- Per finished job, on the database clock: enqueue->claim and due->claim, in ms.
SELECT id,
       (EXTRACT(EPOCH FROM (locked_at - created_at)) * 1000)::float8,
       (EXTRACT(EPOCH FROM (locked_at - scheduled_at)) * 1000)::float8
FROM background_jobs
WHERE id > %(after_id)s AND locked_at IS NOT NULL
ORDER BY id
LIMIT %(limit)s;

-- name: bench_count_completed
SELECT count(*) FROM background_jobs WHERE status = 'completed';

-- name: bench_max_job_id
SELECT coalesce(max(id), 0) FROM background_jobs;

-- name: bench_table_stats
-- Dead tuples and HOT updates of background_jobs (the statistics lag by up to a second).
SELECT n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd, autovacuum_count, vacuum_count,
       pg_total_relation_size(relid)
FROM pg_stat_user_tables
WHERE relname = 'background_jobs';

-- name: bench_table_options
SELECT coalesce(array_to_string(reloptions, ','), '') FROM pg_class
WHERE relname = 'background_jobs' AND relkind = 'r';

-- name: bench_hold_snapshot
-- The idle-in-transaction holder: take a transaction id (and so hold back the xmin
-- horizon), then do nothing until the bench rolls it back.
SELECT txid_current();

-- name: bench_vacuum
-- What autovacuum would do, now: so that every measured backlog starts from the same state.
VACUUM (ANALYZE) background_jobs;
