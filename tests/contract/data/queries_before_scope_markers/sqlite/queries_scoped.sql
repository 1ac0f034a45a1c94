-- The tenant-scoped twins of queries.sql (same names, same parameters, plus two): the
-- set a SQLite store runs while it serves only some tenants, during a live move
-- (SqlJobStore.tenant_scope, store/scope.py; docs/migrate.md). Each adds the clause
--   ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
-- compared as a value, not a bare IN, so that the planner never takes it for an index
-- term. Queries that take no scope are not repeated here.

-- name: claim_jobs
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = ((julianday('now') - 2440587.5) * 86400.0),
    lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0), change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
  AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
       OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                  WHERE substr(job_type, 1, length(tp.value)) = tp.value))
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: claim_delivered_jobs
-- Streams mode: the delivered ids, like claim_jobs, in the queues whose waiting jobs all
-- have priority 0; in the others nothing (the caller runs claim_due_jobs for them).
-- Postgres' query says why.
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = ((julianday('now') - 2440587.5) * 86400.0),
    lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0), change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
  AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
       OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                  WHERE substr(job_type, 1, length(tp.value)) = tp.value))
  AND queue NOT IN (
      SELECT q.value FROM json_each(:queues) AS q
      WHERE EXISTS (SELECT 1 FROM background_jobs AS b
                    WHERE b.queue = q.value AND b.status IN ('queued', 'retrying')
                      AND b.priority > 0)
         OR EXISTS (SELECT 1 FROM background_jobs AS b
                    WHERE b.queue = q.value AND b.status IN ('queued', 'retrying')
                      AND b.priority < 0))
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: claim_due_jobs
WITH RECURSIVE priorities(p) AS (
    SELECT (SELECT min(priority) FROM background_jobs
            WHERE queue = :queue AND status IN ('queued', 'retrying'))
    UNION ALL
    SELECT (SELECT min(b.priority) FROM background_jobs AS b
            WHERE b.queue = :queue AND b.status IN ('queued', 'retrying')
              AND b.priority > priorities.p)
    FROM priorities WHERE priorities.p IS NOT NULL
)
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = ((julianday('now') - 2440587.5) * 86400.0),
    lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0), change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)
WHERE id IN (SELECT b.id FROM priorities JOIN background_jobs AS b
  ON b.id IN (SELECT h.id FROM background_jobs AS h
              WHERE h.queue = :queue AND h.status IN ('queued', 'retrying')
                AND h.priority = priorities.p AND h.scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
                AND (:runnable_any OR h.job_type IN (SELECT value FROM json_each(:runnable_types))
                     OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                                WHERE substr(h.job_type, 1, length(tp.value)) = tp.value))
                AND (h.dispatched_at IS NOT NULL OR NOT :dispatched_only)
                AND h.tenant_id NOT IN (SELECT value FROM json_each(:skip_tenants))
                AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
              ORDER BY h.scheduled_at, h.id
              LIMIT :limit)
ORDER BY min(b.priority + CAST((((julianday('now') - 2440587.5) * 86400.0) - b.scheduled_at)
                               / :aging_s AS INTEGER), max(b.priority) OVER ()) DESC,
         b.scheduled_at, b.id
LIMIT :limit)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: finish_jobs
UPDATE background_jobs
SET status = u.status,
    attempts = CASE WHEN u.refund THEN max(background_jobs.attempts - 1, 0)
                    ELSE background_jobs.attempts END,
    scheduled_at = CASE WHEN u.status = 'retrying' THEN ((julianday('now') - 2440587.5) * 86400.0) + u.delay_s
                        ELSE background_jobs.scheduled_at END,
    completed_at = CASE WHEN u.status = 'completed' THEN ((julianday('now') - 2440587.5) * 86400.0)
                        ELSE background_jobs.completed_at END,
    failed_at = CASE WHEN u.status = 'dead' THEN ((julianday('now') - 2440587.5) * 86400.0) ELSE background_jobs.failed_at END,
    error_class = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                       THEN u.error_class END,  -- a completion clears the error
    last_error = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                      THEN u.last_error END,
    lease_expires_at = NULL, dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0),
    change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS owner,
             json_extract(value, '$[2]') AS fence, json_extract(value, '$[3]') AS status,
             CAST(json_extract(value, '$[4]') AS REAL) AS delay_s,
             json_extract(value, '$[5]') AS refund,
             json_extract(value, '$[6]') AS error_class, json_extract(value, '$[7]') AS last_error
      FROM json_each(:batch)) AS u
