-- Named queries for the PostgreSQL store. Each block starts with "-- name: <name>".
-- {job_columns} is replaced by the column list the store decodes.

-- name: enqueue_job
INSERT INTO background_jobs
    (tenant_id, job_type, queue, payload, priority, max_attempts, scheduled_at,
     idempotency_key, traceparent, dispatched_at)
SELECT %(tenant_id)s, %(job_type)s, %(queue)s, %(payload)s::jsonb, %(priority)s,
       %(max_attempts)s, due.at, %(idempotency_key)s, %(traceparent)s,
       CASE WHEN %(dispatch_now)s AND due.at <= now() THEN now() END
FROM (SELECT COALESCE(%(scheduled_at)s::timestamptz,
                      now() + make_interval(secs => %(delay_s)s)) AS at) AS due
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING {job_columns};

-- name: find_idempotent_job
SELECT {job_columns},
       (job_type = %(job_type)s AND payload = %(payload)s::jsonb) AS same_job
FROM background_jobs
WHERE tenant_id = %(tenant_id)s AND idempotency_key = %(idempotency_key)s;

-- name: claim_jobs
-- Stream-delivered ids: one conditional UPDATE; rows already claimed, finished or not yet
-- due are simply not returned.
UPDATE background_jobs
SET status = 'running', locked_by = %(owner)s, locked_at = now(),
    lease_expires_at = now() + make_interval(secs => %(lease_s)s),
    fence = fence + 1, attempts = attempts + 1, updated_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('queued', 'retrying')
  AND scheduled_at <= now()
RETURNING {job_columns};

-- name: claim_due_jobs
WITH picked AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE queue = %(queue)s AND status IN ('queued', 'retrying') AND scheduled_at <= now()
    ORDER BY priority DESC, scheduled_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs AS j
SET status = 'running', locked_by = %(owner)s, locked_at = now(),
    lease_expires_at = now() + make_interval(secs => %(lease_s)s),
    fence = j.fence + 1, attempts = j.attempts + 1, updated_at = now()
FROM picked
WHERE j.id = picked.id
RETURNING {job_columns_j};

-- name: finish_jobs
-- Compare-and-set on (id, owner, fence, status = running), row by row; returns the ids
-- that were applied. A stale owner or fence matches no row and writes nothing.
UPDATE background_jobs AS j
SET status = u.status,
    attempts = CASE WHEN u.refund THEN greatest(j.attempts - 1, 0) ELSE j.attempts END,
    scheduled_at = CASE WHEN u.status = 'retrying'
                        THEN now() + make_interval(secs => u.delay_s) ELSE j.scheduled_at END,
    completed_at = CASE WHEN u.status = 'completed' THEN now() ELSE j.completed_at END,
    failed_at = CASE WHEN u.status = 'dead' THEN now() ELSE j.failed_at END,
    error_class = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                       THEN u.error_class ELSE j.error_class END,
    last_error = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                      THEN u.last_error ELSE j.last_error END,
    lease_expires_at = NULL, dispatched_at = NULL, cancel_requested = false, updated_at = now()
FROM unnest(%(ids)s::bigint[], %(owners)s::text[], %(fences)s::bigint[], %(statuses)s::text[],
            %(delays)s::float8[], %(refunds)s::bool[], %(classes)s::text[], %(errors)s::text[])
     AS u(id, owner, fence, status, delay_s, refund, error_class, last_error)
WHERE j.id = u.id AND j.status = 'running' AND j.locked_by = u.owner AND j.fence = u.fence
RETURNING j.id;

-- name: extend_leases
UPDATE background_jobs AS j
SET lease_expires_at = now() + make_interval(secs => %(lease_s)s)
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS u(id, fence)
WHERE j.id = u.id AND j.fence = u.fence AND j.locked_by = %(owner)s AND j.status = 'running'
RETURNING j.id, j.cancel_requested;

-- name: reap_expired_leases
WITH expired AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE status = 'running' AND (lease_expires_at < now() OR lease_expires_at IS NULL)
    ORDER BY lease_expires_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs
SET status = CASE WHEN cancel_requested THEN 'cancelled'
                  WHEN attempts >= max_attempts THEN 'dead' ELSE 'retrying' END,
    failed_at = CASE WHEN NOT cancel_requested AND attempts >= max_attempts
                     THEN now() ELSE failed_at END,
    error_class = 'lease_expired',
    last_error = 'lease expired while running: the worker stopped heartbeating',
    scheduled_at = now(), lease_expires_at = NULL, dispatched_at = NULL,
    cancel_requested = false, updated_at = now()
