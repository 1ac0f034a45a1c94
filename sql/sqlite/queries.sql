-- Named queries for the SQLite store. Each block starts with "-- name: <name>".
-- {now} is SQLite's clock in epoch seconds; lists arrive as JSON arrays.

-- name: enqueue_job
INSERT INTO background_jobs
    (tenant_id, job_type, queue, payload, priority, max_attempts, scheduled_at,
     idempotency_key, traceparent, dispatched_at)
SELECT :tenant_id, :job_type, :queue, :payload, :priority, :max_attempts, due.at,
       :idempotency_key, :traceparent,
       CASE WHEN :dispatch_now AND due.at <= {now} THEN {now} END
FROM (SELECT CAST(COALESCE(:scheduled_at, {now} + :delay_s) AS REAL) AS at) AS due
WHERE true
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING {job_columns};

-- name: find_idempotent_job
SELECT {job_columns}, (job_type = :job_type AND payload = :payload) AS same_job
FROM background_jobs
WHERE tenant_id = :tenant_id AND idempotency_key = :idempotency_key;

-- name: claim_jobs
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = {now},
    lease_expires_at = {now} + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = {now}
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND scheduled_at <= {now}
RETURNING {job_columns};

-- name: claim_due_jobs
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = {now},
    lease_expires_at = {now} + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = {now}
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE queue = :queue AND status IN ('queued', 'retrying') AND scheduled_at <= {now}
    ORDER BY priority DESC, scheduled_at, id
    LIMIT :limit)
RETURNING {job_columns};

-- name: finish_jobs
UPDATE background_jobs
SET status = u.status,
    attempts = CASE WHEN u.refund THEN max(background_jobs.attempts - 1, 0)
                    ELSE background_jobs.attempts END,
    scheduled_at = CASE WHEN u.status = 'retrying' THEN {now} + u.delay_s
                        ELSE background_jobs.scheduled_at END,
    completed_at = CASE WHEN u.status = 'completed' THEN {now}
                        ELSE background_jobs.completed_at END,
    failed_at = CASE WHEN u.status = 'dead' THEN {now} ELSE background_jobs.failed_at END,
    error_class = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                       THEN u.error_class ELSE background_jobs.error_class END,
    last_error = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                      THEN u.last_error ELSE background_jobs.last_error END,
    lease_expires_at = NULL, dispatched_at = NULL, cancel_requested = 0, updated_at = {now}
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS owner,
             json_extract(value, '$[2]') AS fence, json_extract(value, '$[3]') AS status,
             CAST(json_extract(value, '$[4]') AS REAL) AS delay_s,
             json_extract(value, '$[5]') AS refund,
             json_extract(value, '$[6]') AS error_class, json_extract(value, '$[7]') AS last_error
      FROM json_each(:batch)) AS u
WHERE background_jobs.id = u.id AND background_jobs.status = 'running'
  AND background_jobs.locked_by = u.owner AND background_jobs.fence = u.fence
RETURNING background_jobs.id;

-- name: extend_leases
UPDATE background_jobs
SET lease_expires_at = {now} + :lease_s
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS fence
      FROM json_each(:leases)) AS u
WHERE background_jobs.id = u.id AND background_jobs.fence = u.fence
  AND background_jobs.locked_by = :owner AND background_jobs.status = 'running'
RETURNING background_jobs.id, background_jobs.cancel_requested;

-- name: reap_expired_leases
UPDATE background_jobs
SET status = CASE WHEN cancel_requested THEN 'cancelled'
                  WHEN attempts >= max_attempts THEN 'dead' ELSE 'retrying' END,
    failed_at = CASE WHEN NOT cancel_requested AND attempts >= max_attempts
                     THEN {now} ELSE failed_at END,
    error_class = 'lease_expired',
    last_error = 'lease expired while running: the worker stopped heartbeating',
    scheduled_at = {now}, lease_expires_at = NULL, dispatched_at = NULL,
    cancel_requested = 0, updated_at = {now}