-- "+status": keep the planner off the status index, so it walks the batch and looks each
-- row up by id (via the status index it would scan every running row once per batch item).
WHERE background_jobs.id = u.id AND +background_jobs.status = 'running'
  AND background_jobs.locked_by = u.owner AND background_jobs.fence = u.fence
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING background_jobs.id;

-- name: extend_leases
UPDATE background_jobs
SET lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease_s, change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS fence
      FROM json_each(:leases)) AS u
WHERE background_jobs.id = u.id AND background_jobs.fence = u.fence
  AND background_jobs.locked_by = :owner AND +background_jobs.status = 'running'
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING background_jobs.id, background_jobs.cancel_requested;

-- name: reap_expired_leases
UPDATE background_jobs
SET status = CASE WHEN cancel_requested THEN 'cancelled'
                  WHEN attempts >= max_attempts THEN 'dead' ELSE 'retrying' END,
    failed_at = CASE WHEN NOT cancel_requested AND attempts >= max_attempts
                     THEN ((julianday('now') - 2440587.5) * 86400.0) ELSE failed_at END,
    error_class = 'lease_expired',
    last_error = 'lease expired while running: the worker stopped heartbeating',
    scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), lease_expires_at = NULL, dispatched_at = NULL,
    cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0), change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)
WHERE id IN (SELECT id FROM background_jobs
             WHERE status = 'running'
               AND ((lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0)
                     AND lease_expires_at >= coalesce(((julianday('now') - 2440587.5) * 86400.0) - :expired_within_s, -1e308))
                    OR (id > :created_after_id AND lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0))
                    OR lease_expires_at IS NULL)
               AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
             ORDER BY lease_expires_at LIMIT :limit)
RETURNING id, job_type, queue, tenant_id, status, fence;

-- name: dispatch_due_jobs
UPDATE background_jobs SET dispatched_at = ((julianday('now') - 2440587.5) * 86400.0), change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
      AND queue IN (SELECT value FROM json_each(:queues))
      AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
           OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                      WHERE substr(job_type, 1, length(tp.value)) = tp.value))
      AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
    ORDER BY scheduled_at, id
    LIMIT :limit)
RETURNING id, job_type, queue, tenant_id;

-- name: redispatch_stale_jobs
UPDATE background_jobs SET dispatched_at = ((julianday('now') - 2440587.5) * 86400.0), change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE queue = :queue AND status IN ('queued', 'retrying') AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
      AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
           OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                      WHERE substr(job_type, 1, length(tp.value)) = tp.value))
      AND dispatched_at < ((julianday('now') - 2440587.5) * 86400.0) - :older_than_s
      AND dispatched_at >= coalesce(((julianday('now') - 2440587.5) * 86400.0) - :dispatched_within_s, -1e308)
      AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
    ORDER BY dispatched_at, id
    LIMIT :limit)
RETURNING id, job_type, queue, tenant_id;

-- name: next_undispatched_in_s
SELECT min(scheduled_at) - ((julianday('now') - 2440587.5) * 86400.0)
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL
  AND queue IN (SELECT value FROM json_each(:queues))
  AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
       OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                  WHERE substr(job_type, 1, length(tp.value)) = tp.value))
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only);

-- name: next_due_in_s
SELECT min(scheduled_at) - ((julianday('now') - 2440587.5) * 86400.0)
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND queue IN (SELECT value FROM json_each(:queues))
  AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
       OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                  WHERE substr(job_type, 1, length(tp.value)) = tp.value))
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only);

-- name: get_job
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested FROM background_jobs WHERE id = :id AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only);

-- name: get_job_states
-- The finisher, after a write it retried: each job's fence and status for the ids of one
-- batch (did the first attempt commit?), one query for the batch.
SELECT id, fence, status FROM background_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only);

