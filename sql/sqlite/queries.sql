-- Named queries for the SQLite store. Each block starts with "-- name: <name>".
-- {now} is SQLite's clock in epoch seconds; lists arrive as JSON arrays.

-- name: enqueue_job
-- queue and max_attempts left out (NULL): the values a daemon published for the type, else
-- 'default' and 25 (the fragments below).
INSERT INTO background_jobs
    (tenant_id, job_type, queue, payload, priority, max_attempts, scheduled_at,
     idempotency_key, traceparent, dispatched_at, change_seq)
SELECT :tenant_id, :job_type, {_published_queue}, :payload, :priority,
       {_published_max_attempts}, due.at, :idempotency_key, :traceparent,
       CASE WHEN :dispatch_now AND due.at <= {now} THEN {now} END, {_next_change}
FROM (SELECT CAST(COALESCE(:scheduled_at, {now} + :delay_s) AS REAL) AS at) AS due
WHERE true
ON CONFLICT (tenant_id, idempotency_key) DO NOTHING
RETURNING {job_columns};

-- name: _published_queue
-- A fragment: the queue given, else the one a daemon published for the type (docs/job-types.md),
-- else 'default'. COALESCE evaluates the lookup only when no queue was given.
COALESCE(:queue, (SELECT t.queue FROM gochatd_job_types AS t WHERE t.job_type = :job_type),
         'default')

-- name: _published_max_attempts
-- A fragment: as _published_queue, for max_attempts (else 25).
COALESCE(:max_attempts,
         (SELECT t.max_attempts FROM gochatd_job_types AS t WHERE t.job_type = :job_type), 25)

-- name: find_idempotent_job
SELECT {job_columns}, (job_type = :job_type AND payload = :payload) AS same_job
FROM background_jobs
WHERE tenant_id = :tenant_id AND idempotency_key = :idempotency_key;

-- name: _in_tenant_scope
-- A fragment: the row's tenant is one this store acts on (SqlJobStore.tenant_scope: during
-- a live tenant migration each database serves only the tenants routed to it). The store
-- passes scope_only and scope_tenants (a JSON array) to every query that includes it;
-- all_except(()) is every tenant. Compared as a value, not a bare IN, so that the planner
-- never takes it for an index term: the indexes stay the ones the query uses without it.
((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)

-- name: _next_change
-- A fragment: the change number this statement's rows take (change tracking, migration
-- 0007). The hot statements set it themselves, which spares each row the triggers' own
-- stamping UPDATE (a second write of the row); a trigger then moves the counter up to it.
(SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)

-- name: claim_jobs
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = {now},
    lease_expires_at = {now} + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = {now}, change_seq = {_next_change}
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND scheduled_at <= {now}
  AND {_in_tenant_scope}
RETURNING {job_columns};

-- name: claim_delivered_jobs
-- Streams mode: the delivered ids, like claim_jobs, in the queues whose waiting jobs all
-- have priority 0; in the others nothing (the caller runs claim_due_jobs for them).
-- Postgres' query says why.
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = {now},
    lease_expires_at = {now} + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = {now}, change_seq = {_next_change}
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('queued', 'retrying')
  AND scheduled_at <= {now}
  AND queue NOT IN (
      SELECT q.value FROM json_each(:queues) AS q
      WHERE EXISTS (SELECT 1 FROM background_jobs AS b
                    WHERE b.queue = q.value AND b.status IN ('queued', 'retrying')
                      AND b.priority > 0)
         OR EXISTS (SELECT 1 FROM background_jobs AS b
                    WHERE b.queue = q.value AND b.status IN ('queued', 'retrying')
                      AND b.priority < 0))
  AND {_in_tenant_scope}
RETURNING {job_columns};

-- name: _waiting_priorities
-- A fragment (a recursive CTE): the distinct priorities of :queue's waiting jobs, lowest
-- first, then a NULL row; one min() on background_jobs_claimable_idx per priority.
priorities(p) AS (
    SELECT (SELECT min(priority) FROM background_jobs
            WHERE queue = :queue AND status IN ('queued', 'retrying'))
    UNION ALL
    SELECT (SELECT min(b.priority) FROM background_jobs AS b
            WHERE b.queue = :queue AND b.status IN ('queued', 'retrying')
              AND b.priority > priorities.p)
    FROM priorities WHERE priorities.p IS NOT NULL
)

