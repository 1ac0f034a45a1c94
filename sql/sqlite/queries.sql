-- Named queries of the SQLite store (daemon/store/). Each block starts with
-- "-- name: <name>" and runs as written with sqlite3's :name parameters. The clock is
-- ((julianday('now') - 2440587.5) * 86400.0): epoch seconds, millisecond precision.
-- Lists arrive as JSON arrays. Queries return the columns JOB_COLUMNS / OUTBOX_COLUMNS
-- (store/queries.py) decode, in that order. The plain set numbers no rows for change tracking:
-- it is off until a move starts (migrations 0007, 0010), and then its triggers number them.
-- A database serving only some tenants (a live move, docs/migrate.md) runs the scoped set:
-- each query that acts across tenants marks the place of the tenant scope with a comment,
-- /* AND scope */, /* AND scope(j) */ (on j.tenant_id) or /* WHERE scope */, alone on its line
-- or inside one. Pasted as is, the marker is a comment and the query is the plain one; the
-- loader (store/queries.py) drops the markers for the plain set and expands them once into
-- the scoped set (docs/schema.md, "The scoped set"), two more parameters and the clause
--   ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)
-- compared as a value, not a bare IN, so that the planner never takes it for an index term.
-- /* next_change */ marks, in a scoped write, where it numbers the row for the move's change
-- tracking itself (", change_seq = <counter + 1>", migration 0007) instead of leaving it to
-- the triggers.

-- name: enqueue_job
-- queue and max_attempts left out (NULL): the values a daemon published for the type, else
-- 'default' and 25.
INSERT INTO background_jobs
    (tenant_id, job_type, queue, payload, priority, max_attempts, scheduled_at,
     idempotency_key, traceparent, dispatched_at)
SELECT :tenant_id, :job_type, COALESCE(:queue, (SELECT t.queue FROM gochatd_job_types AS t WHERE t.job_type = :job_type),
         'default'), :payload, :priority,
       COALESCE(:max_attempts,
                (SELECT t.max_attempts FROM gochatd_job_types AS t WHERE t.job_type = :job_type), 25), due.at, :idempotency_key, :traceparent,
       CASE WHEN :dispatch_now AND due.at <= ((julianday('now') - 2440587.5) * 86400.0) THEN ((julianday('now') - 2440587.5) * 86400.0) END
FROM (SELECT CAST(COALESCE(:scheduled_at, ((julianday('now') - 2440587.5) * 86400.0) + :delay_s) AS REAL) AS at) AS due
WHERE true
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: find_idempotent_job
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested, (job_type = :job_type AND payload = :payload) AS same_job
FROM background_jobs
WHERE tenant_id = :tenant_id AND idempotency_key = :idempotency_key;

-- name: enqueue_unique_job
-- As sql/postgres/queries.sql: enqueue_job for a job with a unique key.
INSERT INTO background_jobs
    (tenant_id, job_type, queue, payload, priority, max_attempts, scheduled_at,
     idempotency_key, traceparent, dispatched_at, unique_key, unique_until)
SELECT :tenant_id, :job_type, COALESCE(:queue, (SELECT t.queue FROM gochatd_job_types AS t WHERE t.job_type = :job_type),
         'default'), :payload, :priority,
       COALESCE(:max_attempts,
                (SELECT t.max_attempts FROM gochatd_job_types AS t WHERE t.job_type = :job_type), 25), due.at, :idempotency_key, :traceparent,
       CASE WHEN :dispatch_now AND due.at <= ((julianday('now') - 2440587.5) * 86400.0) THEN ((julianday('now') - 2440587.5) * 86400.0) END,
       :unique_key, ((julianday('now') - 2440587.5) * 86400.0) + :unique_for_s
FROM (SELECT CAST(COALESCE(:scheduled_at, ((julianday('now') - 2440587.5) * 86400.0) + :delay_s) AS REAL) AS at) AS due
WHERE true
ON CONFLICT DO NOTHING
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: find_unique_job
-- As sql/postgres/queries.sql: the holder of a unique key and whether it still counts.
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested,
       (status IN ('queued', 'retrying', 'running')
        OR (status = 'completed' AND unique_until IS NOT NULL AND unique_until > ((julianday('now') - 2440587.5) * 86400.0)))
       AS live
FROM background_jobs
WHERE tenant_id = :tenant_id AND unique_key = :unique_key;