-- name: list_jobs
-- Oldest first (the CLI's default), after the cursor id. :pattern is the search text
-- (docs/operations.md, "Listing jobs") escaped and wrapped as a LIKE pattern (store/sql_store.py
-- search_params); :search_id the same text as an id when it is one; :search_after_id bounds
-- a search to the newest jobs (an id range the primary key serves).
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested FROM background_jobs
WHERE (:status IS NULL OR status = :status)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:job_type IS NULL OR job_type = :job_type)
  AND (:pattern IS NULL OR id = :search_id
       OR job_type LIKE :pattern ESCAPE '\' OR tenant_id LIKE :pattern ESCAPE '\'
       OR payload LIKE :pattern ESCAPE '\')
  AND id > coalesce(:search_after_id, 0)
  AND id > coalesce(:after_id, 0)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
ORDER BY id
LIMIT :limit;

-- name: list_jobs_newest
-- Newest first (the admin API's default): the primary key read backwards, or
-- background_jobs_status_idx with a status.
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested FROM background_jobs
WHERE (:status IS NULL OR status = :status)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:job_type IS NULL OR job_type = :job_type)
  AND (:pattern IS NULL OR id = :search_id
       OR job_type LIKE :pattern ESCAPE '\' OR tenant_id LIKE :pattern ESCAPE '\'
       OR payload LIKE :pattern ESCAPE '\')
  AND id > coalesce(:search_after_id, 0)
  AND id < coalesce(:after_id, 9223372036854775807)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
ORDER BY id DESC
LIMIT :limit;

-- name: list_scheduled_jobs
-- Waiting jobs not yet due, soonest first (background_jobs_waiting_idx); the cursor is the
-- last id of the previous page, whose (scheduled_at, id) the next page starts after.
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested FROM background_jobs
WHERE (:status IS NULL OR status = :status)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:job_type IS NULL OR job_type = :job_type)
  AND (:pattern IS NULL OR id = :search_id
       OR job_type LIKE :pattern ESCAPE '\' OR tenant_id LIKE :pattern ESCAPE '\'
       OR payload LIKE :pattern ESCAPE '\')
  AND id > coalesce(:search_after_id, 0)
  AND status IN ('queued', 'retrying') AND scheduled_at > ((julianday('now') - 2440587.5) * 86400.0)
  AND (:after_id IS NULL OR (scheduled_at, id) > (
       SELECT c.scheduled_at, c.id FROM background_jobs AS c WHERE c.id = :after_id))
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
ORDER BY scheduled_at, id
LIMIT :limit;

-- name: count_delayed_jobs
-- Queued jobs not yet due (the part of queued the dashboard shows as Scheduled, as the
-- queues' delayed column does; a retrying job counts under retrying only).
SELECT count(*) FROM background_jobs
WHERE status = 'queued' AND scheduled_at > ((julianday('now') - 2440587.5) * 86400.0)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only);

-- name: count_scheduled_jobs
-- Waiting jobs not yet due (a subset of queued + retrying: the dashboard shows it apart).
SELECT count(*) FROM background_jobs
WHERE status IN ('queued', 'retrying') AND scheduled_at > ((julianday('now') - 2440587.5) * 86400.0)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only);

-- name: requeue_job
UPDATE background_jobs
SET status = 'queued', attempts = 0, scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status IN ('dead', 'cancelled')
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: cancel_waiting_job
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status IN ('queued', 'retrying')
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: request_cancel_running_job
UPDATE background_jobs SET cancel_requested = 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status = 'running' AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: count_jobs_by_status
SELECT status, count(*) FROM background_jobs WHERE ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only) GROUP BY status;

-- name: queue_stats
-- Each job once: queued (due), delayed (queued, not yet due), running, retrying, dead.
SELECT queue,
       sum(status = 'queued' AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)),
       sum(status = 'queued' AND scheduled_at > ((julianday('now') - 2440587.5) * 86400.0)),
       sum(status = 'running'),
       sum(status = 'retrying'),
       sum(status = 'dead'),
       ((julianday('now') - 2440587.5) * 86400.0) - min(CASE WHEN status IN ('queued', 'retrying') AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
                        THEN scheduled_at END)
FROM background_jobs
WHERE status IN ('queued', 'retrying', 'running', 'dead')
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
GROUP BY queue;

-- name: requeue_dead_jobs
UPDATE background_jobs
SET status = 'queued', attempts = 0, scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE status = 'dead'
      AND (:queue IS NULL OR queue = :queue)
      AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
      AND (:job_type IS NULL OR job_type = :job_type)
      AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
    ORDER BY id
    LIMIT :limit)
RETURNING id;

-- name: prune_finished_jobs
-- Retention: delete up to :limit rows of one terminal status unchanged for :older_than_s
-- seconds (database clock). The literal status list matches background_jobs_finished_idx.
DELETE FROM background_jobs
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE status IN ('completed', 'dead', 'cancelled')
      AND status = :status
      AND updated_at < ((julianday('now') - 2440587.5) * 86400.0) - :older_than_s
      AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
    ORDER BY updated_at
    LIMIT :limit)
