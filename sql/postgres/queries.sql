-- Named queries of the PostgreSQL store (daemon/store/). Each block starts with
-- "-- name: <name>" and runs as written with psycopg's %(name)s parameters: paste it
-- into psql with the parameters filled in. Queries return the columns JOB_COLUMNS /
-- OUTBOX_COLUMNS (store/queries.py) decode, in that order.
-- A database serving only some tenants (a live move, docs/migrate.md) runs the scoped set:
-- each query that acts across tenants marks the place of the tenant scope with a comment,
-- /* AND scope */, /* AND scope(j) */ (on j.tenant_id) or /* WHERE scope */, alone on its line
-- or inside one. Pasted as is, the marker is a comment and the query is the plain one; the
-- loader (store/queries.py) drops the markers for the plain set and expands them once into
-- the scoped set (docs/schema.md, "The scoped set"), two more parameters and the clause
--   (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])
--         ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)
-- one CASE, so that it stays a plain filter: the indexes a query uses without it are the
-- ones it uses with it.

-- name: enqueue_job
-- queue and max_attempts left out (NULL): the values a daemon published for the type
-- (gochatd_job_types, docs/job-types.md), else 'default' and 25. COALESCE evaluates the
-- lookups only for a column that was not given.
INSERT INTO background_jobs
    (tenant_id, job_type, queue, payload, priority, max_attempts, scheduled_at,
     idempotency_key, traceparent, dispatched_at)
SELECT %(tenant_id)s, %(job_type)s,
       COALESCE(%(queue)s::text, (SELECT t.queue FROM gochatd_job_types AS t
                                  WHERE t.job_type = %(job_type)s), 'default'),
       %(payload)s::jsonb, %(priority)s,
       COALESCE(%(max_attempts)s::integer, (SELECT t.max_attempts FROM gochatd_job_types AS t
                                            WHERE t.job_type = %(job_type)s), 25),
       due.at, %(idempotency_key)s, %(traceparent)s,
       CASE WHEN %(dispatch_now)s AND due.at <= now() THEN now() END
FROM (SELECT COALESCE(%(scheduled_at)s::timestamptz,
                      now() + make_interval(secs => %(delay_s)s)) AS at) AS due
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: find_idempotent_job
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested,
       (job_type = %(job_type)s AND payload = %(payload)s::jsonb) AS same_job
FROM background_jobs
WHERE tenant_id = %(tenant_id)s AND idempotency_key = %(idempotency_key)s;

-- name: enqueue_unique_job
-- enqueue_job for a job with a unique key (docs/unique-jobs.md); jobs without one keep
-- enqueue_job. Any key already taken (the idempotency key, or the unique key held by another
-- row) skips the row, and the caller looks up who holds it (find_idempotent_job, then
-- find_unique_job). unique_until is the database's now() plus unique_for_s (NULL: none).
INSERT INTO background_jobs
    (tenant_id, job_type, queue, payload, priority, max_attempts, scheduled_at,
     idempotency_key, traceparent, dispatched_at, unique_key, unique_until)
SELECT %(tenant_id)s, %(job_type)s,
       COALESCE(%(queue)s::text, (SELECT t.queue FROM gochatd_job_types AS t
                                  WHERE t.job_type = %(job_type)s), 'default'),
       %(payload)s::jsonb, %(priority)s,
       COALESCE(%(max_attempts)s::integer, (SELECT t.max_attempts FROM gochatd_job_types AS t
                                            WHERE t.job_type = %(job_type)s), 25),
       due.at, %(idempotency_key)s, %(traceparent)s,
       CASE WHEN %(dispatch_now)s AND due.at <= now() THEN now() END,
       %(unique_key)s, now() + make_interval(secs => %(unique_for_s)s::float8)
FROM (SELECT COALESCE(%(scheduled_at)s::timestamptz,
                      now() + make_interval(secs => %(delay_s)s)) AS at) AS due
ON CONFLICT DO NOTHING
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: find_unique_job
-- The row holding a tenant's unique key, and whether it still counts (live): queued,
-- retrying or running, or completed before its unique_until (the database clock decides).
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested,
       (status IN ('queued', 'retrying', 'running')
        OR (status = 'completed' AND unique_until IS NOT NULL AND unique_until > now()))
       AS live
FROM background_jobs
WHERE tenant_id = %(tenant_id)s AND unique_key = %(unique_key)s;

-- name: release_unique_key
-- A holder that no longer counts gives its key up, so the next enqueue of the key inserts.
-- Guarded: written only if the row still holds the key and still does not count.
UPDATE background_jobs
SET unique_key = NULL
WHERE id = %(id)s AND unique_key = %(unique_key)s
  AND NOT (status IN ('queued', 'retrying', 'running')
           OR (status = 'completed' AND unique_until IS NOT NULL AND unique_until > now()))
RETURNING id;

-- name: claim_jobs
-- Stream-delivered ids: one conditional UPDATE; rows already claimed, finished or not yet
-- due are simply not returned. The ids are reached by the primary key only: the status
-- test is written IS NOT DISTINCT FROM, which no index answers (with "status IN (...)"
-- the generic plan psycopg's prepared statement may settle on took an index on status,
-- which walks every dead entry while a transaction held open elsewhere keeps them), and
-- the ids are an "id = ANY(...)" on the table itself, not a join: without statistics (a
-- table never analyzed yet) the planner took a join for a whole-table scan compared with
-- every id (tests/integration/test_by_id_plans.py).
UPDATE background_jobs AS j
SET status = 'running', locked_by = %(owner)s, locked_at = now(),
    lease_expires_at = now() + make_interval(secs => %(lease_s)s),
    fence = j.fence + 1, attempts = j.attempts + 1, updated_at = now()