-- name: release_unique_key
-- As sql/postgres/queries.sql: a holder that no longer counts gives its key up (guarded).
UPDATE background_jobs
SET unique_key = NULL
WHERE id = :id AND unique_key = :unique_key
  AND NOT (status IN ('queued', 'retrying', 'running')
           OR (status = 'completed' AND unique_until IS NOT NULL AND unique_until > ((julianday('now') - 2440587.5) * 86400.0)))
RETURNING id;

-- name: claim_jobs
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = ((julianday('now') - 2440587.5) * 86400.0),
    lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0) /* next_change */
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
  AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
       OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                  WHERE substr(job_type, 1, length(tp.value)) = tp.value))
  /* AND scope */
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
    fence = fence + 1, attempts = attempts + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0) /* next_change */
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
  /* AND scope */
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
    fence = fence + 1, attempts = attempts + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0) /* next_change */
WHERE id IN (SELECT b.id FROM priorities JOIN background_jobs AS b
  ON b.id IN (SELECT h.id FROM background_jobs AS h
              WHERE h.queue = :queue AND h.status IN ('queued', 'retrying')
                AND h.priority = priorities.p AND h.scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
                AND (:runnable_any OR h.job_type IN (SELECT value FROM json_each(:runnable_types))
                     OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                                WHERE substr(h.job_type, 1, length(tp.value)) = tp.value))
                AND (h.dispatched_at IS NOT NULL OR NOT :dispatched_only)
                AND h.tenant_id NOT IN (SELECT value FROM json_each(:skip_tenants))
                /* AND scope */
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
    result = CASE WHEN u.status = 'completed' THEN u.result END,  -- JSON text (docs/results.md)
    lease_expires_at = NULL, dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0) /* next_change */
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS owner,
             json_extract(value, '$[2]') AS fence, json_extract(value, '$[3]') AS status,
             CAST(json_extract(value, '$[4]') AS REAL) AS delay_s,
             json_extract(value, '$[5]') AS refund,
             json_extract(value, '$[6]') AS error_class, json_extract(value, '$[7]') AS last_error,
             json_extract(value, '$[8]') AS result
      FROM json_each(:batch)) AS u
-- "+status": keep the planner off the status index, so it walks the batch and looks each
-- row up by id (via the status index it would scan every running row once per batch item).
WHERE background_jobs.id = u.id AND +background_jobs.status = 'running'
  AND background_jobs.locked_by = u.owner AND background_jobs.fence = u.fence
  /* AND scope */
RETURNING background_jobs.id;

-- name: extend_leases
UPDATE background_jobs
SET lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease_s /* next_change */
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS fence
      FROM json_each(:leases)) AS u
WHERE background_jobs.id = u.id AND background_jobs.fence = u.fence
  AND background_jobs.locked_by = :owner AND +background_jobs.status = 'running'
  /* AND scope */
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
    cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0) /* next_change */
WHERE id IN (SELECT id FROM background_jobs
             WHERE status = 'running'
               AND ((lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0)
                     AND lease_expires_at >= coalesce(((julianday('now') - 2440587.5) * 86400.0) - :expired_within_s, -1e308))
                    OR (id > :created_after_id AND lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0))
                    OR lease_expires_at IS NULL)
               /* AND scope */
             ORDER BY lease_expires_at LIMIT :limit)
RETURNING id, job_type, queue, tenant_id, status, fence;

-- name: dispatch_due_jobs
UPDATE background_jobs SET dispatched_at = ((julianday('now') - 2440587.5) * 86400.0) /* next_change */
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
      AND queue IN (SELECT value FROM json_each(:queues))
      AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
           OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                      WHERE substr(job_type, 1, length(tp.value)) = tp.value))
      /* AND scope */
    ORDER BY scheduled_at, id
    LIMIT :limit)
RETURNING id, job_type, queue, tenant_id;

-- name: redispatch_stale_jobs
-- At most limits[i] of queues[i], every queue in one statement (see PostgreSQL's).
UPDATE background_jobs SET dispatched_at = ((julianday('now') - 2440587.5) * 86400.0) /* next_change */
WHERE id IN (
    SELECT id FROM (
        SELECT b.id AS id, json_extract(:limits, '$[' || q.key || ']') AS room,
               row_number() OVER (PARTITION BY b.queue ORDER BY b.dispatched_at, b.id) AS n
        FROM json_each(:queues) AS q JOIN background_jobs AS b ON b.queue = q.value
        WHERE b.status IN ('queued', 'retrying')
          AND b.scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
          AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
               OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                          WHERE substr(job_type, 1, length(tp.value)) = tp.value))
          AND b.dispatched_at < ((julianday('now') - 2440587.5) * 86400.0) - :older_than_s
          AND b.dispatched_at >= coalesce(((julianday('now') - 2440587.5) * 86400.0)
                                          - :dispatched_within_s, -1e308)
          /* AND scope(b) */)
    WHERE n <= room)
