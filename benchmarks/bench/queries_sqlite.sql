-- gochatd bench only (benchmarks/bench/): probes of a scratch database, never run by the
-- daemon. Loaded like sql/<dialect>/queries.sql (store/queries.py).

-- name: bench_job_times
-- Per finished job: enqueue->claim and due->claim, in ms.
SELECT id, (locked_at - created_at) * 1000.0, (locked_at - scheduled_at) * 1000.0
FROM background_jobs
WHERE id > :after_id AND locked_at IS NOT NULL
ORDER BY id
LIMIT :limit;

-- name: bench_count_completed
SELECT count(*) FROM background_jobs WHERE status = 'completed';

-- name: bench_max_job_id
SELECT coalesce(max(id), 0) FROM background_jobs;

-- name: bench_migrate_seed_jobs
-- The migrate scenario's source: jobs :first .. :first+:count-1 in one statement (one
-- transaction; the 0007 triggers fire per row, as in production). Tenants 10:5:3:2 by
-- i % 20; statuses by (i / 20) % 20, so every tenant has the same mix: 70% completed, 5% dead,
-- 15% queued, 5% retrying, 5% running. One job every 50 ms of history; payload ~100 bytes.
INSERT INTO background_jobs (tenant_id, job_type, queue, payload, status, attempts, scheduled_at,
    locked_by, locked_at, lease_expires_at, last_error, error_class, failed_at, completed_at,
    created_at, updated_at, fence, dispatched_at)
WITH RECURSIVE n(i) AS (
    SELECT :first UNION ALL SELECT i + 1 FROM n WHERE i < :first + :count - 1
), j(i, tenant, s, t) AS (
    SELECT i,
           CASE WHEN i % 20 < 10 THEN 'acme' WHEN i % 20 < 15 THEN 'globex'
                WHEN i % 20 < 18 THEN 'initech' ELSE 'umbrella' END,
           (i / 20) % 20, ((julianday('now') - 2440587.5) * 86400.0) - (:total - i) * 0.05
    FROM n
)
SELECT tenant, CASE WHEN i % 3 = 0 THEN 'chat:summarise' ELSE 'chat:reply' END,
       CASE WHEN i % 10 = 0 THEN 'bulk' ELSE 'default' END,
       json_object('chat_id', 100000 + i % 5000, 'message_id', i,
                   'text', substr(hex(randomblob(24)), 1, 44), 'lang', 'en'),
       CASE WHEN s < 14 THEN 'completed' WHEN s = 14 THEN 'dead' WHEN s < 18 THEN 'queued'
            WHEN s = 18 THEN 'retrying' ELSE 'running' END,
       CASE WHEN s < 14 THEN 1 WHEN s = 14 THEN 25 WHEN s < 18 THEN 0 WHEN s = 18 THEN 3
            ELSE 1 END,
       CASE WHEN s = 18 THEN ((julianday('now') - 2440587.5) * 86400.0) + 60.0 ELSE t END,
       CASE WHEN s = 19 THEN 'bench-worker' END,
       CASE WHEN s < 14 OR s = 19 THEN t + 0.2 END,
       CASE WHEN s = 19 THEN ((julianday('now') - 2440587.5) * 86400.0) + 300.0 END,
       CASE WHEN s IN (14, 18) THEN 'TimeoutError: upstream did not answer in 30 s' END,
       CASE WHEN s IN (14, 18) THEN 'timeout' END,
       CASE WHEN s = 14 THEN t + 0.6 END,
       CASE WHEN s < 14 THEN t + 0.5 END,
       t,
       CASE WHEN s < 14 THEN t + 0.5 WHEN s = 14 THEN t + 0.6 ELSE t + 0.2 END,
       CASE WHEN s < 15 OR s = 19 THEN 1 WHEN s = 18 THEN 3 ELSE 0 END,
       CASE WHEN s <> 15 THEN t + 0.01 END
FROM j;

-- name: bench_migrate_seed_outbox
-- Replies :first .. :first+:count-1, the k-th for job 10k + k % 10 (same tenant rule as the
-- jobs): 90% sent, 5% pending, 4% dead, 1% sending.
INSERT INTO reply_outbox (tenant_id, job_id, channel, recipient, body, dedupe_key, status,
    attempts, next_attempt_at, provider_message_id, error_class, created_at, updated_at, sent_at)