WHERE id IN (SELECT id FROM background_jobs
             WHERE status = 'running' AND (lease_expires_at < {now} OR lease_expires_at IS NULL)
             ORDER BY lease_expires_at LIMIT :limit)
RETURNING id, job_type, queue, tenant_id, status;

-- name: dispatch_due_jobs
UPDATE background_jobs SET dispatched_at = {now}
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL AND scheduled_at <= {now}
      AND queue IN (SELECT value FROM json_each(:queues))
    ORDER BY scheduled_at, id
    LIMIT :limit)
RETURNING id, job_type, queue, tenant_id;

-- name: redispatch_stale_jobs
UPDATE background_jobs SET dispatched_at = {now}
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE queue = :queue AND status IN ('queued', 'retrying') AND scheduled_at <= {now}
      AND dispatched_at < {now} - :older_than_s
    ORDER BY dispatched_at, id
    LIMIT :limit)
RETURNING id, job_type, queue, tenant_id;

-- name: next_undispatched_in_s
SELECT min(scheduled_at) - {now}
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL
  AND queue IN (SELECT value FROM json_each(:queues));

-- name: next_due_in_s
SELECT min(scheduled_at) - {now}
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND queue IN (SELECT value FROM json_each(:queues));

-- name: get_job
SELECT {job_columns} FROM background_jobs WHERE id = :id;

-- name: list_jobs
SELECT {job_columns} FROM background_jobs
WHERE (:status IS NULL OR status = :status)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:job_type IS NULL OR job_type = :job_type)
  AND (:after_id IS NULL OR id > :after_id)
ORDER BY id
LIMIT :limit;

-- name: retry_job
UPDATE background_jobs
SET status = 'queued', attempts = 0, scheduled_at = {now}, failed_at = NULL,
    dispatched_at = NULL, cancel_requested = 0, updated_at = {now}
WHERE id = :id AND status IN ('dead', 'cancelled')
RETURNING {job_columns};

-- name: cancel_waiting_job
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = {now}
WHERE id = :id AND status IN ('queued', 'retrying')
RETURNING {job_columns};

-- name: request_cancel_running_job
UPDATE background_jobs SET cancel_requested = 1, updated_at = {now}
WHERE id = :id AND status = 'running'
RETURNING {job_columns};

-- name: count_jobs_by_status
SELECT status, count(*) FROM background_jobs GROUP BY status;

-- name: pause_queue
INSERT INTO gochatd_queue_pauses (queue, paused_by) VALUES (:queue, :by)
ON CONFLICT (queue) DO NOTHING
RETURNING queue;

-- name: resume_queue
DELETE FROM gochatd_queue_pauses WHERE queue = :queue
RETURNING queue;

-- name: list_paused_queues
SELECT queue FROM gochatd_queue_pauses ORDER BY queue;

-- name: queue_stats
SELECT queue,
       sum(status = 'queued' AND scheduled_at <= {now}),
       sum(status IN ('queued', 'retrying') AND scheduled_at > {now}),
       sum(status = 'running'),
       sum(status = 'retrying'),
       sum(status = 'dead'),
       {now} - min(CASE WHEN status IN ('queued', 'retrying') AND scheduled_at <= {now}
                        THEN scheduled_at END)
FROM background_jobs
WHERE status IN ('queued', 'retrying', 'running', 'dead')
GROUP BY queue;

-- name: retry_dead_jobs
UPDATE background_jobs
SET status = 'queued', attempts = 0, scheduled_at = {now}, failed_at = NULL,
    dispatched_at = NULL, cancel_requested = 0, updated_at = {now}
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE status = 'dead'
      AND (:queue IS NULL OR queue = :queue)
      AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
      AND (:job_type IS NULL OR job_type = :job_type)
    ORDER BY id
    LIMIT :limit)
RETURNING id;