RETURNING id, job_type, queue, tenant_id;

-- name: next_undispatched_in_s
SELECT min(scheduled_at) - ((julianday('now') - 2440587.5) * 86400.0)
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL
  AND queue IN (SELECT value FROM json_each(:queues))
  AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
       OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                  WHERE substr(job_type, 1, length(tp.value)) = tp.value))
  /* AND scope */;

-- name: next_due_in_s
SELECT min(scheduled_at) - ((julianday('now') - 2440587.5) * 86400.0)
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND queue IN (SELECT value FROM json_each(:queues))
  AND (:runnable_any OR job_type IN (SELECT value FROM json_each(:runnable_types))
       OR EXISTS (SELECT 1 FROM json_each(:runnable_prefixes) AS tp
                  WHERE substr(job_type, 1, length(tp.value)) = tp.value))
  /* AND scope */;

-- name: next_lease_expiry_in_s
-- expired_within_s: the reaper's window (see PostgreSQL's); NULL: all of them.
SELECT min(lease_expires_at) - ((julianday('now') - 2440587.5) * 86400.0)
FROM background_jobs
WHERE status = 'running'
  AND lease_expires_at >= coalesce(((julianday('now') - 2440587.5) * 86400.0)
                                   - :expired_within_s, -1e308)
  /* AND scope */;

-- name: newest_job_id
SELECT coalesce(max(id), 0) FROM background_jobs;

-- name: get_job
-- The one read that carries the result, after the job columns (store/rows.py with_result;
-- listings leave it out: Job.result is None there).
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested, result
FROM background_jobs WHERE id = :id /* AND scope */;

-- name: get_job_states
-- The finisher, after a write it retried: each job's fence and status for the ids of one
-- batch (did the first attempt commit?), one query for the batch.
SELECT id, fence, status FROM background_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
  /* AND scope */;

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
  /* AND scope */
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
  /* AND scope */
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
  /* AND scope */
ORDER BY scheduled_at, id
LIMIT :limit;

-- name: count_delayed_jobs
-- Queued jobs not yet due (the part of queued the dashboard shows as Scheduled, as the
-- queues' delayed column does; a retrying job counts under retrying only).
SELECT count(*) FROM background_jobs
WHERE status = 'queued' AND scheduled_at > ((julianday('now') - 2440587.5) * 86400.0)
  /* AND scope */;

-- name: count_scheduled_jobs
-- Waiting jobs not yet due (a subset of queued + retrying: the dashboard shows it apart).
SELECT count(*) FROM background_jobs
WHERE status IN ('queued', 'retrying') AND scheduled_at > ((julianday('now') - 2440587.5) * 86400.0)
  /* AND scope */;

-- name: requeue_job
UPDATE background_jobs
SET status = 'queued', attempts = 0, waits_on = 0, scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status IN ('dead', 'cancelled')
  /* AND scope */
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: cancel_waiting_job
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status IN ('queued', 'retrying')
  /* AND scope */
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: request_cancel_running_job
UPDATE background_jobs SET cancel_requested = 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status = 'running' /* AND scope */
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: count_jobs_by_status
SELECT status, count(*) FROM background_jobs /* WHERE scope */ GROUP BY status;

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
  /* AND scope */
GROUP BY queue;

-- name: requeue_dead_jobs
UPDATE background_jobs
SET status = 'queued', attempts = 0, waits_on = 0, scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE status = 'dead'
      AND (:queue IS NULL OR queue = :queue)
      AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
      AND (:job_type IS NULL OR job_type = :job_type)
      /* AND scope */
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
      /* AND scope */
    ORDER BY updated_at
    LIMIT :limit)
RETURNING id;

-- name: count_prunable_jobs
SELECT count(*) FROM background_jobs
WHERE status IN ('completed', 'dead', 'cancelled')
  AND status = :status
  AND updated_at < ((julianday('now') - 2440587.5) * 86400.0) - :older_than_s
  /* AND scope */;

-- ---------------------------------------------------------------------------------------
-- Reply outbox (daemon/outbox/store.py, daemon/outbox/loop.py).
-- Sender writes are fenced by (lease_owner, attempts).

