-- The tenant-scoped twins of queries.sql (same names, same parameters, plus two): the
-- set a PostgreSQL store runs while it serves only some tenants, during a live move
-- (SqlJobStore.tenant_scope, store/scope.py; docs/migrate.md). Each adds the clause
--   (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
--         ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
-- one CASE, so that it stays a plain filter: the indexes a query uses without it are
-- the ones it uses with it. Queries that take no scope are not repeated here.

-- name: claim_jobs
-- Stream-delivered ids: one conditional UPDATE; rows already claimed, finished or not yet
-- due are simply not returned. Joined to the ids as a set, so each is one primary-key
-- lookup: with "id = ANY(...) AND status IN (...)" the planner may pick an index on status
-- instead, which walks every dead entry while a transaction held open elsewhere keeps them.
UPDATE background_jobs AS j
SET status = 'running', locked_by = %(owner)s, locked_at = now(),
    lease_expires_at = now() + make_interval(secs => %(lease_s)s),
    fence = j.fence + 1, attempts = j.attempts + 1, updated_at = now()
FROM unnest(%(ids)s::bigint[]) AS claimed(id)
WHERE j.id = claimed.id
  AND j.status IN ('queued', 'retrying')
  AND j.scheduled_at <= now()
  AND (%(runnable_any)s::bool OR j.job_type = ANY(%(runnable_types)s::text[])
       OR j.job_type ^@ ANY(%(runnable_prefixes)s::text[]))
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING j.id, j.tenant_id, j.job_type, j.queue, j.payload, j.status, j.priority, j.attempts,
       j.max_attempts, j.scheduled_at, j.created_at, j.updated_at, j.fence,
       j.idempotency_key, j.locked_by, j.locked_at, j.lease_expires_at, j.last_error,
       j.error_class, j.failed_at, j.completed_at, j.dispatched_at, j.traceparent,
       j.cancel_requested;

-- name: claim_delivered_jobs
-- Streams mode: the ids a batch of stream entries named, by primary key like claim_jobs, in
-- the queues whose waiting jobs all have priority 0: there the stream's order is the rule's
-- order (docs/priority.md). In a queue holding other priorities nothing is claimed here and
-- the caller takes as many of the queue's first jobs with claim_due_jobs. Each probe is one
-- descent into an empty range of background_jobs_claimable_idx in the common case.
WITH mixed AS MATERIALIZED (
    SELECT q.queue FROM unnest(%(queues)s::text[]) AS q(queue)
    WHERE EXISTS (SELECT 1 FROM background_jobs AS b
                  WHERE b.queue = q.queue AND b.status IN ('queued', 'retrying')
                    AND b.priority > 0)
       OR EXISTS (SELECT 1 FROM background_jobs AS b
                  WHERE b.queue = q.queue AND b.status IN ('queued', 'retrying')
                    AND b.priority < 0)
)
UPDATE background_jobs AS j
SET status = 'running', locked_by = %(owner)s, locked_at = now(),
    lease_expires_at = now() + make_interval(secs => %(lease_s)s),
    fence = j.fence + 1, attempts = j.attempts + 1, updated_at = now()
FROM unnest(%(ids)s::bigint[]) AS claimed(id)
WHERE j.id = claimed.id
  AND j.status IN ('queued', 'retrying')
  AND j.scheduled_at <= now()
  AND (%(runnable_any)s::bool OR j.job_type = ANY(%(runnable_types)s::text[])
       OR j.job_type ^@ ANY(%(runnable_prefixes)s::text[]))
  AND j.queue <> ALL (ARRAY(SELECT queue FROM mixed))
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING j.id, j.tenant_id, j.job_type, j.queue, j.payload, j.status, j.priority, j.attempts,
       j.max_attempts, j.scheduled_at, j.created_at, j.updated_at, j.fence,
       j.idempotency_key, j.locked_by, j.locked_at, j.lease_expires_at, j.last_error,
       j.error_class, j.failed_at, j.completed_at, j.dispatched_at, j.traceparent,
       j.cancel_requested;

-- name: claim_due_jobs
-- The polling claim, in the rule's order: the first %(limit)s due jobs of each priority
-- (index order within a priority is due order), locked, then the best %(limit)s of those by
-- level: the priority plus one step per aging_s seconds waited, at most the top level (the
-- highest priority among them), then by due time and id (docs/priority.md). One priority
-- (the common case) costs what ORDER BY ... LIMIT did.
WITH RECURSIVE priorities(p) AS (
    (SELECT priority FROM background_jobs
     WHERE queue = %(queue)s AND status IN ('queued', 'retrying')
     ORDER BY priority LIMIT 1)
    UNION ALL
    SELECT (SELECT b.priority FROM background_jobs AS b
            WHERE b.queue = %(queue)s AND b.status IN ('queued', 'retrying')
              AND b.priority > priorities.p
            ORDER BY b.priority LIMIT 1)
    FROM priorities WHERE priorities.p IS NOT NULL
), heads AS MATERIALIZED (
    SELECT h.id, h.priority, h.aged, h.scheduled_at
    FROM priorities CROSS JOIN LATERAL (
        SELECT b.id, b.priority, b.scheduled_at,
               b.priority + floor(extract(epoch FROM now() - b.scheduled_at)::float8
                                  / %(aging_s)s::float8) AS aged
        FROM background_jobs AS b
        WHERE b.queue = %(queue)s AND b.status IN ('queued', 'retrying')
          AND b.priority = priorities.p AND b.scheduled_at <= now()
          AND (%(runnable_any)s::bool OR b.job_type = ANY(%(runnable_types)s::text[])
               OR b.job_type ^@ ANY(%(runnable_prefixes)s::text[]))
          AND (b.dispatched_at IS NOT NULL OR NOT %(dispatched_only)s::bool)
          AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
                ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
        ORDER BY b.scheduled_at, b.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED) AS h
    WHERE priorities.p IS NOT NULL  -- the recursion's last row: no priority, no descent
), picked AS (
    SELECT id FROM heads
    ORDER BY least(aged, max(priority) OVER ()) DESC, scheduled_at, id LIMIT %(limit)s
)
UPDATE background_jobs AS j
SET status = 'running', locked_by = %(owner)s, locked_at = now(),
    lease_expires_at = now() + make_interval(secs => %(lease_s)s),
    fence = j.fence + 1, attempts = j.attempts + 1, updated_at = now()
FROM picked
WHERE j.id = picked.id
RETURNING j.id, j.tenant_id, j.job_type, j.queue, j.payload, j.status, j.priority, j.attempts,
       j.max_attempts, j.scheduled_at, j.created_at, j.updated_at, j.fence,
       j.idempotency_key, j.locked_by, j.locked_at, j.lease_expires_at, j.last_error,
       j.error_class, j.failed_at, j.completed_at, j.dispatched_at, j.traceparent,
       j.cancel_requested;

-- name: finish_jobs
-- Compare-and-set on (id, owner, fence, status = running), row by row; returns the ids
-- that were applied. A stale owner or fence matches no row and writes nothing, and records
-- no attempt: the applied rows (the UPDATE's RETURNING) feed the job_attempts INSERT, and
-- a job past %(attempts_kept)s runs loses its oldest one (docs/operations.md).
WITH done AS (
    UPDATE background_jobs AS j
    SET status = u.status,
        attempts = CASE WHEN u.refund THEN greatest(j.attempts - 1, 0) ELSE j.attempts END,
        scheduled_at = CASE WHEN u.status = 'retrying'
                            THEN now() + make_interval(secs => u.delay_s) ELSE j.scheduled_at END,
        completed_at = CASE WHEN u.status = 'completed' THEN now() ELSE j.completed_at END,
        failed_at = CASE WHEN u.status = 'dead' THEN now() ELSE j.failed_at END,
        error_class = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                           THEN u.error_class END,  -- a completion clears the error
        last_error = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                          THEN u.last_error END,
        lease_expires_at = NULL, dispatched_at = NULL, cancel_requested = false, updated_at = now()
    FROM unnest(%(ids)s::bigint[], %(owners)s::text[], %(fences)s::bigint[], %(statuses)s::text[],
                %(delays)s::float8[], %(refunds)s::bool[], %(classes)s::text[], %(errors)s::text[])
         AS u(id, owner, fence, status, delay_s, refund, error_class, last_error)
    WHERE j.id = u.id AND j.status = 'running' AND j.locked_by = u.owner AND j.fence = u.fence
      AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
            ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
    RETURNING j.id, j.fence, j.locked_at, j.locked_by, j.error_class, j.last_error,
              CASE WHEN u.refund THEN 'interrupted' ELSE u.status END AS outcome
), recorded AS (
    INSERT INTO job_attempts
        (job_id, attempt, started_at, finished_at, worker, outcome, error_class, error)
    SELECT id, fence, locked_at, now(), locked_by, outcome, error_class, last_error FROM done
    WHERE NOT EXISTS (SELECT 1 FROM job_attempts AS o  -- only a foreign reset of the fence
                      WHERE o.job_id = done.id AND o.attempt = done.fence)
), trimmed AS (
    DELETE FROM job_attempts AS a USING done
    WHERE done.fence > %(attempts_kept)s AND a.job_id = done.id
      AND a.attempt <= done.fence - %(attempts_kept)s
)
SELECT id FROM done;

-- name: extend_leases
UPDATE background_jobs AS j
SET lease_expires_at = now() + make_interval(secs => %(lease_s)s)
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS u(id, fence)
WHERE j.id = u.id AND j.fence = u.fence AND j.locked_by = %(owner)s AND j.status = 'running'
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING j.id, j.cancel_requested;

-- name: reap_expired_leases
-- expired_within_s: only leases that expired that recently (the reaper's window since its
-- last complete pass, loops/reap.py), plus any expired lease of a row newer than
-- created_after_id (a row written with an old lease, by foreign SQL); NULL: all of them.
-- Each reaped run is recorded as a lease_expired attempt, as finish_jobs records its own.
WITH expired AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE status = 'running'
      AND ((lease_expires_at < now()
            AND lease_expires_at >= coalesce(now() - make_interval(secs => %(expired_within_s)s),
                                             '-infinity'))
           OR (id > %(created_after_id)s AND lease_expires_at < now())
           OR lease_expires_at IS NULL)
      AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
            ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
    ORDER BY lease_expires_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED
), reaped AS (
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
    RETURNING background_jobs.id, job_type, queue, tenant_id, status, fence, locked_at,
              locked_by, error_class, last_error
), recorded AS (
    INSERT INTO job_attempts
        (job_id, attempt, started_at, finished_at, worker, outcome, error_class, error)
    SELECT id, fence, locked_at, now(), locked_by, 'lease_expired', error_class, last_error
    FROM reaped
    WHERE NOT EXISTS (SELECT 1 FROM job_attempts AS o
                      WHERE o.job_id = reaped.id AND o.attempt = reaped.fence)
), trimmed AS (
    DELETE FROM job_attempts AS a USING reaped
    WHERE reaped.fence > %(attempts_kept)s AND a.job_id = reaped.id
      AND a.attempt <= reaped.fence - %(attempts_kept)s
)
SELECT id, job_type, queue, tenant_id, status FROM reaped;

-- name: dispatch_due_jobs
-- Jobs that became due without a stream entry (delayed, retried, foreign INSERTs).
WITH due AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL AND scheduled_at <= now()
      AND queue = ANY(%(queues)s::text[])
      AND (%(runnable_any)s::bool OR job_type = ANY(%(runnable_types)s::text[])
           OR job_type ^@ ANY(%(runnable_prefixes)s::text[]))
      AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
            ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
    ORDER BY scheduled_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs AS j SET dispatched_at = now()
FROM due WHERE j.id = due.id
RETURNING j.id, j.job_type, j.queue, j.tenant_id;

-- name: redispatch_stale_jobs
-- The sweep: due jobs whose last dispatch is older than the sweep interval (lost XADDs).
-- dispatched_within_s: only jobs last dispatched that recently (the sweep's window since its
-- last complete pass, loops/schedule.py); NULL: all of them.
WITH stale AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE queue = %(queue)s AND status IN ('queued', 'retrying') AND scheduled_at <= now()
      AND (%(runnable_any)s::bool OR job_type = ANY(%(runnable_types)s::text[])
           OR job_type ^@ ANY(%(runnable_prefixes)s::text[]))
      AND dispatched_at < now() - make_interval(secs => %(older_than_s)s)
      AND dispatched_at >= coalesce(now() - make_interval(secs => %(dispatched_within_s)s),
                                    '-infinity')
      AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
            ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
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
  AND queue = ANY(%(queues)s::text[])
  AND (%(runnable_any)s::bool OR job_type = ANY(%(runnable_types)s::text[])
       OR job_type ^@ ANY(%(runnable_prefixes)s::text[]))
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END);