RETURNING id;

-- name: count_prunable_jobs
SELECT count(*) FROM background_jobs
WHERE status IN ('completed', 'dead', 'cancelled')
  AND status = :status
  AND updated_at < ((julianday('now') - 2440587.5) * 86400.0) - :older_than_s
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only);

-- name: claim_outbox
UPDATE reply_outbox
SET status = 'sending', lease_owner = :owner, lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease_s,
    attempts = attempts + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (
    SELECT id FROM reply_outbox
    WHERE status = 'pending' AND next_attempt_at <= ((julianday('now') - 2440587.5) * 86400.0)
      AND channel IN (SELECT value FROM json_each(:channels))
      AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
    ORDER BY next_attempt_at, id
    LIMIT :limit)
RETURNING id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at;

-- name: complete_outbox
UPDATE reply_outbox
SET status = 'sent', sent_at = ((julianday('now') - 2440587.5) * 86400.0), provider_message_id = :provider_message_id,
    error_class = NULL, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status = 'sending' AND lease_owner = :owner AND attempts = :attempt
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING ((julianday('now') - 2440587.5) * 86400.0) - created_at;

-- name: retry_outbox
UPDATE reply_outbox
SET status = 'pending', next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0) + :delay_s, error_class = :error_class,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status = 'sending' AND lease_owner = :owner AND attempts = :attempt
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id;

-- name: fail_outbox
UPDATE reply_outbox
SET status = 'dead', error_class = :error_class, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status = 'sending' AND lease_owner = :owner AND attempts = :attempt
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id;

-- name: reap_outbox_leases
UPDATE reply_outbox
SET status = CASE WHEN attempts >= :max_attempts THEN 'dead' ELSE 'pending' END,
    error_class = 'lease_expired', next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0), lease_owner = NULL,
    lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (
    SELECT id FROM reply_outbox
    WHERE status = 'sending' AND (lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0) OR lease_expires_at IS NULL)
      AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
    ORDER BY lease_expires_at LIMIT :limit)
RETURNING id;

-- name: get_outbox
SELECT id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at FROM reply_outbox WHERE id = :id AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only);

-- name: list_outbox
SELECT id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at FROM reply_outbox
WHERE (:status IS NULL OR status = :status)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:channel IS NULL OR channel = :channel)
  AND (:after_id IS NULL OR id > :after_id)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
ORDER BY id
LIMIT :limit;

-- name: requeue_outbox
UPDATE reply_outbox
SET status = 'pending', attempts = 0, next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0), lease_owner = NULL,
    lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status = 'dead' AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at;

-- name: outbox_stats
SELECT status, count(*), ((julianday('now') - 2440587.5) * 86400.0) - min(created_at)
FROM reply_outbox
WHERE status IN ('pending', 'sending', 'dead')
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
GROUP BY status;

-- name: full_tenants
SELECT json_extract(l.value, '$[0]') FROM json_each(:limits) AS l
WHERE (SELECT count(*) FROM background_jobs j
       WHERE j.status = 'running' AND j.tenant_id = json_extract(l.value, '$[0]')
         AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only))
      >= json_extract(l.value, '$[1]');

-- name: pick_due_job_ids
-- claim_due_jobs' choice without the claim (tenants already at their cap left out).
WITH RECURSIVE priorities(p) AS (
    SELECT (SELECT min(priority) FROM background_jobs
            WHERE queue = :queue AND status IN ('queued', 'retrying'))
    UNION ALL
    SELECT (SELECT min(b.priority) FROM background_jobs AS b
            WHERE b.queue = :queue AND b.status IN ('queued', 'retrying')
              AND b.priority > priorities.p)
    FROM priorities WHERE priorities.p IS NOT NULL
)
SELECT b.id FROM priorities JOIN background_jobs AS b
  ON b.id IN (SELECT h.id FROM background_jobs AS h
              WHERE h.queue = :queue AND h.status IN ('queued', 'retrying')
                AND h.priority = priorities.p AND h.scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
                AND (:runnable_any OR h.job_type IN (SELECT value FROM json_each(:runnable_types))
                     OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                                WHERE substr(h.job_type, 1, length(tp.value)) = tp.value))
                AND h.tenant_id NOT IN (SELECT value FROM json_each(:skip_tenants))
                AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
              ORDER BY h.scheduled_at, h.id
              LIMIT :limit)