WHERE j.id = ANY(%(ids)s::bigint[])
  AND (j.status IS NOT DISTINCT FROM 'queued' OR j.status IS NOT DISTINCT FROM 'retrying')
  AND j.scheduled_at <= now()
  AND (%(runnable_any)s::bool OR j.job_type = ANY(%(runnable_types)s::text[])
       OR j.job_type ^@ ANY(%(runnable_prefixes)s::text[]))
  /* AND scope */
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
-- descent into an empty range of background_jobs_claimable_idx in the common case. The
-- status test as in claim_jobs: the ids are reached by the primary key only.
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
WHERE j.id = ANY(%(ids)s::bigint[])
  AND (j.status IS NOT DISTINCT FROM 'queued' OR j.status IS NOT DISTINCT FROM 'retrying')
  AND j.scheduled_at <= now()
  AND (%(runnable_any)s::bool OR j.job_type = ANY(%(runnable_types)s::text[])
       OR j.job_type ^@ ANY(%(runnable_prefixes)s::text[]))
  AND j.queue <> ALL (ARRAY(SELECT queue FROM mixed))
  /* AND scope */
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
-- due_within_s: only jobs due that recently (the claimer's window since its last pass saw the
-- head of the queue, store/claim_window.py); NULL: all of them. The last column (after the
-- job's) says how long that head had waited. A claimed job's old
-- index entry stays in background_jobs_claimable_idx, ahead of every waiting job, until
-- vacuum may remove it; while a snapshot held open elsewhere keeps them all, a scan from the
-- head would visit every one (docs/chaos.md, active_readers). Priority 0 is always probed
-- (a descent into its due window); other priorities are found by descents that start
-- beside priority 0's entries, never inside them.
WITH RECURSIVE above(p) AS (
    (SELECT priority FROM background_jobs
     WHERE queue = %(queue)s AND status IN ('queued', 'retrying') AND priority > 0
     ORDER BY priority LIMIT 1)
    UNION ALL
    SELECT (SELECT b.priority FROM background_jobs AS b
            WHERE b.queue = %(queue)s AND b.status IN ('queued', 'retrying')
              AND b.priority > above.p
            ORDER BY b.priority LIMIT 1)
    FROM above WHERE above.p IS NOT NULL
), below(p) AS (
    (SELECT priority FROM background_jobs
     WHERE queue = %(queue)s AND status IN ('queued', 'retrying') AND priority < 0
     ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT b.priority FROM background_jobs AS b
            WHERE b.queue = %(queue)s AND b.status IN ('queued', 'retrying')
              AND b.priority < below.p
            ORDER BY b.priority DESC LIMIT 1)
    FROM below WHERE below.p IS NOT NULL
), priorities(p) AS (
    SELECT 0 UNION ALL SELECT p FROM above UNION ALL SELECT p FROM below
), heads AS MATERIALIZED (
    SELECT h.id, h.priority, h.aged, h.scheduled_at
    FROM priorities CROSS JOIN LATERAL (
        SELECT b.id, b.priority, b.scheduled_at,
               b.priority + floor(extract(epoch FROM now() - b.scheduled_at)::float8
                                  / %(aging_s)s::float8) AS aged
        FROM background_jobs AS b
        WHERE b.queue = %(queue)s AND b.status IN ('queued', 'retrying')
          AND b.priority = priorities.p AND b.scheduled_at <= now()
          AND b.scheduled_at >= coalesce(now() - make_interval(secs => %(due_within_s)s),
                                         '-infinity')
          AND (%(runnable_any)s::bool OR b.job_type = ANY(%(runnable_types)s::text[])
               OR b.job_type ^@ ANY(%(runnable_prefixes)s::text[]))
          AND (b.dispatched_at IS NOT NULL OR NOT %(dispatched_only)s::bool)
          /* AND scope */
        ORDER BY b.scheduled_at, b.id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED) AS h
    WHERE priorities.p IS NOT NULL  -- the recursions' last rows: no priority, no descent
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
       j.cancel_requested,
       -- how long the oldest head had waited: every job left waiting is due since then
       extract(epoch FROM now() - (SELECT min(h.scheduled_at) FROM heads AS h))::float8;

-- name: finish_jobs
-- Compare-and-set on (id, owner, fence, status = running), row by row; returns the ids
-- that were applied. A stale owner or fence matches no row and writes nothing, and records
-- no attempt: the applied rows (the UPDATE's RETURNING) feed the job_attempts INSERT, and
-- a job past %(attempts_kept)s runs loses its oldest one (docs/operations.md). A completion
-- stores the handler's result (JSON text or NULL; docs/results.md) in the same UPDATE: a
-- stale finish stores none. The status test as in claim_jobs: a generic plan otherwise took
-- background_jobs_status_idx for 'running', ~1,500 blocks a finish under a held snapshot.
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
        result = CASE WHEN u.status = 'completed' THEN u.result::jsonb END,
        lease_expires_at = NULL, dispatched_at = NULL, cancel_requested = false, updated_at = now()
    FROM unnest(%(ids)s::bigint[], %(owners)s::text[], %(fences)s::bigint[], %(statuses)s::text[],
                %(delays)s::float8[], %(refunds)s::bool[], %(classes)s::text[], %(errors)s::text[],
                %(results)s::text[])
         AS u(id, owner, fence, status, delay_s, refund, error_class, last_error, result)
    WHERE j.id = u.id AND j.status IS NOT DISTINCT FROM 'running' AND j.locked_by = u.owner
      AND j.fence = u.fence
      /* AND scope */
    RETURNING j.id, j.fence, j.locked_at, j.locked_by, j.error_class, j.last_error,
              CASE WHEN u.refund THEN 'interrupted' ELSE u.status END AS outcome
), recorded AS (
    INSERT INTO job_attempts
        (job_id, attempt, started_at, finished_at, worker, outcome, error_class, error)
    SELECT id, fence, locked_at, now(), locked_by, outcome, error_class, last_error FROM done
    WHERE done.outcome <> 'completed'  -- a completed run is read from the job's row
      AND NOT EXISTS (SELECT 1 FROM job_attempts AS o  -- only a foreign reset of the fence
                      WHERE o.job_id = done.id AND o.attempt = done.fence)
), trimmed AS (
    DELETE FROM job_attempts AS a USING done
    WHERE done.fence > %(attempts_kept)s AND a.job_id = done.id
      AND a.attempt <= done.fence - %(attempts_kept)s
)
SELECT id FROM done;

-- name: extend_leases
-- The status test as in finish_jobs: the ids are reached by the primary key only. The ids
-- are also an "id = ANY(...)" on the table, as in claim_jobs: without statistics the join
-- alone was planned as every running row of the table tested against every id.
UPDATE background_jobs AS j
SET lease_expires_at = now() + make_interval(secs => %(lease_s)s)
FROM unnest(%(ids)s::bigint[], %(fences)s::bigint[]) AS u(id, fence)
WHERE j.id = ANY(%(ids)s::bigint[]) AND j.id = u.id AND j.fence = u.fence
  AND j.locked_by = %(owner)s AND j.status IS NOT DISTINCT FROM 'running'
  /* AND scope */
RETURNING j.id, j.cancel_requested;

-- name: reap_expired_leases
-- expired_within_s: only leases that expired that recently (the reaper's window since its
-- last complete pass, loops/reap.py), plus any expired lease of a row newer than
-- created_after_id (a row written with an old lease, by foreign SQL); NULL: all of them.
-- Each reaped run is recorded as a lease_expired attempt, as finish_jobs records its own.
-- The three ways in are three index ranges, not one filter: written as one OR, the plan read
-- background_jobs_lease_idx from its start and tested each entry, every dead one included
-- (under a transaction held open elsewhere, one per job that ever ran: docs/chaos.md). The
-- status tests written IS NOT DISTINCT FROM keep the lease index out of the ways that must
-- not read it (as claim_jobs does).
WITH expired AS MATERIALIZED (
    SELECT j.id
    FROM (SELECT w.id, w.lease_expires_at FROM background_jobs AS w  -- background_jobs_lease_idx
          WHERE w.status = 'running' AND w.lease_expires_at < now()
            AND w.lease_expires_at >= coalesce(
                now() - make_interval(secs => %(expired_within_s)s), '-infinity')
          UNION
          SELECT n.id, n.lease_expires_at FROM background_jobs AS n  -- background_jobs_pkey
          WHERE n.status IS NOT DISTINCT FROM 'running' AND n.id > %(created_after_id)s
            AND n.lease_expires_at < now()
          UNION
          SELECT u.id, u.lease_expires_at FROM background_jobs AS u  -- background_jobs_lease_idx
          WHERE u.status = 'running' AND u.lease_expires_at IS NULL) AS candidate
    JOIN background_jobs AS j ON j.id = candidate.id  -- background_jobs_pkey
    WHERE j.status IS NOT DISTINCT FROM 'running'
      /* AND scope(j) */
    ORDER BY candidate.lease_expires_at LIMIT %(limit)s FOR UPDATE OF j SKIP LOCKED
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
      /* AND scope */
    ORDER BY scheduled_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs AS j SET dispatched_at = now()
FROM due WHERE j.id = due.id
RETURNING j.id, j.job_type, j.queue, j.tenant_id;

-- name: redispatch_stale_jobs
-- The sweep: due jobs whose last dispatch is older than the sweep interval (lost XADDs), at
-- most limits[i] of queues[i] (what its stream is not already holding), every queue in one
-- statement: an idle daemon's sweep is one transaction, not one per queue.
-- dispatched_within_s: only jobs last dispatched that recently (the sweep's window since its
-- last complete pass, loops/schedule.py); NULL: all of them.
WITH stale AS MATERIALIZED (
    SELECT s.id
    FROM unnest(%(queues)s::text[], %(limits)s::int[]) AS q(queue, room)
    CROSS JOIN LATERAL (
        SELECT id FROM background_jobs
        WHERE queue = q.queue AND status IN ('queued', 'retrying') AND scheduled_at <= now()
          AND (%(runnable_any)s::bool OR job_type = ANY(%(runnable_types)s::text[])
               OR job_type ^@ ANY(%(runnable_prefixes)s::text[]))
          AND dispatched_at < now() - make_interval(secs => %(older_than_s)s)
          AND dispatched_at >= coalesce(now() - make_interval(secs => %(dispatched_within_s)s),
                                        '-infinity')
          /* AND scope */
        ORDER BY dispatched_at, id
        LIMIT q.room
        FOR UPDATE SKIP LOCKED
    ) AS s
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
  /* AND scope */;

-- name: next_due_in_s
-- due_within_s: as claim_due_jobs' window (a job due before it is found by the claim's next
-- full pass); NULL: all of them. Waiting jobs not yet dispatched, soonest first
-- (background_jobs_undispatched_idx), and dispatched ones, each due by the time it was
-- dispatched (background_jobs_dispatched_idx, within the window by dispatch time too):
-- the claim index would read every waiting job of the queues for the minimum.
SELECT (EXTRACT(EPOCH FROM least(
    (SELECT min(scheduled_at) FROM background_jobs
     WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL
       AND queue = ANY(%(queues)s::text[])
       AND scheduled_at >= coalesce(now() - make_interval(secs => %(due_within_s)s),
                                    '-infinity')
       AND (%(runnable_any)s::bool OR job_type = ANY(%(runnable_types)s::text[])
            OR job_type ^@ ANY(%(runnable_prefixes)s::text[]))
       /* AND scope */),
    (SELECT min(scheduled_at) FROM background_jobs
     WHERE status IN ('queued', 'retrying') AND dispatched_at IS NOT NULL
       AND queue = ANY(%(queues)s::text[])
       AND dispatched_at >= coalesce(now() - make_interval(secs => %(due_within_s)s),
                                     '-infinity')
       AND scheduled_at >= coalesce(now() - make_interval(secs => %(due_within_s)s),
                                    '-infinity')
       AND (%(runnable_any)s::bool OR job_type = ANY(%(runnable_types)s::text[])
            OR job_type ^@ ANY(%(runnable_prefixes)s::text[]))
       /* AND scope */)))
    - EXTRACT(EPOCH FROM now()))::float8;

-- name: next_lease_expiry_in_s
-- The reaper's next pass (loops/reap.py): seconds (database clock) until the earliest lease
-- of a running job expires; negative when one already has; NULL when nothing runs.
-- expired_within_s: leases that expired that recently at the earliest (the reaper's window:
-- older ones were reaped by a complete pass), so the read starts inside
-- background_jobs_lease_idx, after the dead entries of every lease long gone; NULL: all.
SELECT (EXTRACT(EPOCH FROM min(lease_expires_at)) - EXTRACT(EPOCH FROM now()))::float8
FROM background_jobs
WHERE status = 'running'
  AND lease_expires_at >= coalesce(now() - make_interval(secs => %(expired_within_s)s),
                                   '-infinity')
  /* AND scope */;

-- name: newest_job_id
SELECT coalesce(max(id), 0) FROM background_jobs;

-- name: get_job
-- The one read that carries the result, after the job columns (store/rows.py with_result;
-- listings leave it out: Job.result is None there).
SELECT id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested, result::text
FROM background_jobs WHERE id = %(id)s /* AND scope */;

-- name: get_job_states
-- The finisher, after a write it retried: each job's fence and status for the ids of one
-- batch (did the first attempt commit?), one query for the batch.
SELECT id, fence, status FROM background_jobs WHERE id = ANY(%(ids)s::bigint[])
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
WHERE (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
  AND (%(pattern)s::text IS NULL OR id = %(search_id)s::bigint
       OR job_type ILIKE %(pattern)s ESCAPE '\' OR tenant_id ILIKE %(pattern)s ESCAPE '\'
       OR payload::text ILIKE %(pattern)s ESCAPE '\')
  AND id > coalesce(%(search_after_id)s::bigint, 0)
  AND id > coalesce(%(after_id)s::bigint, 0)
  /* AND scope */
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
  /* AND scope */
ORDER BY id DESC
LIMIT %(limit)s;

-- name: list_scheduled_jobs
-- Waiting jobs not yet due, soonest first (background_jobs_deferred_idx: a job not yet due
-- was due later than it was written); the cursor is the last id of the previous page, whose
-- (scheduled_at, id) the next page starts after.
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
  AND status IN ('queued', 'retrying') AND scheduled_at > now() AND scheduled_at > created_at
  AND (%(after_id)s::bigint IS NULL OR (scheduled_at, id) > (
       SELECT c.scheduled_at, c.id FROM background_jobs AS c WHERE c.id = %(after_id)s))
  /* AND scope */
ORDER BY scheduled_at, id
LIMIT %(limit)s;

-- name: count_delayed_jobs
-- Queued jobs not yet due (the part of queued the dashboard shows as Scheduled, as the
-- queues' delayed column does; a retrying job counts under retrying only).
SELECT count(*) FROM background_jobs
WHERE status = 'queued' AND scheduled_at > now() AND scheduled_at > created_at
  /* AND scope */;

-- name: count_scheduled_jobs
-- Waiting jobs not yet due (a subset of queued + retrying: the dashboard shows it apart).
-- background_jobs_deferred_idx, as list_scheduled_jobs.
SELECT count(*) FROM background_jobs
WHERE status IN ('queued', 'retrying') AND scheduled_at > now() AND scheduled_at > created_at
  /* AND scope */;

-- name: requeue_job
UPDATE background_jobs
SET status = 'queued', attempts = 0, waits_on = 0, scheduled_at = now(), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = false, updated_at = now()
WHERE id = %(id)s AND status IN ('dead', 'cancelled')
  /* AND scope */
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: cancel_waiting_job
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = now()
WHERE id = %(id)s AND status IN ('queued', 'retrying')
  /* AND scope */
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: request_cancel_running_job
UPDATE background_jobs SET cancel_requested = true, updated_at = now()
WHERE id = %(id)s AND status = 'running' /* AND scope */
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: count_jobs_by_status
SELECT status, count(*) FROM background_jobs /* WHERE scope */ GROUP BY status;

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
  /* AND scope */
GROUP BY queue;

-- name: requeue_dead_jobs
-- Bulk requeue (an operator's retry) of dead jobs matching a filter; returns the ids moved to queued.
WITH picked AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE status = 'dead'
      AND (%(queue)s::text IS NULL OR queue = %(queue)s)
      AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
      AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
      /* AND scope */
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE background_jobs AS j
SET status = 'queued', attempts = 0, waits_on = 0, scheduled_at = now(), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = false, updated_at = now()
FROM picked WHERE j.id = picked.id
RETURNING j.id;

-- name: enqueue_jobs
-- enqueue_many: the whole batch in one INSERT. Ids are drawn in item order up front, so each
-- inserted row maps back to its item (ord) without relying on RETURNING order. Items whose
-- (tenant_id, idempotency_key) exists are skipped here and resolved by find_idempotent_jobs.
-- Items arrive as one JSON array of [tenant_id, job_type, queue, payload, priority,
-- max_attempts, scheduled_at, delay_s, idempotency_key, traceparent]: one C-encoded
-- parameter instead of ten arrays escaped element by element. A null queue or max_attempts
-- takes the type's published value, as in enqueue_job.
WITH items AS MATERIALIZED (
    SELECT nextval('background_jobs_id_seq'::regclass) AS id, e.ord,
           e.item->>0 AS tenant_id, e.item->>1 AS job_type, e.item->>2 AS queue,
           e.item->3 AS payload, (e.item->>4)::int AS priority,
           (e.item->>5)::int AS max_attempts,
           COALESCE((e.item->>6)::timestamptz,
                    now() + make_interval(secs => (e.item->>7)::float8)) AS due_at,
           e.item->>8 AS idempotency_key, e.item->>9 AS traceparent
    FROM jsonb_array_elements(%(items)s::jsonb) WITH ORDINALITY AS e(item, ord)
    ORDER BY e.ord
), inserted AS (
    INSERT INTO background_jobs
        (id, tenant_id, job_type, queue, payload, priority, max_attempts, scheduled_at,
         idempotency_key, traceparent, dispatched_at)
    SELECT items.id, items.tenant_id, items.job_type,
           COALESCE(items.queue, published.queue, 'default'), items.payload, items.priority,
           COALESCE(items.max_attempts, published.max_attempts, 25), items.due_at,
           items.idempotency_key, items.traceparent,
           CASE WHEN %(dispatch_now)s AND items.due_at <= now() THEN now() END
    FROM items LEFT JOIN gochatd_job_types AS published ON published.job_type = items.job_type
    ORDER BY items.ord
    ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
    RETURNING id, payload, scheduled_at, created_at, updated_at, dispatched_at, queue,
              max_attempts
)
-- Only what the database decided; the rest of a new row is the item itself.
SELECT items.ord, inserted.*
FROM inserted JOIN items ON items.id = inserted.id
ORDER BY items.ord;

-- name: find_idempotent_jobs
-- The rows holding the keys of batch items that were not inserted, and whether each is the
-- same job (type and payload) as the item.
SELECT u.ord, j.id, j.tenant_id, j.job_type, j.queue, j.payload, j.status, j.priority, j.attempts,
       j.max_attempts, j.scheduled_at, j.created_at, j.updated_at, j.fence,
       j.idempotency_key, j.locked_by, j.locked_at, j.lease_expires_at, j.last_error,
       j.error_class, j.failed_at, j.completed_at, j.dispatched_at, j.traceparent,
       j.cancel_requested,
       (j.job_type = u.job_type AND j.payload = u.payload::jsonb) AS same_job
FROM unnest(%(ords)s::bigint[], %(tenant_ids)s::text[], %(idempotency_keys)s::text[],
            %(job_types)s::text[], %(payloads)s::text[])
     AS u(ord, tenant_id, idempotency_key, job_type, payload)
JOIN background_jobs AS j
  ON j.tenant_id = u.tenant_id AND j.idempotency_key = u.idempotency_key
ORDER BY u.ord;

-- name: prune_finished_jobs
-- Retention: delete up to %(limit)s rows of one terminal status that have not changed for
-- %(older_than_s)s seconds (database clock). SKIP LOCKED: never waits on, nor blocks, other
-- writers. The literal status list lets the planner use background_jobs_finished_idx.
WITH doomed AS MATERIALIZED (
    SELECT id FROM background_jobs
    WHERE status IN ('completed', 'dead', 'cancelled')
      AND status = %(status)s
      AND updated_at < now() - make_interval(secs => %(older_than_s)s)
      /* AND scope */
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
  /* AND scope */;

-- ---------------------------------------------------------------------------------------
-- Reply outbox (daemon/outbox/store.py, daemon/outbox/loop.py).
-- Sender writes are fenced by (lease_owner, attempts).

-- name: finish_jobs_with_replies
-- finish_jobs plus the replies of the completions that applied, in one statement: a stale
-- owner or fence, or a job that did not complete, writes no reply (and, as in finish_jobs,
-- records no attempt). The status test as in finish_jobs.
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
        result = CASE WHEN u.status = 'completed' THEN u.result::jsonb END,
        lease_expires_at = NULL, dispatched_at = NULL, cancel_requested = false, updated_at = now()
    FROM unnest(%(ids)s::bigint[], %(owners)s::text[], %(fences)s::bigint[], %(statuses)s::text[],
                %(delays)s::float8[], %(refunds)s::bool[], %(classes)s::text[], %(errors)s::text[],
                %(results)s::text[])
         AS u(id, owner, fence, status, delay_s, refund, error_class, last_error, result)
    WHERE j.id = u.id AND j.status IS NOT DISTINCT FROM 'running' AND j.locked_by = u.owner
      AND j.fence = u.fence
      /* AND scope */
    RETURNING j.id, j.tenant_id, j.status, j.fence, j.locked_at, j.locked_by, j.error_class,
              j.last_error, CASE WHEN u.refund THEN 'interrupted' ELSE u.status END AS outcome
), recorded AS (
    INSERT INTO job_attempts
        (job_id, attempt, started_at, finished_at, worker, outcome, error_class, error)
    SELECT id, fence, locked_at, now(), locked_by, outcome, error_class, last_error FROM done
    WHERE done.outcome <> 'completed'  -- a completed run is read from the job's row
      AND NOT EXISTS (SELECT 1 FROM job_attempts AS o  -- only a foreign reset of the fence
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
      /* AND scope */
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
  /* AND scope */
RETURNING (EXTRACT(EPOCH FROM now()) - EXTRACT(EPOCH FROM created_at))::float8;

-- name: retry_outbox
UPDATE reply_outbox
SET status = 'pending', next_attempt_at = now() + make_interval(secs => %(delay_s)s),
    error_class = %(error_class)s, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = %(id)s AND status = 'sending' AND lease_owner = %(owner)s AND attempts = %(attempt)s
  /* AND scope */
RETURNING id;

-- name: fail_outbox
UPDATE reply_outbox
SET status = 'dead', error_class = %(error_class)s, lease_expires_at = NULL, updated_at = now()
WHERE id = %(id)s AND status = 'sending' AND lease_owner = %(owner)s AND attempts = %(attempt)s
  /* AND scope */
RETURNING id;

-- name: reap_outbox_leases
WITH expired AS MATERIALIZED (
    SELECT id FROM reply_outbox
    WHERE status = 'sending' AND (lease_expires_at < now() OR lease_expires_at IS NULL)
      /* AND scope */
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
       created_at, updated_at, sent_at FROM reply_outbox WHERE id = %(id)s /* AND scope */;

-- name: list_outbox
SELECT id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at FROM reply_outbox
WHERE (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
  AND (%(channel)s::text IS NULL OR channel = %(channel)s)
  AND (%(after_id)s::bigint IS NULL OR id > %(after_id)s)
  /* AND scope */
ORDER BY id
LIMIT %(limit)s;

-- name: requeue_outbox
-- An operator's retry: dead -> pending, due now, attempts start again.
UPDATE reply_outbox
SET status = 'pending', attempts = 0, next_attempt_at = now(), lease_owner = NULL,
    lease_expires_at = NULL, updated_at = now()
WHERE id = %(id)s AND status = 'dead' /* AND scope */
RETURNING id, tenant_id, job_id, channel, recipient, body, dedupe_key, status, attempts,
       next_attempt_at, lease_owner, lease_expires_at, provider_message_id, error_class,
       created_at, updated_at, sent_at;

-- name: outbox_stats
-- Sent rows are left out: the table keeps them, and counting them would grow with history.
SELECT status, count(*),
       (EXTRACT(EPOCH FROM now()) - EXTRACT(EPOCH FROM min(created_at)))::float8
FROM reply_outbox
WHERE status IN ('pending', 'sending', 'dead')
  /* AND scope */
GROUP BY status;

-- name: full_tenants
SELECT l.tenant_id
FROM unnest(%(tenants)s::text[], %(limits)s::int[]) AS l(tenant_id, max_running)
WHERE (SELECT count(*) FROM background_jobs j
       WHERE j.status = 'running' AND j.tenant_id = l.tenant_id /* AND scope */) >= l.max_running;

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
          /* AND scope */
        ORDER BY b.scheduled_at, b.id
        LIMIT %(limit)s) AS h
    WHERE priorities.p IS NOT NULL  -- the recursion's last row: no priority, no descent
)
SELECT id FROM heads ORDER BY least(aged, max(priority) OVER ()) DESC, scheduled_at, id
LIMIT %(limit)s;

-- name: limited_tenants_of_jobs
SELECT DISTINCT tenant_id FROM background_jobs
WHERE id = ANY(%(ids)s::bigint[]) AND tenant_id = ANY(%(tenants)s::text[])
  /* AND scope */
ORDER BY tenant_id;

-- name: lock_tenant_claims
SELECT pg_advisory_xact_lock(1735355500, hashtext(%(tenant_id)s));

-- name: free_queue_slots
-- Each capped queue (worker.queue_limits) and its room: max_running minus its running jobs.
SELECT l.queue, l.max_running - (SELECT count(*) FROM background_jobs j
                                 WHERE j.status = 'running' AND j.queue = l.queue /* AND scope(j) */)
FROM unnest(%(queues)s::text[], %(limits)s::int[]) AS l(queue, max_running);

-- name: capped_queues_of_jobs
SELECT DISTINCT queue FROM background_jobs
WHERE id = ANY(%(ids)s::bigint[]) AND queue = ANY(%(queues)s::text[])
  /* AND scope */
ORDER BY queue;

-- name: lock_queue_claims
SELECT pg_advisory_xact_lock(1735355501, hashtext(%(queue)s));

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
      /* AND scope */
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
                                   WHERE x.status = 'running' AND x.queue = r.queue /* AND scope(x) */)
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
          /* AND scope(b) */
        ORDER BY b.scheduled_at, b.id
        LIMIT %(limit)s) AS h
    WHERE priorities.p IS NOT NULL  -- the recursion's last row: no priority, no descent
)
SELECT id FROM heads
ORDER BY least(aged, max(priority) OVER (PARTITION BY queue)) DESC, scheduled_at, id
LIMIT %(limit)s;

-- name: running_by_tenant
SELECT tenant_id, count(*) FROM background_jobs WHERE status = 'running' /* AND scope */
GROUP BY tenant_id;

-- name: database_now
SELECT now();

-- name: list_periodic_slots
SELECT name, last_slot FROM gochatd_periodic_slots ORDER BY name;

-- name: claim_periodic_slot
-- Moves the slot record forward; returns a row only for the one caller that moved it.
INSERT INTO gochatd_periodic_slots AS s (name, last_slot) VALUES (%(name)s, %(slot)s)
ON CONFLICT (name) DO UPDATE SET last_slot = EXCLUDED.last_slot, updated_at = now()
WHERE s.last_slot < EXCLUDED.last_slot
RETURNING s.name;

-- name: route_version
-- Tenant routes (gochatd migrate; store/router.py): polled by every daemon.
SELECT coalesce(max(version), 0) FROM gochatd_routes;

-- name: list_routes
SELECT tenant_id, state, destination, version FROM gochatd_routes ORDER BY tenant_id;

-- name: ack_routes
-- The migrator's barrier waits until every live daemon has seen its route change.
INSERT INTO gochatd_route_acks (worker_id, version) VALUES (%(worker_id)s, %(version)s)
ON CONFLICT (worker_id) DO UPDATE SET version = excluded.version, acked_at = now();

-- name: forget_route_ack
DELETE FROM gochatd_route_acks WHERE worker_id = %(worker_id)s;

-- name: prune_change_tombstones
-- Tombstones (migration 0007) only matter to a move in progress, or to a rollback's check
-- of the destination's own deletes: kept for :older_than_s (longer than any read-only
-- window), and not at all pruned while this database has a route being tracked or frozen.
DELETE FROM gochatd_change_tombstones
WHERE change_seq IN (
    SELECT change_seq FROM gochatd_change_tombstones
    WHERE deleted_at < now() - make_interval(secs => %(older_than_s)s)
      AND NOT EXISTS (SELECT 1 FROM gochatd_routes WHERE state IN ('tracking', 'frozen'))
    ORDER BY change_seq
    LIMIT %(limit)s)
RETURNING change_seq;

-- name: publish_job_types
-- A daemon's handlers' defaults, one row per type (docs/job-types.md): the last writer wins.
-- Items arrive as one JSON array of {job_type, queue, max_attempts, timeout_s}.
INSERT INTO gochatd_job_types (job_type, queue, max_attempts, timeout_s, published_by)
SELECT t.job_type, t.queue, t.max_attempts, t.timeout_s, %(by)s
FROM jsonb_to_recordset(%(types)s::jsonb)
     AS t(job_type text, queue text, max_attempts integer, timeout_s float8)
ON CONFLICT (job_type) DO UPDATE
SET queue = excluded.queue, max_attempts = excluded.max_attempts,
    timeout_s = excluded.timeout_s, published_by = excluded.published_by, updated_at = now()
RETURNING job_type;

-- name: list_job_types
SELECT job_type, queue, max_attempts, timeout_s, updated_at, published_by
FROM gochatd_job_types
ORDER BY job_type;

-- The fleet dashboard (migration 0012; docs/operations.md, "The fleet" and "Throughput
-- charts"). Not tenant data: the routed store runs these on the home database only.

-- name: waiting_job_types
-- Due waiting jobs per (job type, queue), with the oldest one's age: compared with the live
-- daemons' handler sets (fleet rows) for GET /v1/job-types and gochatd_jobs_without_handler.
SELECT job_type, queue, count(*),
       (EXTRACT(EPOCH FROM now()) - EXTRACT(EPOCH FROM min(scheduled_at)))::float8
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND scheduled_at <= now()
  /* AND scope */
GROUP BY job_type, queue;

-- name: add_job_counts
-- A daemon's finishes since its last flush (loops/stats.py), added to the current minute by
-- the database clock. Items arrive as one JSON array of {queue, job_type, completed, failed,
-- retried}, one per (queue, job_type).
INSERT INTO gochatd_job_counts AS c (minute, queue, job_type, completed, failed, retried)
SELECT date_trunc('minute', now()), t.queue, t.job_type, t.completed, t.failed, t.retried
FROM jsonb_to_recordset(%(counts)s::jsonb)
     AS t(queue text, job_type text, completed bigint, failed bigint, retried bigint)
ON CONFLICT (minute, queue, job_type) DO UPDATE
SET completed = c.completed + excluded.completed, failed = c.failed + excluded.failed,
    retried = c.retried + excluded.retried;

-- name: job_counts
-- The last :minutes minutes (the current one included), summed per minute and per key:
-- 'all', or the queue or the job type (:by). Minutes without a row are not returned.
SELECT c.minute,
       CASE %(by)s::text WHEN 'queue' THEN c.queue WHEN 'job_type' THEN c.job_type
            ELSE 'all' END AS key,
       sum(c.completed), sum(c.failed), sum(c.retried)
FROM gochatd_job_counts AS c
WHERE c.minute > date_trunc('minute', now()) - make_interval(mins => %(minutes)s)
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: prune_job_counts
DELETE FROM gochatd_job_counts
WHERE (minute, queue, job_type) IN (
    SELECT minute, queue, job_type FROM gochatd_job_counts
    WHERE minute < now() - make_interval(secs => %(older_than_s)s)
    LIMIT %(limit)s)
RETURNING minute;

-- name: upsert_daemon
-- A daemon's heartbeat (loops/fleet.py): its row, stamped with the database clock; a new
-- process under the same id (another pid or host) starts again. Returns the operator's
-- pending request for it, if any, with the sequence number its clearing must match.
INSERT INTO gochatd_daemons AS d (id, host, pid, mode, version, concurrency, in_flight,
                                  paused, draining, job_types)
VALUES (%(id)s, %(host)s, %(pid)s, %(mode)s, %(version)s, %(concurrency)s, %(in_flight)s,
        %(paused)s, %(draining)s, %(handlers)s)
ON CONFLICT (id) DO UPDATE
SET host = excluded.host, pid = excluded.pid, mode = excluded.mode,
    version = excluded.version, concurrency = excluded.concurrency,
    in_flight = excluded.in_flight, paused = excluded.paused, draining = excluded.draining,
    job_types = excluded.job_types,
    started_at = CASE WHEN d.pid = excluded.pid AND d.host = excluded.host
                      THEN d.started_at ELSE now() END,
    last_heartbeat = now()
RETURNING requested, requested_seq;

-- name: list_daemons
-- Every daemon row, with the seconds since its heartbeat by the database clock.
SELECT id, host, pid, mode, version, concurrency, in_flight, paused, draining, started_at,
       last_heartbeat, requested, extract(epoch FROM now() - last_heartbeat)::float8,
       job_types
FROM gochatd_daemons
ORDER BY id;

-- name: request_daemon
-- An operator asks one daemon to drain, pause or resume; a newer request replaces one the
-- daemon has not applied yet.
UPDATE gochatd_daemons SET requested = %(action)s, requested_seq = requested_seq + 1
WHERE id = %(id)s
RETURNING id;

-- name: clear_daemon_request
-- The daemon applied request number :seq: cleared unless a newer one arrived meanwhile.
UPDATE gochatd_daemons SET requested = NULL
WHERE id = %(id)s AND requested_seq = %(seq)s AND requested IS NOT NULL
RETURNING id;

-- name: remove_daemon
DELETE FROM gochatd_daemons WHERE id = %(id)s RETURNING id;

-- name: prune_daemons
-- Rows of daemons that stopped without removing theirs (killed, lost), after a while.
DELETE FROM gochatd_daemons
WHERE last_heartbeat < now() - make_interval(secs => %(older_than_s)s)
RETURNING id;

-- ---------------------------------------------------------------------------------------
-- Per-attempt history (daemon/store/attempts.py; docs/operations.md). finish_jobs,
-- finish_jobs_with_replies and reap_expired_leases write it.

-- name: list_job_attempts
-- A completed run has no job_attempts row (finish_jobs writes none: the cheap success); it
-- is the job's own row while the job stays completed: fence, claim time, owner, completion.
SELECT attempt, started_at, finished_at, worker, outcome, error_class, error FROM (
    SELECT attempt, started_at, finished_at, worker, outcome, error_class, error
    FROM job_attempts WHERE job_id = %(id)s
    UNION ALL
    SELECT j.fence, j.locked_at, j.completed_at, j.locked_by, 'completed', NULL, NULL
    FROM background_jobs AS j
    WHERE j.id = %(id)s AND j.status = 'completed'
      AND NOT EXISTS (SELECT 1 FROM job_attempts AS o  -- a row written before this change
                      WHERE o.job_id = j.id AND o.attempt = j.fence)
) AS runs
ORDER BY attempt DESC LIMIT %(limit)s;

-- Job controls (store/controls.py; docs/operations.md, "Job controls"): an operator's
-- delete, discard and run now, one job or a bulk batch. Each write is guarded by the
-- statuses its control acts on (model.ACTION_STATUSES): a job that moved on since it was
-- read (claimed, finished, changed by another operator) is left as it is.

-- name: delete_job
-- An operator's delete: any status but running (cancel a running job first). The
-- job's reply_outbox rows stay: replies a completion wrote are messages of their own.
DELETE FROM background_jobs
WHERE id = %(id)s AND status IN ('queued', 'retrying', 'completed', 'dead', 'cancelled')
  /* AND scope */
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
SET scheduled_at = now(), dispatched_at = NULL, updated_at = now()
WHERE id = %(id)s AND status IN ('queued', 'retrying') AND waits_on = 0 AND scheduled_at > now()
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
WHERE status = ANY(%(statuses)s::text[])
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(status)s::text IS NULL OR status = %(status)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
  AND (%(tenant_id)s::text IS NULL OR tenant_id = %(tenant_id)s)
  AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s)
  AND id > %(after_id)s
  /* AND scope */
ORDER BY id
LIMIT %(limit)s;

-- name: requeue_jobs
-- Bulk retry: requeue_job for a batch of picked ids.
UPDATE background_jobs
SET status = 'queued', attempts = 0, waits_on = 0, scheduled_at = now(), failed_at = NULL,
    dispatched_at = NULL, cancel_requested = false, updated_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('dead', 'cancelled')
  AND (%(status)s::text IS NULL OR status = %(status)s)
  /* AND scope */
RETURNING id;

-- name: cancel_waiting_jobs
-- Bulk cancel, waiting jobs: cancel_waiting_job for a batch.
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('queued', 'retrying')
  AND (%(status)s::text IS NULL OR status = %(status)s)
  /* AND scope */
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
  /* AND scope */
RETURNING id;

-- name: delete_jobs
-- Bulk delete: delete_job for a batch.
DELETE FROM background_jobs
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('queued', 'retrying', 'completed', 'dead', 'cancelled')
  AND (%(status)s::text IS NULL OR status = %(status)s)
  /* AND scope */
RETURNING id;

-- name: discard_jobs
-- Bulk discard: discard_job for a batch.
UPDATE background_jobs
SET status = 'dead', error_class = 'discarded', last_error = 'discarded by operator',
    failed_at = now(), dispatched_at = NULL, cancel_requested = false, updated_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('queued', 'retrying')
  AND (%(status)s::text IS NULL OR status = %(status)s)
  /* AND scope */
RETURNING id;

-- name: run_jobs_now
-- Bulk run now: run_job_now for a batch.
UPDATE background_jobs
SET scheduled_at = now(), dispatched_at = NULL, updated_at = now()
WHERE id = ANY(%(ids)s::bigint[])
  AND status IN ('queued', 'retrying')
  AND waits_on = 0 AND scheduled_at > now()
  AND (%(status)s::text IS NULL OR status = %(status)s)
  /* AND scope */
RETURNING id;

-- name: lock_queue_rate_window
-- A rate-limited claim's first statement (worker.queue_rates, docs/rate-limits.md): lock
-- the queue's window row (created on first use) for the rest of the transaction and say
-- how many jobs already started in the current window of the database clock, and how many
-- seconds the window has left. A row whose window is newer than this transaction's now()
-- (it waited for the lock) counts as full: its claims would land in a past window. A row
-- of another period (a reload changed the rate) starts a fresh window.
INSERT INTO queue_rate_windows AS w (queue, period_s, window_start, used)
VALUES (%(queue)s, %(period_s)s, 0, 0)
ON CONFLICT (queue) DO UPDATE SET used = w.used
RETURNING
    CASE WHEN w.period_s <> %(period_s)s::bigint THEN 0
         WHEN w.window_start = floor(extract(epoch FROM now()) / %(period_s)s::bigint)::bigint
                               * %(period_s)s::bigint THEN w.used
         WHEN w.window_start > extract(epoch FROM now()) THEN %(count)s::bigint
         ELSE 0 END AS used,
    ((floor(extract(epoch FROM now()) / %(period_s)s::bigint) + 1) * %(period_s)s::bigint
     - extract(epoch FROM now()))::float8 AS window_left_s;

-- name: charge_queue_rate_window
-- A rate-limited claim's last statement: add the jobs it claimed to the window of their
-- locked_at (a new window starts from them).
UPDATE queue_rate_windows
SET used = CASE WHEN period_s = %(period_s)s AND window_start = %(window_start)s
                THEN used + %(n)s ELSE %(n)s END,
    period_s = %(period_s)s, window_start = %(window_start)s
WHERE queue = %(queue)s;

-- Dependent jobs and batches (docs/workflows.md, migration 0019) ---------------------------

-- name: lock_dependencies
-- enqueue_workflow: the jobs a new job will depend on, locked until its transaction ends
-- (a dependency that finishes meanwhile waits, then sees has_dependents and resolves it).
SELECT id, tenant_id, status FROM background_jobs
WHERE id = ANY(%(ids)s::bigint[])
ORDER BY id
FOR UPDATE;

-- name: insert_dependencies
-- One edge per dependency; an already final one is recorded as resolved.
INSERT INTO gochatd_job_dependencies
    (tenant_id, job_id, depends_on_id, run_if_failed, resolved_status)
SELECT %(tenant_id)s, %(job_id)s, d.id, %(run_if_failed)s, d.status
FROM unnest(%(ids)s::bigint[], %(statuses)s::text[]) AS d(id, status)
ON CONFLICT DO NOTHING;

-- name: hold_job
-- A new job's place in its workflow: the open dependencies it waits on (due 9999-12-31
-- while any is open), its batch, or cancelled at once when a dependency already failed.
UPDATE background_jobs
SET waits_on = %(waits_on)s, batch_id = %(batch_id)s,
    status = CASE WHEN %(failed)s::text IS NULL THEN status ELSE 'cancelled' END,
    error_class = CASE WHEN %(failed)s::text IS NULL THEN error_class
                       ELSE 'dependency_failed' END,
    last_error = CASE WHEN %(failed)s::text IS NULL THEN last_error ELSE %(failed)s END,
    updated_at = now()
WHERE id = %(id)s
RETURNING id, tenant_id, job_type, queue, payload, status, priority, attempts, max_attempts,
       scheduled_at, created_at, updated_at, fence, idempotency_key, locked_by, locked_at,
       lease_expires_at, last_error, error_class, failed_at, completed_at, dispatched_at,
       traceparent, cancel_requested;

-- name: mark_has_dependents
UPDATE background_jobs SET has_dependents = true
WHERE id = ANY(%(ids)s::bigint[]) AND NOT has_dependents;

-- name: insert_batch
INSERT INTO gochatd_batches (tenant_id, size) VALUES (%(tenant_id)s, %(size)s)
RETURNING id;

-- name: set_batch_callbacks
UPDATE gochatd_batches SET on_success_id = %(on_success_id)s, on_complete_id = %(on_complete_id)s
WHERE id = %(id)s;

-- name: get_job_links
-- A job's place in a workflow: how many dependencies it still waits on, the batch it is a
-- member of, and the batch it is a callback of (a callback carries no batch_id).
SELECT j.waits_on, j.batch_id,
       (SELECT min(b.id) FROM gochatd_batches AS b
        WHERE b.on_success_id = j.id OR b.on_complete_id = j.id)
FROM background_jobs AS j WHERE j.id = %(id)s;

-- name: list_dependencies
-- A job's dependencies in id order, each with its status now and its result (JSON text);
-- a pruned dependency has no row but keeps the status its edge recorded; results only when
-- asked (a callback may wait on 1,000 members).
SELECT d.depends_on_id, coalesce(j.status, d.resolved_status, 'cancelled'), d.run_if_failed,
       d.resolved_status, CASE WHEN %(with_results)s THEN j.result::text END
FROM gochatd_job_dependencies AS d
LEFT JOIN background_jobs AS j ON j.id = d.depends_on_id
WHERE d.job_id = %(id)s
ORDER BY d.depends_on_id;

-- name: get_batch
SELECT id, tenant_id, size, on_success_id, on_complete_id, created_at
FROM gochatd_batches WHERE id = %(id)s;

-- name: count_batch_members
SELECT status, count(*) FROM background_jobs WHERE batch_id = %(id)s GROUP BY status;