WITH RECURSIVE n(k) AS (
    SELECT :first UNION ALL SELECT k + 1 FROM n WHERE k < :first + :count - 1
), o(k, i, s, t) AS (
    SELECT k, k * 10 + k % 10, k % 100, ((julianday('now') - 2440587.5) * 86400.0) - (:total - k * 10) * 0.05 FROM n
)
SELECT CASE WHEN i % 20 < 10 THEN 'acme' WHEN i % 20 < 15 THEN 'globex'
            WHEN i % 20 < 18 THEN 'initech' ELSE 'umbrella' END,
       i, 'telegram', 'chat-' || (100000 + i % 5000),
       json_object('text', substr(hex(randomblob(30)), 1, 56), 'reply_to', i),
       'reply-' || i,
       CASE WHEN s < 90 THEN 'sent' WHEN s < 95 THEN 'pending' WHEN s < 99 THEN 'dead'
            ELSE 'sending' END,
       CASE WHEN s < 90 THEN 1 WHEN s < 95 THEN 0 WHEN s < 99 THEN 8 ELSE 1 END,
       t + 0.5,
       CASE WHEN s < 90 THEN 'tg-' || i END,
       CASE WHEN s >= 95 AND s < 99 THEN 'http_5xx' END,
       t, t + 0.5,
       CASE WHEN s < 90 THEN t + 0.5 END
FROM o;

-- name: bench_migrate_seed_pause
INSERT INTO gochatd_queue_pauses (queue, paused_by) VALUES ('bulk', 'bench');

-- name: bench_migrate_seed_slots
INSERT INTO gochatd_periodic_slots (name, last_slot)
VALUES ('hourly-digest', ((julianday('now') - 2440587.5) * 86400.0) - 600.0), ('nightly-cleanup', ((julianday('now') - 2440587.5) * 86400.0) - 3600.0);

-- name: bench_migrate_finish_jobs
-- Live writes during a move: the :count oldest queued or running jobs complete.
UPDATE background_jobs
SET status = 'completed', attempts = attempts + 1, fence = fence + 1, locked_by = NULL,
    lease_expires_at = NULL, completed_at = ((julianday('now') - 2440587.5) * 86400.0), updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT id FROM background_jobs WHERE status IN ('queued', 'running')
             ORDER BY id LIMIT :count);

-- name: bench_migrate_prune_jobs
-- Live deletes during a move (retention): the :count oldest completed jobs; each leaves a
-- tombstone.
DELETE FROM background_jobs
WHERE id IN (SELECT id FROM background_jobs WHERE status = 'completed' ORDER BY id LIMIT :count);

-- name: bench_fill_dashboard
-- As queries_postgres.sql: ids :first.. (:count of them), the same mix of statuses.
WITH RECURSIVE n(i) AS (SELECT :first UNION ALL SELECT i + 1 FROM n WHERE i < :first + :count - 1),
     s(i, status) AS (
         SELECT i, CASE WHEN i % 1000 < 900 THEN 'completed' WHEN i % 1000 < 950 THEN 'dead'
                        WHEN i % 1000 < 960 THEN 'cancelled' WHEN i % 1000 < 965 THEN 'running'
                        WHEN i % 1000 < 985 THEN 'queued' ELSE 'retrying' END FROM n),
     t(now) AS (SELECT ((julianday('now') - 2440587.5) * 86400.0))
INSERT INTO background_jobs (tenant_id, job_type, queue, payload, status, attempts,
                             max_attempts, scheduled_at, completed_at, failed_at, locked_by,
                             locked_at, lease_expires_at)
SELECT 't' || (i % 50), 'type:' || (i % 20),
       CASE i % 3 WHEN 0 THEN 'default' WHEN 1 THEN 'high' ELSE 'low' END,
       json_object('user', 'user-' || i, 'order', i, 'note', 'lorem ipsum dolor sit'),
       status, 1, 25,
       CASE WHEN status IN ('queued', 'retrying') AND i % 2 = 0 THEN now + 60 + i % 3600
            ELSE now - 3600.0 END,
       CASE WHEN status = 'completed' THEN now END,
       CASE WHEN status = 'dead' THEN now END,
       CASE WHEN status = 'running' THEN 'bench' END,
       CASE WHEN status = 'running' THEN now END,
       CASE WHEN status = 'running' THEN now + 3600.0 END
FROM s, t;

-- name: bench_fill_job_counts
WITH RECURSIVE m(m) AS (SELECT 0 UNION ALL SELECT m + 1 FROM m WHERE m < 2 * 1440 - 1),
     q(q) AS (VALUES ('default'), ('high'), ('low')),
     t(t) AS (SELECT 0 UNION ALL SELECT t + 1 FROM t WHERE t < 19)
INSERT INTO gochatd_job_counts (minute, queue, job_type, completed, failed, retried)
SELECT CAST(((julianday('now') - 2440587.5) * 86400.0) / 60 AS INTEGER) * 60.0 - m * 60.0,
       q, 'type:' || t, 10, 1, 2
FROM m, q, t;

-- name: bench_fill_daemons
WITH RECURSIVE d(d) AS (SELECT 1 UNION ALL SELECT d + 1 FROM d WHERE d < 20)
INSERT INTO gochatd_daemons (id, host, pid, mode, version, concurrency, in_flight)
SELECT 'bench-' || d, 'host-' || d, 1000 + d, 'streams', '0', 16, 8 FROM d;

-- name: bench_vacuum_all
ANALYZE;