ORDER BY min(b.priority + CAST((((julianday('now') - 2440587.5) * 86400.0) - b.scheduled_at)
                               / :aging_s AS INTEGER), max(b.priority) OVER ()) DESC,
         b.scheduled_at, b.id
LIMIT :limit;

-- name: limited_tenants_of_jobs
SELECT DISTINCT tenant_id FROM background_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
  AND tenant_id IN (SELECT value FROM json_each(:tenants))
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
ORDER BY tenant_id;

-- name: free_queue_slots
-- Each capped queue (worker.queue_limits) and its room: max_running minus its running jobs.
SELECT json_extract(l.value, '$[0]'),
       json_extract(l.value, '$[1]') - (SELECT count(*) FROM background_jobs j
                                        WHERE j.status = 'running'
                                          AND j.queue = json_extract(l.value, '$[0]')
                                          AND ((j.tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only))
FROM json_each(:queue_limits) AS l;

-- name: claim_jobs_limited
-- A candidate must fit both caps: its tenant's (tenants.<id>.max_running) and, among the
-- candidates its tenant allows, its queue's (worker.queue_limits). Either list may be empty.
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = ((julianday('now') - 2440587.5) * 86400.0),
    lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0), change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)
WHERE id IN (
    SELECT q.id FROM (
        SELECT t.id, t.queue, row_number() OVER (
            PARTITION BY t.queue ORDER BY t.level DESC, t.scheduled_at, t.id) AS rn
        FROM (
            SELECT r.id, r.queue, r.level, r.scheduled_at FROM (
                SELECT id, tenant_id, queue, scheduled_at, level, row_number() OVER (
                           PARTITION BY tenant_id ORDER BY level DESC, scheduled_at, id) AS rn
                FROM (  -- the top level: per queue, the highest priority among the candidates
                SELECT id, tenant_id, queue, scheduled_at,
                       min(priority + CAST((((julianday('now') - 2440587.5) * 86400.0) - scheduled_at)
                                    / :aging_s AS INTEGER),
                           max(priority) OVER (PARTITION BY queue)) AS level
                FROM background_jobs
                WHERE id IN (SELECT value FROM json_each(:ids)) AND status IN ('queued', 'retrying')
                  AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
                  AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
                       OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                                  WHERE substr(job_type, 1, length(tp.value)) = tp.value))
                  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
                ) AS c
            ) AS r
            LEFT JOIN (SELECT json_extract(value, '$[0]') AS tenant_id,
                              json_extract(value, '$[1]') AS max_running
                       FROM json_each(:limits)) AS l ON l.tenant_id = r.tenant_id
            WHERE l.max_running IS NULL
               OR r.rn <= l.max_running - (SELECT count(*) FROM background_jobs x
                                           WHERE x.status = 'running' AND x.tenant_id = r.tenant_id)
        ) AS t
    ) AS q
    LEFT JOIN (SELECT json_extract(value, '$[0]') AS queue,
                      json_extract(value, '$[1]') AS max_running
               FROM json_each(:queue_limits)) AS m ON m.queue = q.queue
    WHERE m.max_running IS NULL
       OR q.rn <= m.max_running - (SELECT count(*) FROM background_jobs x
                                   WHERE x.status = 'running' AND x.queue = q.queue
                                     AND ((x.tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)))
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: pick_limited_due_job_ids
-- Postgres' query says why: for each queue, the first :limit due jobs of each priority,
-- then the best of those by level.
WITH RECURSIVE priorities(queue, p) AS (
    SELECT q.value, (SELECT min(b.priority) FROM background_jobs AS b
                     WHERE b.queue = q.value AND b.status IN ('queued', 'retrying'))
    FROM json_each(:queues) AS q
    UNION ALL
    SELECT priorities.queue, (SELECT min(b.priority) FROM background_jobs AS b
                              WHERE b.queue = priorities.queue
                                AND b.status IN ('queued', 'retrying')
                                AND b.priority > priorities.p)
    FROM priorities WHERE priorities.p IS NOT NULL
)
SELECT b.id FROM priorities JOIN background_jobs AS b
  ON b.id IN (SELECT h.id FROM background_jobs AS h
              WHERE h.queue = priorities.queue AND h.status IN ('queued', 'retrying')
                AND h.priority = priorities.p AND h.scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
                AND (:runnable_any OR h.job_type IN (SELECT value FROM json_each(:runnable_types))
                     OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                                WHERE substr(h.job_type, 1, length(tp.value)) = tp.value))
                AND h.tenant_id IN (SELECT value FROM json_each(:open))
                AND ((h.tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
              ORDER BY h.scheduled_at, h.id
              LIMIT :limit)
ORDER BY min(b.priority + CAST((((julianday('now') - 2440587.5) * 86400.0) - b.scheduled_at)
                               / :aging_s AS INTEGER), max(b.priority) OVER (PARTITION BY b.queue)) DESC,
         b.scheduled_at, b.id
LIMIT :limit;

-- name: running_by_tenant
SELECT tenant_id, count(*) FROM background_jobs WHERE status = 'running' AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
GROUP BY tenant_id;

-- ---------------------------------------------------------------------------------------
-- Job controls (store/controls.py; docs/operations.md, "Job controls"): an operator's
-- delete, discard and run now, one job or a bulk batch. Each write is guarded by the
-- statuses its control acts on (model.ACTION_STATUSES): a job that moved on since it was
-- read (claimed, finished, changed by another operator) is left as it is.

-- name: delete_job
-- An operator's delete: any status but running (cancel a running job first). The
-- job's reply_outbox rows stay: replies a completion wrote are messages of their own.
DELETE FROM background_jobs
WHERE id = :id AND status IN ('queued', 'retrying', 'completed', 'dead', 'cancelled')
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: discard_job
-- An operator's discard: a waiting job becomes dead without running.
UPDATE background_jobs
SET status = 'dead', error_class = 'discarded', last_error = 'discarded by operator',
    failed_at = ((julianday('now') - 2440587.5) * 86400.0), dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status IN ('queued', 'retrying')
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: run_job_now
-- An operator's run now: a waiting job not yet due becomes due now (database clock),
-- undispatched, so the scheduler XADDs it or a poller claims it like any due job.
UPDATE background_jobs
SET scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), dispatched_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status IN ('queued', 'retrying') AND scheduled_at > ((julianday('now') - 2440587.5) * 86400.0)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: pick_jobs
-- A bulk control's next batch: ids of jobs in the control's statuses that match the ids
-- and filter given (NULL: any), past the last batch's id (a keyset: no lock is held
-- between batches, and each write below touches at most one batch).
SELECT id FROM background_jobs
WHERE status IN (SELECT value FROM json_each(:statuses))
  AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
  AND (:status IS NULL OR status = :status)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:job_type IS NULL OR job_type = :job_type)
  AND id > :after_id
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
ORDER BY id
LIMIT :limit;