-- name: insert_replies
-- Run by finish_jobs in the same BEGIN IMMEDIATE transaction, for the completions that
-- applied; the tenant is the job's. Rows are [job_id, channel, recipient, body, dedupe_key].
INSERT INTO reply_outbox (tenant_id, job_id, channel, recipient, body, dedupe_key)
SELECT j.tenant_id, j.id, json_extract(r.value, '$[1]'), json_extract(r.value, '$[2]'),
       json_extract(r.value, '$[3]'), json_extract(r.value, '$[4]')
FROM json_each(:replies) AS r
JOIN background_jobs AS j ON j.id = json_extract(r.value, '$[0]')
WHERE j.status = 'completed'
ORDER BY CAST(r.key AS INTEGER)
ON CONFLICT (tenant_id, dedupe_key) DO NOTHING;

-- name: claim_outbox
UPDATE reply_outbox
SET status = 'sending', lease_owner = :owner, lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease_s,
    attempts = attempts + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (
    SELECT id FROM reply_outbox
    WHERE status = 'pending' AND next_attempt_at <= ((julianday('now') - 2440587.5) * 86400.0)
      AND channel IN (SELECT value FROM json_each(:channels))
      /* AND scope */
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
  /* AND scope */
RETURNING ((julianday('now') - 2440587.5) * 86400.0) - created_at;

-- name: retry_outbox
UPDATE reply_outbox
SET status = 'pending', next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0) + :delay_s, error_class = :error_class,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status = 'sending' AND lease_owner = :owner AND attempts = :attempt
  /* AND scope */
RETURNING id;

-- name: fail_outbox
UPDATE reply_outbox
SET status = 'dead', error_class = :error_class, lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status = 'sending' AND lease_owner = :owner AND attempts = :attempt
  /* AND scope */
RETURNING id;

-- name: reap_outbox_leases
UPDATE reply_outbox
SET status = CASE WHEN attempts >= :max_attempts THEN 'dead' ELSE 'pending' END,
    error_class = 'lease_expired', next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0), lease_owner = NULL,
    lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (
    SELECT id FROM reply_outbox
    WHERE status = 'sending' AND (lease_expires_at < ((julianday('now') - 2440587.5) * 86400.0) OR lease_expires_at IS NULL)
      /* AND scope */
    ORDER BY lease_expires_at LIMIT :limit)
RETURNING id;

-- name: get_outbox
SELECT id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at FROM reply_outbox WHERE id = :id /* AND scope */;

-- name: list_outbox
SELECT id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at FROM reply_outbox
WHERE (:status IS NULL OR status = :status)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:channel IS NULL OR channel = :channel)
  AND (:after_id IS NULL OR id > :after_id)
  /* AND scope */
ORDER BY id
LIMIT :limit;

-- name: requeue_outbox
UPDATE reply_outbox
SET status = 'pending', attempts = 0, next_attempt_at = ((julianday('now') - 2440587.5) * 86400.0), lease_owner = NULL,
    lease_expires_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status = 'dead' /* AND scope */
RETURNING id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at;

-- name: outbox_stats
SELECT status, count(*), ((julianday('now') - 2440587.5) * 86400.0) - min(created_at)
FROM reply_outbox
WHERE status IN ('pending', 'sending', 'dead')
  /* AND scope */
GROUP BY status;

-- name: full_tenants
SELECT json_extract(l.value, '$[0]') FROM json_each(:limits) AS l
WHERE (SELECT count(*) FROM background_jobs j
       WHERE j.status = 'running' AND j.tenant_id = json_extract(l.value, '$[0]') /* AND scope */)
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
                /* AND scope */
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
  /* AND scope */
ORDER BY tenant_id;

-- name: free_queue_slots
-- Each capped queue (worker.queue_limits) and its room: max_running minus its running jobs.
SELECT json_extract(l.value, '$[0]'),
       json_extract(l.value, '$[1]') - (SELECT count(*) FROM background_jobs j
                                        WHERE j.status = 'running'
                                          AND j.queue = json_extract(l.value, '$[0]') /* AND scope(j) */)
FROM json_each(:queue_limits) AS l;

-- name: claim_jobs_limited
-- A candidate must fit both caps: its tenant's (tenants.<id>.max_running) and, among the
-- candidates its tenant allows, its queue's (worker.queue_limits). Either list may be empty.
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = ((julianday('now') - 2440587.5) * 86400.0),
    lease_expires_at = ((julianday('now') - 2440587.5) * 86400.0) + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = ((julianday('now') - 2440587.5) * 86400.0) /* next_change */
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
                  /* AND scope */
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
                                   WHERE x.status = 'running' AND x.queue = q.queue /* AND scope(x) */))
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
                /* AND scope(h) */
              ORDER BY h.scheduled_at, h.id
              LIMIT :limit)