-- name: _ranked_due_ids
-- A fragment: the ids of :queue's first :limit due jobs in the rule's order
-- (docs/priority.md): the first :limit of each priority by due time (index order), then the
-- best of those by due time minus priority * aging_s. Tenants in :skip_tenants are left out.
SELECT b.id FROM priorities JOIN background_jobs AS b
  ON b.id IN (SELECT h.id FROM background_jobs AS h
              WHERE h.queue = :queue AND h.status IN ('queued', 'retrying')
                AND h.priority = priorities.p AND h.scheduled_at <= {now}
                AND h.tenant_id NOT IN (SELECT value FROM json_each(:skip_tenants))
                AND {_in_tenant_scope}
              ORDER BY h.scheduled_at, h.id
              LIMIT :limit)
ORDER BY b.scheduled_at - b.priority * :aging_s, b.scheduled_at, b.id
LIMIT :limit

-- name: claim_due_jobs
WITH RECURSIVE {_waiting_priorities}
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = {now},
    lease_expires_at = {now} + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = {now}, change_seq = {_next_change}
WHERE id IN ({_ranked_due_ids})
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
                       THEN u.error_class END,  -- a completion clears the error
    last_error = CASE WHEN u.status IN ('retrying', 'dead', 'cancelled')
                      THEN u.last_error END,
    lease_expires_at = NULL, dispatched_at = NULL, cancel_requested = 0, updated_at = {now},
    change_seq = {_next_change}
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
  AND {_in_tenant_scope}
RETURNING background_jobs.id;

-- name: extend_leases
UPDATE background_jobs
SET lease_expires_at = {now} + :lease_s, change_seq = {_next_change}
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS fence
      FROM json_each(:leases)) AS u
WHERE background_jobs.id = u.id AND background_jobs.fence = u.fence
  AND background_jobs.locked_by = :owner AND +background_jobs.status = 'running'
  AND {_in_tenant_scope}
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
    cancel_requested = 0, updated_at = {now}, change_seq = {_next_change}
WHERE id IN (SELECT id FROM background_jobs
             WHERE status = 'running'
               AND ((lease_expires_at < {now}
                     AND lease_expires_at >= coalesce({now} - :expired_within_s, -1e308))
                    OR (id > :created_after_id AND lease_expires_at < {now})
                    OR lease_expires_at IS NULL)
               AND {_in_tenant_scope}
             ORDER BY lease_expires_at LIMIT :limit)
RETURNING id, job_type, queue, tenant_id, status;

-- name: dispatch_due_jobs
UPDATE background_jobs SET dispatched_at = {now}, change_seq = {_next_change}
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL AND scheduled_at <= {now}
      AND queue IN (SELECT value FROM json_each(:queues))
      AND {_in_tenant_scope}
    ORDER BY scheduled_at, id
    LIMIT :limit)
RETURNING id, job_type, queue, tenant_id;

-- name: redispatch_stale_jobs
UPDATE background_jobs SET dispatched_at = {now}, change_seq = {_next_change}
WHERE id IN (
    SELECT id FROM background_jobs
    WHERE queue = :queue AND status IN ('queued', 'retrying') AND scheduled_at <= {now}
      AND dispatched_at < {now} - :older_than_s
      AND dispatched_at >= coalesce({now} - :dispatched_within_s, -1e308)
      AND {_in_tenant_scope}
    ORDER BY dispatched_at, id
    LIMIT :limit)
RETURNING id, job_type, queue, tenant_id;

-- name: next_undispatched_in_s
SELECT min(scheduled_at) - {now}
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND dispatched_at IS NULL
  AND queue IN (SELECT value FROM json_each(:queues))
  AND {_in_tenant_scope};

-- name: next_due_in_s
SELECT min(scheduled_at) - {now}
FROM background_jobs
WHERE status IN ('queued', 'retrying') AND queue IN (SELECT value FROM json_each(:queues))
  AND {_in_tenant_scope};

-- name: newest_job_id
SELECT coalesce(max(id), 0) FROM background_jobs;

-- name: get_job
SELECT {job_columns} FROM background_jobs WHERE id = :id AND {_in_tenant_scope};

-- name: list_jobs
SELECT {job_columns} FROM background_jobs
WHERE (:status IS NULL OR status = :status)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:job_type IS NULL OR job_type = :job_type)
  AND (:after_id IS NULL OR id > :after_id)
  AND {_in_tenant_scope}
ORDER BY id
LIMIT :limit;

-- name: retry_job
UPDATE background_jobs
SET status = 'queued', attempts = 0, scheduled_at = {now}, failed_at = NULL,
    dispatched_at = NULL, cancel_requested = 0, updated_at = {now}