FROM expired
WHERE background_jobs.id = expired.id
RETURNING background_jobs.id, job_type, queue, tenant_id, status;

-- name: dispatch_due_jobs
-- Jobs that became due without a stream entry (delayed, retried, foreign INSERTs).
WITH due AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL AND scheduled_at <= now()
      AND queue = ANY(%(queues)s::text[])
    ORDER BY scheduled_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs AS j SET dispatched_at = now()
FROM due WHERE j.id = due.id
RETURNING j.id, j.job_type, j.queue, j.tenant_id;

-- name: redispatch_stale_jobs
-- The sweep: due jobs whose last dispatch is older than the sweep interval (lost XADDs).
WITH stale AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE queue = %(queue)s AND status IN ('queued', 'retrying') AND scheduled_at <= now()
      AND dispatched_at < now() - make_interval(secs => %(older_than_s)s)
    ORDER BY dispatched_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs AS j SET dispatched_at = now()
FROM stale WHERE j.id = stale.id
RETURNING j.id, j.job_type, j.queue, j.tenant_id;

-- name: next_undispatched_in_s
-- Epochs, not an interval: a foreign row may hold 'infinity', which an interval cannot.
SELECT (EXTRACT(EPOCH FROM min(scheduled_at)) - EXTRACT(EPOCH FROM now()))::float8
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL
  AND queue = ANY(%(queues)s::text[]);

-- name: next_due_in_s
SELECT (EXTRACT(EPOCH FROM min(scheduled_at)) - EXTRACT(EPOCH FROM now()))::float8
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND queue = ANY(%(queues)s::text[]);

-- name: get_job
SELECT {job_columns} FROM background_jobs WHERE id = %(id)s;

-- name: list_jobs
SELECT {job_columns} FROM background_jobs
WHERE (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
  AND (%(after_id)s::bigint IS NULL OR id > %(after_id)s)
ORDER BY id
LIMIT %(limit)s;

-- name: retry_job
UPDATE background_jobs
SET status = 'queued', attempts = 0, scheduled_at = now(), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = false, updated_at = now()
WHERE id = %(id)s AND status IN ('dead', 'cancelled')
RETURNING {job_columns};

-- name: cancel_waiting_job
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = now()
WHERE id = %(id)s AND status IN ('queued', 'retrying')
RETURNING {job_columns};

-- name: request_cancel_running_job
UPDATE background_jobs SET cancel_requested = true, updated_at = now()
WHERE id = %(id)s AND status = 'running'
RETURNING {job_columns};

-- name: count_jobs_by_status
SELECT status, count(*) FROM background_jobs GROUP BY status;

-- name: pause_queue
INSERT INTO gochatd_queue_pauses (queue, paused_by) VALUES (%(queue)s, %(by)s)
ON CONFLICT (queue) DO NOTHING
RETURNING queue;

-- name: resume_queue
DELETE FROM gochatd_queue_pauses WHERE queue = %(queue)s
RETURNING queue;

-- name: list_paused_queues
SELECT queue FROM gochatd_queue_pauses ORDER BY queue;

-- name: queue_stats
SELECT queue,
       count(*) FILTER (WHERE status = 'queued' AND scheduled_at <= now()),
       count(*) FILTER (WHERE status IN ('queued', 'retrying') AND scheduled_at > now()),
       count(*) FILTER (WHERE status = 'running'),
       count(*) FILTER (WHERE status = 'retrying'),
       count(*) FILTER (WHERE status = 'dead'),
       (EXTRACT(EPOCH FROM now()) - EXTRACT(EPOCH FROM min(scheduled_at) FILTER (
           WHERE status IN ('queued', 'retrying') AND scheduled_at <= now())))::float8
FROM background_jobs
WHERE status IN ('queued', 'retrying', 'running', 'dead')
GROUP BY queue;

-- name: retry_dead_jobs
-- Bulk manual retry of dead jobs matching a filter; returns the ids moved to queued.
WITH picked AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE status = 'dead'
      AND (%(queue)s::text IS NULL OR queue = %(queue)s)
      AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
      AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs AS j
SET status = 'queued', attempts = 0, scheduled_at = now(), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = false, updated_at = now()
FROM picked WHERE j.id = picked.id
RETURNING j.id;