-- name: requeue_jobs
-- Bulk retry: requeue_job for a batch of picked ids.
UPDATE background_jobs
SET status = 'queued', attempts = 0, scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('dead', 'cancelled')
  AND (:status IS NULL OR status = :status)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id;

-- name: cancel_waiting_jobs
-- Bulk cancel, waiting jobs: cancel_waiting_job for a batch.
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND (:status IS NULL OR status = :status)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id;

-- name: request_cancel_running_jobs
-- Bulk cancel, running jobs: request_cancel_running_job for a batch (their workers
-- cancel the handlers at the next heartbeat).
UPDATE background_jobs
SET cancel_requested = 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('running')
  AND NOT cancel_requested
  AND (:status IS NULL OR status = :status)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id;

-- name: delete_jobs
-- Bulk delete: delete_job for a batch.
DELETE FROM background_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying', 'completed', 'dead', 'cancelled')
  AND (:status IS NULL OR status = :status)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id;

-- name: discard_jobs
-- Bulk discard: discard_job for a batch.
UPDATE background_jobs
SET status = 'dead', error_class = 'discarded', last_error = 'discarded by operator',
    failed_at = ((julianday('now') - 2440587.5) * 86400.0), dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND (:status IS NULL OR status = :status)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id;

-- name: run_jobs_now
-- Bulk run now: run_job_now for a batch.
UPDATE background_jobs
SET scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), dispatched_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND scheduled_at > ((julianday('now') - 2440587.5) * 86400.0)
  AND (:status IS NULL OR status = :status)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
RETURNING id;

-- name: waiting_job_types
SELECT job_type, queue, count(*),
       ((julianday('now') - 2440587.5) * 86400.0) - min(scheduled_at)
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
GROUP BY job_type, queue;
