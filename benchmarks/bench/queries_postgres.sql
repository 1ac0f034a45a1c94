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

-- name: bench_fill_dashboard
-- The dashboard scenario's jobs, ids :first.. (:count of them), as a long-lived system holds
-- them: 900 in 1000 completed, 50 dead, 10 cancelled, 5 running, the rest waiting (queued or
-- retrying), half of those scheduled in the next hour; 20 job types, 50 tenants, 3 queues.
INSERT INTO background_jobs (tenant_id, job_type, queue, payload, status, attempts,
                             max_attempts, scheduled_at, completed_at, failed_at, locked_by,
                             locked_at, lease_expires_at)
SELECT 't' || (mod(i, 50)), 'type:' || (mod(i, 20)),
       CASE mod(i, 3) WHEN 0 THEN 'default' WHEN 1 THEN 'high' ELSE 'low' END,
       jsonb_build_object('user', 'user-' || i, 'order', i, 'note', 'lorem ipsum dolor sit'),
       s.status, 1, 25,
       CASE WHEN s.status IN ('queued', 'retrying') AND mod(i, 2) = 0
            THEN now() + make_interval(secs => 60 + mod(i, 3600)) ELSE now() - interval '1 hour' END,
       CASE WHEN s.status = 'completed' THEN now() END,
       CASE WHEN s.status = 'dead' THEN now() END,
       CASE WHEN s.status = 'running' THEN 'bench' END,
       CASE WHEN s.status = 'running' THEN now() END,
       CASE WHEN s.status = 'running' THEN now() + interval '1 hour' END
FROM generate_series(%(first)s::bigint, %(first)s::bigint + %(count)s - 1) AS i,
     LATERAL (SELECT CASE WHEN mod(i, 1000) < 900 THEN 'completed' WHEN mod(i, 1000) < 950 THEN 'dead'
                          WHEN mod(i, 1000) < 960 THEN 'cancelled' WHEN mod(i, 1000) < 965 THEN 'running'
                          WHEN mod(i, 1000) < 985 THEN 'queued' ELSE 'retrying' END AS status) AS s;

-- name: bench_fill_job_counts
-- Two days of per-minute counters (the retention's whole window): 3 queues x 20 job types.
INSERT INTO gochatd_job_counts (minute, queue, job_type, completed, failed, retried)
SELECT date_trunc('minute', now()) - make_interval(mins => m), q, 'type:' || t, 10, 1, 2
FROM generate_series(0, 2 * 1440 - 1) AS m, unnest(ARRAY['default', 'high', 'low']) AS q,
     generate_series(0, 19) AS t;

-- name: bench_fill_daemons
INSERT INTO gochatd_daemons (id, host, pid, mode, version, concurrency, in_flight)
SELECT 'bench-' || d, 'host-' || d, 1000 + d, 'streams', '0', 16, 8
FROM generate_series(1, 20) AS d;

-- name: bench_vacuum_all
-- The dashboard's tables as autovacuum would leave them.
VACUUM (ANALYZE);