ORDER BY min(b.priority + CAST((((julianday('now') - 2440587.5) * 86400.0) - b.scheduled_at)
                               / :aging_s AS INTEGER), max(b.priority) OVER (PARTITION BY b.queue)) DESC,
         b.scheduled_at, b.id
LIMIT :limit;

-- name: running_by_tenant
SELECT tenant_id, count(*) FROM background_jobs WHERE status = 'running' /* AND scope */
GROUP BY tenant_id;

-- name: database_now
SELECT ((julianday('now') - 2440587.5) * 86400.0);

-- name: list_periodic_slots
SELECT name, last_slot FROM gochatd_periodic_slots ORDER BY name;

-- name: claim_periodic_slot
-- Moves the slot record forward; returns a row only for the one caller that moved it.
INSERT INTO gochatd_periodic_slots AS s (name, last_slot) VALUES (:name, :slot)
ON CONFLICT (name) DO UPDATE SET last_slot = excluded.last_slot, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE s.last_slot < excluded.last_slot
RETURNING name;

-- name: enqueue_jobs
-- enqueue_many, once per item inside one transaction: enqueue_job returning only what the
-- database decided (the rest of a new row is the item itself).
INSERT INTO background_jobs
    (tenant_id, job_type, queue, payload, priority, max_attempts, scheduled_at,
     idempotency_key, traceparent, dispatched_at)
SELECT :tenant_id, :job_type, COALESCE(:queue, (SELECT t.queue FROM gochatd_job_types AS t WHERE t.job_type = :job_type),
         'default'), :payload, :priority,
       COALESCE(:max_attempts,
                (SELECT t.max_attempts FROM gochatd_job_types AS t WHERE t.job_type = :job_type), 25), due.at, :idempotency_key, :traceparent,
       CASE WHEN :dispatch_now AND due.at <= ((julianday('now') - 2440587.5) * 86400.0) THEN ((julianday('now') - 2440587.5) * 86400.0) END
FROM (SELECT CAST(COALESCE(:scheduled_at, ((julianday('now') - 2440587.5) * 86400.0) + :delay_s) AS REAL) AS at) AS due
WHERE true
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING id, payload, scheduled_at, created_at, updated_at, dispatched_at, queue,
          max_attempts;

-- name: route_version
-- Tenant routes (gochatd migrate; store/router.py): polled by every daemon.
SELECT coalesce(max(version), 0) FROM gochatd_routes;

-- name: list_routes
SELECT tenant_id, state, destination, version FROM gochatd_routes ORDER BY tenant_id;

-- name: ack_routes
-- The migrator's barrier waits until every live daemon has seen its route change.
INSERT INTO gochatd_route_acks (worker_id, version) VALUES (:worker_id, :version)
ON CONFLICT (worker_id) DO UPDATE SET version = excluded.version, acked_at = ((julianday('now') - 2440587.5) * 86400.0);

-- name: forget_route_ack
DELETE FROM gochatd_route_acks WHERE worker_id = :worker_id;

-- name: prune_change_tombstones
-- As sql/postgres/queries.sql.
DELETE FROM gochatd_change_tombstones
WHERE change_seq IN (
    SELECT change_seq FROM gochatd_change_tombstones
    WHERE deleted_at < ((julianday('now') - 2440587.5) * 86400.0) - :older_than_s
      AND NOT EXISTS (SELECT 1 FROM gochatd_routes WHERE state IN ('tracking', 'frozen'))
    ORDER BY change_seq
    LIMIT :limit)
RETURNING change_seq;

-- name: publish_job_types
-- As sql/postgres/queries.sql: items arrive as one JSON array of
-- {job_type, queue, max_attempts, timeout_s}; the last writer wins.
INSERT INTO gochatd_job_types (job_type, queue, max_attempts, timeout_s, published_by, updated_at)
SELECT json_extract(value, '$.job_type'), json_extract(value, '$.queue'),
       json_extract(value, '$.max_attempts'), json_extract(value, '$.timeout_s'), :by, ((julianday('now') - 2440587.5) * 86400.0)
FROM json_each(:types)
WHERE true
ON CONFLICT (job_type) DO UPDATE
SET queue = excluded.queue, max_attempts = excluded.max_attempts,
    timeout_s = excluded.timeout_s, published_by = excluded.published_by,
    updated_at = excluded.updated_at