-- name: next_due_in_s
SELECT (EXTRACT(EPOCH FROM min(scheduled_at)) - EXTRACT(EPOCH FROM now()))::float8
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND queue = ANY(%(queues)s::text[])
  AND (%(runnable_any)s::bool OR job_type = ANY(%(runnable_types)s::text[])
       OR job_type ^@ ANY(%(runnable_prefixes)s::text[]))
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END);

-- name: get_job
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested FROM background_jobs WHERE id = %(id)s AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
      ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END);

-- name: get_job_states
-- The finisher, after a write it retried: each job's fence and status for the ids of one
-- batch (did the first attempt commit?), one query for the batch.
SELECT id, fence, status FROM background_jobs WHERE id = ANY(%(ids)s::bigint[])
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
      ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END);

-- name: list_jobs
-- Oldest first (the CLI's default), after the cursor id. :pattern is the search text
-- (docs/operations.md, "Listing jobs") escaped and wrapped as a LIKE pattern (store/sql_store.py
-- search_params); :search_id the same text as an id when it is one; :search_after_id bounds
-- a search to the newest jobs (an id range the primary key serves).
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested FROM background_jobs
WHERE (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
  AND (%(pattern)s::text IS NULL OR id = %(search_id)s::bigint
       OR job_type ILIKE %(pattern)s ESCAPE '\' OR tenant_id ILIKE %(pattern)s ESCAPE '\'
       OR payload::text ILIKE %(pattern)s ESCAPE '\')
  AND id > coalesce(%(search_after_id)s::bigint, 0)
  AND id > coalesce(%(after_id)s::bigint, 0)
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
ORDER BY id
LIMIT %(limit)s;

-- name: list_jobs_newest
-- Newest first (the admin API's default): the primary key read backwards, or
-- background_jobs_status_idx with a status.
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested FROM background_jobs
WHERE (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
  AND (%(pattern)s::text IS NULL OR id = %(search_id)s::bigint
       OR job_type ILIKE %(pattern)s ESCAPE '\' OR tenant_id ILIKE %(pattern)s ESCAPE '\'
       OR payload::text ILIKE %(pattern)s ESCAPE '\')
  AND id > coalesce(%(search_after_id)s::bigint, 0)
  AND id < coalesce(%(after_id)s::bigint, 9223372036854775807)
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: list_scheduled_jobs
-- Waiting jobs not yet due, soonest first (background_jobs_waiting_idx); the cursor is the
-- last id of the previous page, whose (scheduled_at, id) the next page starts after.
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested FROM background_jobs
WHERE (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
  AND (%(pattern)s::text IS NULL OR id = %(search_id)s::bigint
       OR job_type ILIKE %(pattern)s ESCAPE '\' OR tenant_id ILIKE %(pattern)s ESCAPE '\'
       OR payload::text ILIKE %(pattern)s ESCAPE '\')
  AND id > coalesce(%(search_after_id)s::bigint, 0)
  AND status IN ('queued', 'retrying') AND scheduled_at > now()
  AND (%(after_id)s::bigint IS NULL OR (scheduled_at, id) > (
       SELECT c.scheduled_at, c.id FROM background_jobs AS c WHERE c.id = %(after_id)s))
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
ORDER BY scheduled_at, id
LIMIT %(limit)s;

-- name: count_delayed_jobs
-- Queued jobs not yet due (the part of queued the dashboard shows as Scheduled, as the
-- queues' delayed column does; a retrying job counts under retrying only).
SELECT count(*) FROM background_jobs
WHERE status = 'queued' AND scheduled_at > now()
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END);

-- name: count_scheduled_jobs
-- Waiting jobs not yet due (a subset of queued + retrying: the dashboard shows it apart).
SELECT count(*) FROM background_jobs
WHERE status IN ('queued', 'retrying') AND scheduled_at > now()
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END);

-- name: requeue_job
UPDATE background_jobs
SET status = 'queued', attempts = 0, scheduled_at = now(), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = false, updated_at = now()
WHERE id = %(id)s AND status IN ('dead', 'cancelled')
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: cancel_waiting_job
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = now()
WHERE id = %(id)s AND status IN ('queued', 'retrying')
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: request_cancel_running_job
UPDATE background_jobs SET cancel_requested = true, updated_at = now()
WHERE id = %(id)s AND status = 'running' AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
      ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: count_jobs_by_status
SELECT status, count(*) FROM background_jobs WHERE (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
      ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END) GROUP BY status;

-- name: queue_stats
-- Each job once: queued (due), delayed (queued, not yet due), running, retrying, dead.
SELECT queue,
       count(*) FILTER (WHERE status = 'queued' AND scheduled_at <= now()),
       count(*) FILTER (WHERE status = 'queued' AND scheduled_at > now()),
       count(*) FILTER (WHERE status = 'running'),
       count(*) FILTER (WHERE status = 'retrying'),
       count(*) FILTER (WHERE status = 'dead'),
       (EXTRACT(EPOCH FROM now()) - EXTRACT(EPOCH FROM min(scheduled_at) FILTER (
           WHERE status IN ('queued', 'retrying') AND scheduled_at <= now())))::float8
FROM background_jobs
WHERE status IN ('queued', 'retrying', 'running', 'dead')
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
GROUP BY queue;

-- name: requeue_dead_jobs
-- Bulk requeue (an operator's retry) of dead jobs matching a filter; returns the ids moved to queued.
WITH picked AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE status = 'dead'
      AND (%(queue)s::text IS NULL OR queue = %(queue)s)
      AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
      AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
      AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
            ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs AS j
SET status = 'queued', attempts = 0, scheduled_at = now(), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = false, updated_at = now()
FROM picked WHERE j.id = picked.id
RETURNING j.id;

-- name: prune_finished_jobs
-- Retention: delete up to %(limit)s rows of one terminal status that have not changed for
-- %(older_than_s)s seconds (database clock). SKIP LOCKED: never waits on, nor blocks, other
-- writers. The literal status list lets the planner use background_jobs_finished_idx.
WITH doomed AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE status IN ('completed', 'dead', 'cancelled')
      AND status = %(status)s
      AND updated_at < now() - make_interval(secs => %(older_than_s)s)
      AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
            ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM background_jobs AS j
USING doomed
WHERE j.id = doomed.id AND j.status = %(status)s
RETURNING j.id;

-- name: count_prunable_jobs
SELECT count(*) FROM background_jobs
WHERE status IN ('completed', 'dead', 'cancelled')
  AND status = %(status)s
  AND updated_at < now() - make_interval(secs => %(older_than_s)s)
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END);

-- name: finish_jobs_with_replies
-- finish_jobs plus the replies of the completions that applied, in one statement: a stale
-- owner or fence, or a job that did not complete, writes no reply (and, as in finish_jobs,
-- records no attempt).
WITH done AS (
    UPDATE background_jobs AS j
    SET status = u.status,
        attempts = CASE WHEN u.refund THEN greatest(j.attempts - 1, 0) ELSE j.attempts END,
        scheduled_at = CASE WHEN u.status = 'retrying'
                            THEN now() + make_interval(secs => u.delay_s) ELSE j.scheduled_at END,
        completed_at = CASE WHEN u.status = 'completed' THEN now() ELSE j.completed_at END,
        failed_at = CASE WHEN u.status = 'dead' THEN now() ELSE j.failed_at END,
        error_class = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                           THEN u.error_class END,  -- a completion clears the error
        last_error = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                          THEN u.last_error END,
        lease_expires_at = NULL, dispatched_at = NULL, cancel_requested = false, updated_at = now()
    FROM unnest(%(ids)s::bigint[], %(owners)s::text[], %(fences)s::bigint[], %(statuses)s::text[],
                %(delays)s::float8[], %(refunds)s::bool[], %(classes)s::text[], %(errors)s::text[])
         AS u(id, owner, fence, status, delay_s, refund, error_class, last_error)
    WHERE j.id = u.id AND j.status = 'running' AND j.locked_by = u.owner AND j.fence = u.fence
      AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
            ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
    RETURNING j.id, j.tenant_id, j.status, j.fence, j.locked_at, j.locked_by, j.error_class,
              j.last_error, CASE WHEN u.refund THEN 'interrupted' ELSE u.status END AS outcome
), recorded AS (
    INSERT INTO job_attempts
        (job_id, attempt, started_at, finished_at, worker, outcome, error_class, error)
    SELECT id, fence, locked_at, now(), locked_by, outcome, error_class, last_error FROM done
    WHERE NOT EXISTS (SELECT 1 FROM job_attempts AS o  -- only a foreign reset of the fence
                      WHERE o.job_id = done.id AND o.attempt = done.fence)
), trimmed AS (
    DELETE FROM job_attempts AS a USING done
    WHERE done.fence > %(attempts_kept)s AND a.job_id = done.id
      AND a.attempt <= done.fence - %(attempts_kept)s
), added AS (
    INSERT INTO reply_outbox (tenant_id, job_id, channel, recipient, body, dedupe_key)
    SELECT done.tenant_id, r.job_id, r.channel, r.recipient, r.body::jsonb, r.dedupe_key
    FROM unnest(%(r_jobs)s::bigint[], %(r_channels)s::text[], %(r_recipients)s::text[],
                %(r_bodies)s::text[], %(r_keys)s::text[]) WITH ORDINALITY
         AS r(job_id, channel, recipient, body, dedupe_key, n)
    JOIN done ON done.id = r.job_id AND done.status = 'completed'
    ORDER BY r.n
    ON CONFLICT (tenant_id, dedupe_key) DO NOTHING
    RETURNING id
)
SELECT done.id, (SELECT count(*) FROM added) FROM done;

-- name: claim_outbox
WITH picked AS MATERIALIZED (
    SELECT id FROM reply_outbox
    WHERE status = 'pending' AND next_attempt_at <= now()
      AND channel = ANY(%(channels)s::text[])
      AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
            ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
    ORDER BY next_attempt_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE reply_outbox AS o
SET status = 'sending', lease_owner = %(owner)s,
    lease_expires_at = now() + make_interval(secs => %(lease_s)s),
    attempts = o.attempts + 1, updated_at = now()
FROM picked
WHERE o.id = picked.id
RETURNING o.id, o.tenant_id, o.job_id, o.channel, o.recipient, o.body, o.dedupe_key, o.status,
       o.attempts, o.next_attempt_at, o.lease_owner, o.lease_expires_at,
       o.provider_message_id, o.error_class, o.created_at, o.updated_at, o.sent_at;

-- name: complete_outbox
-- Returns the delivery latency (creation to sent, database clock).
UPDATE reply_outbox
SET status = 'sent', sent_at = now(), provider_message_id = %(provider_message_id)s,
    error_class = NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = %(id)s AND status = 'sending' AND lease_owner = %(owner)s AND attempts = %(attempt)s
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING (EXTRACT(EPOCH FROM now()) - EXTRACT(EPOCH FROM created_at))::float8;

-- name: retry_outbox
UPDATE reply_outbox
SET status = 'pending', next_attempt_at = now() + make_interval(secs => %(delay_s)s),
    error_class = %(error_class)s, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = %(id)s AND status = 'sending' AND lease_owner = %(owner)s AND attempts = %(attempt)s
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id;

-- name: fail_outbox
UPDATE reply_outbox
SET status = 'dead', error_class = %(error_class)s, lease_expires_at = NULL, updated_at = now()
WHERE id = %(id)s AND status = 'sending' AND lease_owner = %(owner)s AND attempts = %(attempt)s
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id;

-- name: reap_outbox_leases
WITH expired AS MATERIALIZED (
    SELECT id FROM reply_outbox
    WHERE status = 'sending' AND (lease_expires_at < now() OR lease_expires_at IS NULL)
      AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
            ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
    ORDER BY lease_expires_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED
)
UPDATE reply_outbox AS o
SET status = CASE WHEN o.attempts >= %(max_attempts)s THEN 'dead' ELSE 'pending' END,
    error_class = 'lease_expired', next_attempt_at = now(), lease_owner = NULL,
    lease_expires_at = NULL, updated_at = now()
FROM expired
WHERE o.id = expired.id
RETURNING o.id;

-- name: get_outbox
SELECT id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at FROM reply_outbox WHERE id = %(id)s AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
      ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END);

-- name: list_outbox
SELECT id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at FROM reply_outbox
WHERE (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
  AND (%(channel)s::text IS NULL OR channel = %(channel)s)
  AND (%(after_id)s::bigint IS NULL OR id > %(after_id)s)
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
ORDER BY id
LIMIT %(limit)s;

-- name: requeue_outbox
-- An operator's retry: dead -> pending, due now, attempts start again.
UPDATE reply_outbox
SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_owner = NULL,
    lease_expires_at = NULL, updated_at = now()
WHERE id = %(id)s AND status = 'dead' AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
      ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at;

-- name: outbox_stats
-- Sent rows are left out: the table keeps them, and counting them would grow with history.
SELECT status, count(*),
       (EXTRACT(EPOCH FROM now()) - EXTRACT(EPOCH FROM min(created_at)))::float8
FROM reply_outbox
WHERE status IN ('pending', 'sending', 'dead')
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
GROUP BY status;

-- name: full_tenants
SELECT l.tenant_id
FROM unnest(%(tenants)s::text[], %(limits)s::int[]) AS l(tenant_id, max_running)
WHERE (SELECT count(*) FROM background_jobs j
       WHERE j.status = 'running' AND j.tenant_id = l.tenant_id
         AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
               ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)) >= l.max_running;

-- name: pick_due_job_ids
-- claim_due_jobs' choice without the claim (tenants already at their cap left out).
WITH RECURSIVE priorities(p) AS (
    (SELECT priority FROM background_jobs
     WHERE queue = %(queue)s AND status IN ('queued', 'retrying')
     ORDER BY priority LIMIT 1)
    UNION ALL
    SELECT (SELECT b.priority FROM background_jobs AS b
            WHERE b.queue = %(queue)s AND b.status IN ('queued', 'retrying')
              AND b.priority > priorities.p
            ORDER BY b.priority LIMIT 1)
    FROM priorities WHERE priorities.p IS NOT NULL
), heads AS MATERIALIZED (
    SELECT h.id, h.priority, h.aged, h.scheduled_at
    FROM priorities CROSS JOIN LATERAL (
        SELECT b.id, b.priority, b.scheduled_at,
               b.priority + floor(extract(epoch FROM now() - b.scheduled_at)::float8
                                  / %(aging_s)s::float8) AS aged
        FROM background_jobs AS b
        WHERE b.queue = %(queue)s AND b.status IN ('queued', 'retrying')
          AND b.priority = priorities.p AND b.scheduled_at <= now()
          AND (%(runnable_any)s::bool OR b.job_type = ANY(%(runnable_types)s::text[])
               OR b.job_type ^@ ANY(%(runnable_prefixes)s::text[]))
          AND b.tenant_id <> ALL(%(full)s::text[])
          AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
                ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
        ORDER BY b.scheduled_at, b.id
        LIMIT %(limit)s) AS h
    WHERE priorities.p IS NOT NULL  -- the recursion's last row: no priority, no descent
)
SELECT id FROM heads ORDER BY least(aged, max(priority) OVER ()) DESC, scheduled_at, id
LIMIT %(limit)s;

-- name: limited_tenants_of_jobs
SELECT DISTINCT tenant_id FROM background_jobs
WHERE id = ANY(%(ids)s::bigint[]) AND tenant_id = ANY(%(tenants)s::text[])
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
ORDER BY tenant_id;

-- name: free_queue_slots
-- Each capped queue (worker.queue_limits) and its room: max_running minus its running jobs.
SELECT l.queue, l.max_running - (SELECT count(*) FROM background_jobs j
                                 WHERE j.status = 'running' AND j.queue = l.queue
                                   AND (CASE WHEN %(scope_only)s::bool THEN j.tenant_id = ANY(%(scope_tenants)s::text[])
                                        ELSE j.tenant_id <> ALL(%(scope_tenants)s::text[]) END))
FROM unnest(%(queues)s::text[], %(limits)s::int[]) AS l(queue, max_running);

-- name: capped_queues_of_jobs
SELECT DISTINCT queue FROM background_jobs
WHERE id = ANY(%(ids)s::bigint[]) AND queue = ANY(%(queues)s::text[])
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
ORDER BY queue;

-- name: claim_jobs_limited
-- A candidate must fit both caps: its tenant's (tenants.<id>.max_running) and, among the
-- candidates its tenant allows, its queue's (worker.queue_limits). Either list may be empty.
-- SKIP LOCKED: while holding claim locks, never wait for a row lock (no lock cycles).
WITH limits AS (
    SELECT * FROM unnest(%(tenants)s::text[], %(limits)s::int[]) AS l(tenant_id, max_running)
), queue_limits AS (
    SELECT * FROM unnest(%(capped_queues)s::text[], %(queue_limits)s::int[])
        AS l(queue, max_running)
), cand AS MATERIALIZED (
    SELECT id, tenant_id, queue, scheduled_at, priority,
           b.priority + floor(extract(epoch FROM now() - b.scheduled_at)::float8
                              / %(aging_s)s::float8) AS aged FROM background_jobs AS b
    WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('queued', 'retrying')
      AND scheduled_at <= now()
      AND (%(runnable_any)s::bool OR b.job_type = ANY(%(runnable_types)s::text[])
           OR b.job_type ^@ ANY(%(runnable_prefixes)s::text[]))
      AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
            ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
    FOR UPDATE SKIP LOCKED
), leveled AS (  -- the top level: per queue, the highest priority among the candidates
    SELECT id, tenant_id, queue, scheduled_at,
           least(aged, max(priority) OVER (PARTITION BY queue)) AS level
    FROM cand
), ranked AS (
    SELECT id, tenant_id, queue, level, scheduled_at, row_number() OVER (
        PARTITION BY tenant_id ORDER BY level DESC, scheduled_at, id) AS rn
    FROM leveled
), tenant_allowed AS (
    SELECT r.id, r.queue, r.level, r.scheduled_at
    FROM ranked r LEFT JOIN limits l ON l.tenant_id = r.tenant_id
    WHERE l.max_running IS NULL
       OR r.rn <= l.max_running - (SELECT count(*) FROM background_jobs x
                                   WHERE x.status = 'running' AND x.tenant_id = r.tenant_id)
), queue_ranked AS (
    SELECT id, queue, row_number() OVER (
        PARTITION BY queue ORDER BY level DESC, scheduled_at, id) AS rn
    FROM tenant_allowed
), allowed AS (
    SELECT r.id FROM queue_ranked r LEFT JOIN queue_limits l ON l.queue = r.queue
    WHERE l.max_running IS NULL
       OR r.rn <= l.max_running - (SELECT count(*) FROM background_jobs x
                                   WHERE x.status = 'running' AND x.queue = r.queue
                                     AND (CASE WHEN %(scope_only)s::bool THEN x.tenant_id = ANY(%(scope_tenants)s::text[])
                                          ELSE x.tenant_id <> ALL(%(scope_tenants)s::text[]) END))
)
UPDATE background_jobs AS j
SET status = 'running', locked_by = %(owner)s, locked_at = now(),
    lease_expires_at = now() + make_interval(secs => %(lease_s)s),
    fence = j.fence + 1, attempts = j.attempts + 1, updated_at = now()
FROM allowed
WHERE j.id = allowed.id
RETURNING j.id, j.tenant_id, j.job_type, j.queue, j.payload, j.status, j.priority, j.attempts,
       j.max_attempts, j.scheduled_at, j.created_at, j.updated_at, j.fence,
       j.idempotency_key, j.locked_by, j.locked_at, j.lease_expires_at, j.last_error,
       j.error_class, j.failed_at, j.completed_at, j.dispatched_at, j.traceparent,
       j.cancel_requested;

-- name: pick_limited_due_job_ids
-- Streams mode: the due backlog of limited tenants below their cap (their refused stream
-- entries were acked; this claims them as slots free, not only at the next sweep). Shaped
-- like pick_due_job_ids, for each queue: the first %(limit)s due jobs of each priority,
-- then the best of those by level (docs/priority.md).
WITH RECURSIVE priorities(queue, p) AS (
    SELECT q.queue, (SELECT b.priority FROM background_jobs AS b
                     WHERE b.queue = q.queue AND b.status IN ('queued', 'retrying')
                     ORDER BY b.priority LIMIT 1)
    FROM unnest(%(queues)s::text[]) AS q(queue)
    UNION ALL
    SELECT priorities.queue, (SELECT b.priority FROM background_jobs AS b
                              WHERE b.queue = priorities.queue
                                AND b.status IN ('queued', 'retrying')
                                AND b.priority > priorities.p
                              ORDER BY b.priority LIMIT 1)
    FROM priorities WHERE priorities.p IS NOT NULL
), heads AS MATERIALIZED (
    SELECT h.id, h.queue, h.priority, h.aged, h.scheduled_at
    FROM priorities CROSS JOIN LATERAL (
        SELECT b.id, b.queue, b.priority, b.scheduled_at,
               b.priority + floor(extract(epoch FROM now() - b.scheduled_at)::float8
                                  / %(aging_s)s::float8) AS aged
        FROM background_jobs AS b
        WHERE b.queue = priorities.queue AND b.status IN ('queued', 'retrying')
          AND b.priority = priorities.p AND b.scheduled_at <= now()
          AND (%(runnable_any)s::bool OR b.job_type = ANY(%(runnable_types)s::text[])
               OR b.job_type ^@ ANY(%(runnable_prefixes)s::text[]))
          AND b.tenant_id = ANY(%(open)s::text[])
          AND (CASE WHEN %(scope_only)s::bool THEN b.tenant_id = ANY(%(scope_tenants)s::text[])
                ELSE b.tenant_id <> ALL(%(scope_tenants)s::text[]) END)
        ORDER BY b.scheduled_at, b.id
        LIMIT %(limit)s) AS h
    WHERE priorities.p IS NOT NULL  -- the recursion's last row: no priority, no descent
)
SELECT id FROM heads
ORDER BY least(aged, max(priority) OVER (PARTITION BY queue)) DESC, scheduled_at, id
LIMIT %(limit)s;

-- name: running_by_tenant
SELECT tenant_id, count(*) FROM background_jobs WHERE status = 'running' AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
      ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
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
WHERE id = %(id)s AND status IN ('queued', 'retrying', 'completed', 'dead', 'cancelled')
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: discard_job
-- An operator's discard: a waiting job becomes dead without running.
UPDATE background_jobs
SET status = 'dead', error_class = 'discarded', last_error = 'discarded by operator',
    failed_at = now(), dispatched_at = NULL, cancel_requested = false, updated_at = now()
WHERE id = %(id)s AND status IN ('queued', 'retrying')
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: run_job_now
-- An operator's run now: a waiting job not yet due becomes due now (database clock),
-- undispatched, so the scheduler XADDs it or a poller claims it like any due job.
UPDATE background_jobs
SET scheduled_at = now(), dispatched_at = NULL, updated_at = now()
WHERE id = %(id)s AND status IN ('queued', 'retrying') AND scheduled_at > now()
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: pick_jobs
-- A bulk control's next batch: ids of jobs in the control's statuses that match the ids
-- and filter given (NULL: any), past the last batch's id (a keyset: no lock is held
-- between batches, and each write below touches at most one batch).
SELECT id FROM background_jobs
WHERE status = ANY(%(statuses)s::text[])
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
  AND id > %(after_id)s
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
ORDER BY id
LIMIT %(limit)s;

-- name: requeue_jobs
-- Bulk retry: requeue_job for a batch of picked ids.
UPDATE background_jobs
SET status = 'queued', attempts = 0, scheduled_at = now(), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = false, updated_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('dead', 'cancelled')
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id;

-- name: cancel_waiting_jobs
-- Bulk cancel, waiting jobs: cancel_waiting_job for a batch.
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('queued', 'retrying')
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id;

-- name: request_cancel_running_jobs
-- Bulk cancel, running jobs: request_cancel_running_job for a batch (their workers
-- cancel the handlers at the next heartbeat).
UPDATE background_jobs
SET cancel_requested = true, updated_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('running')
  AND NOT cancel_requested
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id;

-- name: delete_jobs
-- Bulk delete: delete_job for a batch.
DELETE FROM background_jobs
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('queued', 'retrying', 'completed', 'dead', 'cancelled')
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id;

-- name: discard_jobs
-- Bulk discard: discard_job for a batch.
UPDATE background_jobs
SET status = 'dead', error_class = 'discarded', last_error = 'discarded by operator',
    failed_at = now(), dispatched_at = NULL, cancel_requested = false, updated_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('queued', 'retrying')
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id;

-- name: run_jobs_now
-- Bulk run now: run_job_now for a batch.
UPDATE background_jobs
SET scheduled_at = now(), dispatched_at = NULL, updated_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('queued', 'retrying')
  AND scheduled_at > now()
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
RETURNING id;

-- name: waiting_job_types
SELECT job_type, queue, count(*),
       (EXTRACT(EPOCH FROM now()) - EXTRACT(EPOCH FROM min(scheduled_at)))::float8
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND scheduled_at <= now()
  AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
        ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
GROUP BY job_type, queue;