WHERE id = :id AND status IN ('dead', 'cancelled')
  AND {_in_tenant_scope}
RETURNING {job_columns};

-- name: cancel_waiting_job
UPDATE background_jobs
SET status = 'cancelled', error_class = 'cancelled', last_error = 'cancelled by operator',
    dispatched_at = NULL, updated_at = {now}
WHERE id = :id AND status IN ('queued', 'retrying')
  AND {_in_tenant_scope}
RETURNING {job_columns};

-- name: request_cancel_running_job
UPDATE background_jobs SET cancel_requested = 1, updated_at = {now}
WHERE id = :id AND status = 'running' AND {_in_tenant_scope}
RETURNING {job_columns};

-- name: count_jobs_by_status
SELECT status, count(*) FROM background_jobs WHERE {_in_tenant_scope} GROUP BY status;

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
  AND {_in_tenant_scope}
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
      AND {_in_tenant_scope}
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
      AND updated_at < {now} - :older_than_s
      AND {_in_tenant_scope}
    ORDER BY updated_at
    LIMIT :limit)
RETURNING id;

-- name: count_prunable_jobs
SELECT count(*) FROM background_jobs
WHERE status IN ('completed', 'dead', 'cancelled')
  AND status = :status
  AND updated_at < {now} - :older_than_s
  AND {_in_tenant_scope};

-- ---------------------------------------------------------------------------------------
-- Reply outbox (daemon/store/outbox.py, daemon/loops/outbox.py). {outbox_columns} is the
-- column list OUTBOX_COLUMNS decodes. Sender writes are fenced by (lease_owner, attempts).

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
SET status = 'sending', lease_owner = :owner, lease_expires_at = {now} + :lease_s,
    attempts = attempts + 1, updated_at = {now}
WHERE id IN (
    SELECT id FROM reply_outbox
    WHERE status = 'pending' AND next_attempt_at <= {now}
      AND channel IN (SELECT value FROM json_each(:channels))
      AND {_in_tenant_scope}
    ORDER BY next_attempt_at, id
    LIMIT :limit)
RETURNING {outbox_columns};

-- name: complete_outbox
UPDATE reply_outbox
SET status = 'sent', sent_at = {now}, provider_message_id = :provider_message_id,
    error_class = NULL, lease_expires_at = NULL, updated_at = {now}
WHERE id = :id AND status = 'sending' AND lease_owner = :owner AND attempts = :attempt
  AND {_in_tenant_scope}
RETURNING {now} - created_at;

-- name: retry_outbox
UPDATE reply_outbox
SET status = 'pending', next_attempt_at = {now} + :delay_s, error_class = :error_class,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = {now}
WHERE id = :id AND status = 'sending' AND lease_owner = :owner AND attempts = :attempt
  AND {_in_tenant_scope}
RETURNING id;

-- name: fail_outbox
UPDATE reply_outbox
SET status = 'dead', error_class = :error_class, lease_expires_at = NULL, updated_at = {now}
WHERE id = :id AND status = 'sending' AND lease_owner = :owner AND attempts = :attempt
  AND {_in_tenant_scope}
RETURNING id;

-- name: reap_outbox_leases
UPDATE reply_outbox
SET status = CASE WHEN attempts >= :max_attempts THEN 'dead' ELSE 'pending' END,
    error_class = 'lease_expired', next_attempt_at = {now}, lease_owner = NULL,
    lease_expires_at = NULL, updated_at = {now}
WHERE id IN (
    SELECT id FROM reply_outbox
    WHERE status = 'sending' AND (lease_expires_at < {now} OR lease_expires_at IS NULL)
      AND {_in_tenant_scope}
    ORDER BY lease_expires_at LIMIT :limit)
RETURNING id;

-- name: get_outbox
SELECT {outbox_columns} FROM reply_outbox WHERE id = :id AND {_in_tenant_scope};

-- name: list_outbox
SELECT {outbox_columns} FROM reply_outbox
WHERE (:status IS NULL OR status = :status)
  AND (:tenant_id IS NULL OR tenant_id = :tenant_id)
  AND (:channel IS NULL OR channel = :channel)
  AND (:after_id IS NULL OR id > :after_id)
  AND {_in_tenant_scope}
ORDER BY id
LIMIT :limit;

-- name: requeue_outbox
UPDATE reply_outbox
SET status = 'pending', attempts = 0, next_attempt_at = {now}, lease_owner = NULL,
    lease_expires_at = NULL, updated_at = {now}
WHERE id = :id AND status = 'dead' AND {_in_tenant_scope}
RETURNING {outbox_columns};