RETURNING job_type;

-- name: list_job_types
SELECT job_type, queue, max_attempts, timeout_s, updated_at, published_by
FROM gochatd_job_types
ORDER BY job_type;

-- The fleet dashboard (migration 0012), as sql/postgres/queries.sql. Not tenant data: the
-- routed store runs these on the home database only.

-- name: waiting_job_types
-- Due waiting jobs per (job type, queue), with the oldest one's age: compared with the live
-- daemons' handler sets (fleet rows) for GET /v1/job-types and gochatd_jobs_without_handler.
SELECT job_type, queue, count(*),
       ((julianday('now') - 2440587.5) * 86400.0) - min(scheduled_at)
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND scheduled_at <= ((julianday('now') - 2440587.5) * 86400.0)
  /* AND scope */
GROUP BY job_type, queue;

-- name: add_job_counts
-- Items arrive as one JSON array of {queue, job_type, completed, failed, retried}; the
-- current minute (database clock) is a whole multiple of 60 epoch seconds.
INSERT INTO gochatd_job_counts (minute, queue, job_type, completed, failed, retried)
SELECT CAST(((julianday('now') - 2440587.5) * 86400.0) / 60 AS INTEGER) * 60.0,
       json_extract(value, '$.queue'), json_extract(value, '$.job_type'),
       json_extract(value, '$.completed'), json_extract(value, '$.failed'),
       json_extract(value, '$.retried')
FROM json_each(:counts)
WHERE true
ON CONFLICT (minute, queue, job_type) DO UPDATE
SET completed = completed + excluded.completed, failed = failed + excluded.failed,
    retried = retried + excluded.retried;

-- name: job_counts
SELECT minute,
       CASE :by WHEN 'queue' THEN queue WHEN 'job_type' THEN job_type ELSE 'all' END AS key,
       sum(completed), sum(failed), sum(retried)
FROM gochatd_job_counts
WHERE minute > CAST(((julianday('now') - 2440587.5) * 86400.0) / 60 AS INTEGER) * 60.0
               - :minutes * 60.0
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: prune_job_counts
DELETE FROM gochatd_job_counts
WHERE (minute, queue, job_type) IN (
    SELECT minute, queue, job_type FROM gochatd_job_counts
    WHERE minute < ((julianday('now') - 2440587.5) * 86400.0) - :older_than_s
    LIMIT :limit)
RETURNING minute;

-- name: upsert_daemon
INSERT INTO gochatd_daemons (id, host, pid, mode, version, concurrency, in_flight, paused,
                             draining, job_types)
VALUES (:id, :host, :pid, :mode, :version, :concurrency, :in_flight, :paused, :draining,
        :handlers)
ON CONFLICT (id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, mode = excluded.mode,
    version = excluded.version, concurrency = excluded.concurrency,
    in_flight = excluded.in_flight, paused = excluded.paused, draining = excluded.draining,
    job_types = excluded.job_types,
    started_at = CASE WHEN gochatd_daemons.pid = excluded.pid
                           AND gochatd_daemons.host = excluded.host
                      THEN gochatd_daemons.started_at
                      ELSE ((julianday('now') - 2440587.5) * 86400.0) END,
    last_heartbeat = ((julianday('now') - 2440587.5) * 86400.0)
RETURNING requested, requested_seq;

-- name: list_daemons
SELECT id, host, pid, mode, version, concurrency, in_flight, paused, draining, started_at,
       last_heartbeat, requested,
       ((julianday('now') - 2440587.5) * 86400.0) - last_heartbeat, job_types
FROM gochatd_daemons
ORDER BY id;

-- name: request_daemon
UPDATE gochatd_daemons SET requested = :action, requested_seq = requested_seq + 1
WHERE id = :id
RETURNING id;

-- name: clear_daemon_request
UPDATE gochatd_daemons SET requested = NULL
WHERE id = :id AND requested_seq = :seq AND requested IS NOT NULL
RETURNING id;

-- name: remove_daemon
DELETE FROM gochatd_daemons WHERE id = :id RETURNING id;

-- name: prune_daemons
DELETE FROM gochatd_daemons
WHERE last_heartbeat < ((julianday('now') - 2440587.5) * 86400.0) - :older_than_s
RETURNING id;

-- ---------------------------------------------------------------------------------------
-- Per-attempt history (daemon/store/attempts.py; docs/operations.md).

-- name: record_job_attempts
-- Run by finish_jobs and reap_expired_leases in their BEGIN IMMEDIATE, right after the
-- fenced UPDATE, for the rows it applied: :attempts is [[job_id, outcome, fence], ...] (a
-- batch may also name an older fence of the same job: that finish did not apply). Each row
-- still holds the run's fence (the attempt), claim time, owner and the error just written,
-- and updated_at is the finish's own database time.
INSERT INTO job_attempts
    (job_id, attempt, started_at, finished_at, worker, outcome, error_class, error)
SELECT j.id, j.fence, j.locked_at, j.updated_at, j.locked_by,
       json_extract(a.value, '$[1]'), j.error_class, j.last_error
FROM json_each(:attempts) AS a
JOIN background_jobs AS j
  ON j.id = json_extract(a.value, '$[0]') AND j.fence = json_extract(a.value, '$[2]')
WHERE NOT EXISTS (SELECT 1 FROM job_attempts AS o  -- only a foreign reset of the fence
                  WHERE o.job_id = j.id AND o.attempt = j.fence);

-- name: trim_job_attempts
-- The same jobs keep their newest :attempts_kept attempts (by the job's fence).
DELETE FROM job_attempts
WHERE job_id IN (SELECT json_extract(value, '$[0]') FROM json_each(:attempts))
  AND attempt <= (SELECT j.fence FROM background_jobs AS j
                  WHERE j.id = job_attempts.job_id) - :attempts_kept;

-- name: list_job_attempts
-- A completed run has no job_attempts row; it is the job's own row (see PostgreSQL's).
SELECT attempt, started_at, finished_at, worker, outcome, error_class, error FROM (
    SELECT attempt, started_at, finished_at, worker, outcome, error_class, error
    FROM job_attempts WHERE job_id = :id
    UNION ALL
    SELECT j.fence, j.locked_at, j.completed_at, j.locked_by, 'completed', NULL, NULL
    FROM background_jobs AS j
    WHERE j.id = :id AND j.status = 'completed'
      AND NOT EXISTS (SELECT 1 FROM job_attempts AS o  -- a row written before this change
                      WHERE o.job_id = j.id AND o.attempt = j.fence)
)
ORDER BY attempt DESC LIMIT :limit;

-- Job controls (store/controls.py; docs/operations.md, "Job controls"): an operator's
-- delete, discard and run now, one job or a bulk batch. Each write is guarded by the
-- statuses its control acts on (model.ACTION_STATUSES): a job that moved on since it was
-- read (claimed, finished, changed by another operator) is left as it is.

-- name: delete_job
-- An operator's delete: any status but running (cancel a running job first). The
-- job's reply_outbox rows stay: replies a completion wrote are messages of their own.
DELETE FROM background_jobs
WHERE id = :id AND status IN ('queued', 'retrying', 'completed', 'dead', 'cancelled')
  /* AND scope */
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
  /* AND scope */
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: run_job_now
-- An operator's run now: a waiting job not yet due becomes due now (database clock), not a
-- job held on its dependencies (waits_on > 0, docs/workflows.md);
-- undispatched, so the scheduler XADDs it or a poller claims it like any due job.
UPDATE background_jobs
SET scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), dispatched_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id AND status IN ('queued', 'retrying') AND waits_on = 0 AND scheduled_at > ((julianday('now') - 2440587.5) * 86400.0)
  /* AND scope */
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
  /* AND scope */
ORDER BY id
LIMIT :limit;

-- name: requeue_jobs
-- Bulk retry: requeue_job for a batch of picked ids.
UPDATE background_jobs
SET status = 'queued', attempts = 0, waits_on = 0, scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('dead', 'cancelled')
  AND (:status IS NULL OR status = :status)
  /* AND scope */
RETURNING id;

-- name: cancel_waiting_jobs
-- Bulk cancel, waiting jobs: cancel_waiting_job for a batch.
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND (:status IS NULL OR status = :status)
  /* AND scope */
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
  /* AND scope */
RETURNING id;

-- name: delete_jobs
-- Bulk delete: delete_job for a batch.
DELETE FROM background_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying', 'completed', 'dead', 'cancelled')
  AND (:status IS NULL OR status = :status)
  /* AND scope */
RETURNING id;

-- name: discard_jobs
-- Bulk discard: discard_job for a batch.
UPDATE background_jobs
SET status = 'dead', error_class = 'discarded', last_error = 'discarded by operator',
    failed_at = ((julianday('now') - 2440587.5) * 86400.0), dispatched_at = NULL, cancel_requested = 0, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND (:status IS NULL OR status = :status)
  /* AND scope */