-- name: outbox_stats
SELECT status, count(*), {now} - min(created_at)
FROM reply_outbox
WHERE status IN ('pending', 'sending', 'dead')
  AND {_in_tenant_scope}
GROUP BY status;

-- ------------------------------------------------------------------------------------------
-- gochatd bench only (daemon/bench/): probes of a scratch database, never run by the daemon.

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
           (i / 20) % 20, {now} - (:total - i) * 0.05
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
       CASE WHEN s = 18 THEN {now} + 60.0 ELSE t END,
       CASE WHEN s = 19 THEN 'bench-worker' END,
       CASE WHEN s < 14 OR s = 19 THEN t + 0.2 END,
       CASE WHEN s = 19 THEN {now} + 300.0 END,
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
    SELECT k, k * 10 + k % 10, k % 100, {now} - (:total - k * 10) * 0.05 FROM n
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
VALUES ('hourly-digest', {now} - 600.0), ('nightly-cleanup', {now} - 3600.0);

-- name: bench_migrate_finish_jobs
-- Live writes during a move: the :count oldest queued or running jobs complete.
UPDATE background_jobs
SET status = 'completed', attempts = attempts + 1, fence = fence + 1, locked_by = NULL,
    lease_expires_at = NULL, completed_at = {now}, updated_at = {now}
WHERE id IN (SELECT id FROM background_jobs WHERE status IN ('queued', 'running')
             ORDER BY id LIMIT :count);

-- name: bench_migrate_prune_jobs
-- Live deletes during a move (retention): the :count oldest completed jobs; each leaves a
-- tombstone.
DELETE FROM background_jobs
WHERE id IN (SELECT id FROM background_jobs WHERE status = 'completed' ORDER BY id LIMIT :count);

-- name: bench_migrate_untracked
-- The baseline the tracking cost is measured against: the 0007 triggers (numbering and
-- read-only guard) removed from a scratch database. Run as a script.
DROP TRIGGER IF EXISTS background_jobs_readonly_insert;
DROP TRIGGER IF EXISTS background_jobs_readonly_update;
DROP TRIGGER IF EXISTS background_jobs_readonly_delete;
DROP TRIGGER IF EXISTS background_jobs_change_insert;
DROP TRIGGER IF EXISTS background_jobs_change_update;
DROP TRIGGER IF EXISTS background_jobs_change_numbered_insert;
DROP TRIGGER IF EXISTS background_jobs_change_numbered_update;
DROP TRIGGER IF EXISTS background_jobs_change_delete;
DROP TRIGGER IF EXISTS reply_outbox_readonly_insert;
DROP TRIGGER IF EXISTS reply_outbox_readonly_update;
DROP TRIGGER IF EXISTS reply_outbox_readonly_delete;
DROP TRIGGER IF EXISTS reply_outbox_change_insert;
DROP TRIGGER IF EXISTS reply_outbox_change_update;
DROP TRIGGER IF EXISTS reply_outbox_change_numbered_insert;
DROP TRIGGER IF EXISTS reply_outbox_change_numbered_update;
DROP TRIGGER IF EXISTS reply_outbox_change_delete;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_readonly_insert;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_readonly_update;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_readonly_delete;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_change_insert;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_change_update;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_change_numbered_insert;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_change_numbered_update;
DROP TRIGGER IF EXISTS gochatd_queue_pauses_change_delete;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_readonly_insert;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_readonly_update;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_readonly_delete;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_change_insert;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_change_update;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_change_numbered_insert;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_change_numbered_update;
DROP TRIGGER IF EXISTS gochatd_periodic_slots_change_delete;

-- ---------------------------------------------------------------------------------------
-- Per-tenant concurrency (tenants.<id>.max_running), used only when some tenant has a limit.
-- Every claim runs in BEGIN IMMEDIATE, which already serialises claimers; limits arrive as
-- a JSON array of [tenant, max_running].

-- name: full_tenants
SELECT json_extract(l.value, '$[0]') FROM json_each(:limits) AS l
WHERE (SELECT count(*) FROM background_jobs j
       WHERE j.status = 'running' AND j.tenant_id = json_extract(l.value, '$[0]')
         AND {_in_tenant_scope})
      >= json_extract(l.value, '$[1]');

-- name: pick_due_job_ids
-- claim_due_jobs' choice without the claim (tenants already at their cap left out).
WITH RECURSIVE {_waiting_priorities}
{_ranked_due_ids};