RETURNING id;

-- name: run_jobs_now
-- Bulk run now: run_job_now for a batch.
UPDATE background_jobs
SET scheduled_at = ((julianday('now') - 2440587.5) * 86400.0), dispatched_at = NULL, updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND waits_on = 0 AND scheduled_at > ((julianday('now') - 2440587.5) * 86400.0)
  AND (:status IS NULL OR status = :status)
  /* AND scope */
RETURNING id;

-- name: lock_queue_rate_window
-- A rate-limited claim's first statement (worker.queue_rates, docs/rate-limits.md), inside
-- BEGIN IMMEDIATE (which serialises claimers): the queue's window row (created on first
-- use), how many jobs already started in the current window of the database clock, and how
-- many seconds the window has left. A row of another period (a reload changed the rate)
-- starts a fresh window.
INSERT INTO queue_rate_windows (queue, period_s, window_start, used)
VALUES (:queue, :period_s, 0, 0)
ON CONFLICT (queue) DO UPDATE SET used = queue_rate_windows.used
RETURNING
    CASE WHEN period_s <> :period_s THEN 0
         WHEN window_start = CAST(((julianday('now') - 2440587.5) * 86400.0) / :period_s AS INTEGER) * :period_s
         THEN used
         WHEN window_start > ((julianday('now') - 2440587.5) * 86400.0) THEN :count
         ELSE 0 END AS used,
    (CAST(((julianday('now') - 2440587.5) * 86400.0) / :period_s AS INTEGER) + 1) * :period_s
    - ((julianday('now') - 2440587.5) * 86400.0) AS window_left_s;

-- name: charge_queue_rate_window
-- A rate-limited claim's last statement: add the jobs it claimed to the window of their
-- locked_at (a new window starts from them).
UPDATE queue_rate_windows
SET used = CASE WHEN period_s = :period_s AND window_start = :window_start
                THEN used + :n ELSE :n END,
    period_s = :period_s, window_start = :window_start
WHERE queue = :queue;

-- Dependent jobs and batches (docs/workflows.md, migration 0019) ---------------------------

-- name: lock_dependencies
-- enqueue_workflow: the jobs a new job will depend on (BEGIN IMMEDIATE holds the lock).
SELECT id, tenant_id, status FROM background_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
ORDER BY id;

-- name: insert_dependencies
INSERT OR IGNORE INTO gochatd_job_dependencies
    (tenant_id, job_id, depends_on_id, run_if_failed, resolved_status)
SELECT :tenant_id, :job_id, json_extract(d.value, '$[0]'), :run_if_failed, json_extract(d.value, '$[1]')
FROM json_each(:edges) AS d;

-- name: hold_job
UPDATE background_jobs
SET waits_on = :waits_on, batch_id = :batch_id,
    status = CASE WHEN :failed IS NULL THEN status ELSE 'cancelled' END,
    error_class = CASE WHEN :failed IS NULL THEN error_class ELSE 'dependency_failed' END,
    last_error = CASE WHEN :failed IS NULL THEN last_error ELSE :failed END,
    updated_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id = :id
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: mark_has_dependents
UPDATE background_jobs SET has_dependents = 1
WHERE id IN (SELECT value FROM json_each(:ids)) AND NOT has_dependents;

-- name: insert_batch
INSERT INTO gochatd_batches (tenant_id, size) VALUES (:tenant_id, :size)
RETURNING id;

-- name: set_batch_callbacks
UPDATE gochatd_batches SET on_success_id = :on_success_id, on_complete_id = :on_complete_id
WHERE id = :id;

-- name: get_job_links
SELECT j.waits_on, j.batch_id,
       (SELECT min(b.id) FROM gochatd_batches AS b
        WHERE b.on_success_id = j.id OR b.on_complete_id = j.id)
FROM background_jobs AS j WHERE j.id = :id;

-- name: list_dependencies
SELECT d.depends_on_id, coalesce(j.status, d.resolved_status, 'cancelled'), d.run_if_failed,
       d.resolved_status, CASE WHEN :with_results THEN j.result END
FROM gochatd_job_dependencies AS d
LEFT JOIN background_jobs AS j ON j.id = d.depends_on_id
WHERE d.job_id = :id
ORDER BY d.depends_on_id;

-- name: get_batch
SELECT id, tenant_id, size, on_success_id, on_complete_id, created_at
FROM gochatd_batches WHERE id = :id;

-- name: count_batch_members
SELECT status, count(*) FROM background_jobs WHERE batch_id = :id GROUP BY status;