-- name: limited_tenants_of_jobs
SELECT DISTINCT tenant_id FROM background_jobs
WHERE id IN (SELECT value FROM json_each(:ids))
  AND tenant_id IN (SELECT value FROM json_each(:tenants))
  AND {_in_tenant_scope}
ORDER BY tenant_id;

-- name: claim_jobs_limited
UPDATE background_jobs
SET status = 'running', locked_by = :owner, locked_at = {now},
    lease_expires_at = {now} + :lease_s,
    fence = fence + 1, attempts = attempts + 1, updated_at = {now}, change_seq = {_next_change}
WHERE id IN (
    SELECT r.id FROM (
        SELECT id, tenant_id, row_number() OVER (
            PARTITION BY tenant_id
            ORDER BY scheduled_at - priority * :aging_s, scheduled_at, id) AS rn
        FROM background_jobs
        WHERE id IN (SELECT value FROM json_each(:ids)) AND status IN ('queued', 'retrying')
          AND scheduled_at <= {now}
          AND {_in_tenant_scope}
    ) AS r
    LEFT JOIN (SELECT json_extract(value, '$[0]') AS tenant_id,
                      json_extract(value, '$[1]') AS max_running
               FROM json_each(:limits)) AS l ON l.tenant_id = r.tenant_id
    WHERE l.max_running IS NULL
       OR r.rn <= l.max_running - (SELECT count(*) FROM background_jobs x
                                   WHERE x.status = 'running' AND x.tenant_id = r.tenant_id))
RETURNING {job_columns};

-- name: pick_limited_due_job_ids
SELECT id FROM background_jobs
WHERE tenant_id IN (SELECT value FROM json_each(:open))
  AND queue IN (SELECT value FROM json_each(:queues))
  AND status IN ('queued', 'retrying') AND scheduled_at <= {now}
  AND {_in_tenant_scope}
ORDER BY scheduled_at - priority * :aging_s, scheduled_at, id
LIMIT :limit;

-- name: running_by_tenant
SELECT tenant_id, count(*) FROM background_jobs WHERE status = 'running' AND {_in_tenant_scope}
GROUP BY tenant_id;

-- name: database_now
SELECT {now};

-- name: list_periodic_slots
SELECT name, last_slot FROM gochatd_periodic_slots ORDER BY name;

-- name: claim_periodic_slot
-- Moves the slot record forward; returns a row only for the one caller that moved it.
INSERT INTO gochatd_periodic_slots AS s (name, last_slot) VALUES (:name, :slot)
ON CONFLICT (name) DO UPDATE SET last_slot = excluded.last_slot, updated_at = {now}
WHERE s.last_slot < excluded.last_slot
RETURNING name;

-- name: enqueue_jobs
-- enqueue_many, once per item inside one transaction: enqueue_job returning only what the
-- database decided (the rest of a new row is the item itself).
INSERT INTO background_jobs
    (tenant_id, job_type, queue, payload, priority, max_attempts, scheduled_at,
     idempotency_key, traceparent, dispatched_at, change_seq)
SELECT :tenant_id, :job_type, {_published_queue}, :payload, :priority,
       {_published_max_attempts}, due.at, :idempotency_key, :traceparent,
       CASE WHEN :dispatch_now AND due.at <= {now} THEN {now} END, {_next_change}
FROM (SELECT CAST(COALESCE(:scheduled_at, {now} + :delay_s) AS REAL) AS at) AS due
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
ON CONFLICT (worker_id) DO UPDATE SET version = excluded.version, acked_at = {now};

-- name: forget_route_ack
DELETE FROM gochatd_route_acks WHERE worker_id = :worker_id;

-- name: prune_change_tombstones
-- As sql/postgres/queries.sql.
DELETE FROM gochatd_change_tombstones
WHERE change_seq IN (
    SELECT change_seq FROM gochatd_change_tombstones
    WHERE deleted_at < {now} - :older_than_s
      AND NOT EXISTS (SELECT 1 FROM gochatd_routes WHERE state IN ('tracking', 'frozen'))
    ORDER BY change_seq
    LIMIT :limit)
RETURNING change_seq;

-- name: publish_job_types
-- As sql/postgres/queries.sql: items arrive as one JSON array of
-- {job_type, queue, max_attempts, timeout_s}; the last writer wins.
INSERT INTO gochatd_job_types (job_type, queue, max_attempts, timeout_s, published_by, updated_at)
SELECT json_extract(value, '$.job_type'), json_extract(value, '$.queue'),
       json_extract(value, '$.max_attempts'), json_extract(value, '$.timeout_s'), :by, {now}
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
