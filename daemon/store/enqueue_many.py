"""``enqueue_many``: a whole batch in one INSERT (PostgreSQL) or one transaction (SQLite).

Idempotency is decided per item, exactly as for a single enqueue: an item whose
(tenant_id, idempotency_key) already names a row returns that row (``created=False``) when the
job type and payload match, and is a conflict otherwise. Conflicts are reported per item
(``EnqueueResult.conflict``) or, with ``raise_on_conflict``, roll the whole batch back and raise
``IdempotencyConflict`` naming the item's index. Two items of one batch with the same key
behave like two enqueues in item order: the first creates the row, the second finds it.

Both functions run on the thread that owns the connection (PostgreSQL: in a transaction the
caller opened), so a batch is one thread hop.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from psycopg import Connection

from gochatd.errors import IdempotencyConflict, StoreUnavailable
from gochatd.model import EnqueueRequest, EnqueueResult, Job, JobStatus
from gochatd.store.db import sqlite_transaction
from gochatd.store.queries import load_queries
from gochatd.store.rows import (
    canonical_json,
    decode_payload,
    epoch_to_datetime,
    job_from_row,
    same_job,
)
from gochatd.store.unique import enqueue_unique

PG = load_queries("postgres")
SQLITE = load_queries("sqlite")
#: An existing row may be deleted (retention) between the INSERT that skipped an item and the
#: SELECT that looks for it; the item is then inserted again, at most this many times.
ATTEMPTS = 3


def _same(value: Any) -> Any:
    return value


def _conflict(request: EnqueueRequest, job: Job, index: int) -> IdempotencyConflict:
    assert request.idempotency_key is not None
    return IdempotencyConflict(request.tenant_id, request.idempotency_key, job.id, index=index)


# -- PostgreSQL ------------------------------------------------------------------------------


def _pg_insert_params(
    requests: Sequence[EnqueueRequest], items: Sequence[int], dispatch_now: bool
) -> dict[str, Any]:
    rows = []
    for i in items:
        r = requests[i]
        rows.append([
            r.tenant_id, r.job_type, r.queue, r.payload, r.priority, r.max_attempts,
            r.scheduled_at.isoformat() if r.scheduled_at else None, float(r.delay_s or 0.0),
            r.idempotency_key, r.traceparent,
        ])
    return {"items": json.dumps(rows, allow_nan=False), "dispatch_now": dispatch_now}


def pg_enqueue_params(request: EnqueueRequest) -> dict[str, Any]:
    """enqueue_job's parameters for one request."""
    return {
        "tenant_id": request.tenant_id,
        "job_type": request.job_type,
        "queue": request.queue,
        "payload": request.payload_json or canonical_json(request.payload),
        "priority": request.priority,
        "max_attempts": request.max_attempts,
        "scheduled_at": request.scheduled_at,
        "delay_s": float(request.delay_s or 0.0),
        "idempotency_key": request.idempotency_key,
        "traceparent": request.traceparent,
        "dispatch_now": request.dispatch_now,
    }


def pg_enqueue_many(
    conn: Connection[Any], requests: Sequence[EnqueueRequest], raise_on_conflict: bool
) -> list[EnqueueResult]:
    """Connection thread, inside a transaction: one INSERT for the batch, then one SELECT for the
    items whose key was already taken. Unique jobs (docs/unique-jobs.md) are written after
    the others, one by one in item order (one round trip or more each)."""
    # The client asks for dispatch per batch; a mixed batch dispatches none up front (the
    # scheduler XADDs them instead).
    dispatch_now = all(r.dispatch_now for r in requests)
    results: list[EnqueueResult | None] = [None] * len(requests)
    plain = [i for i, r in enumerate(requests) if r.unique_key is None]
    if plain:
        _pg_insert_batch(conn, requests, plain, results, dispatch_now, raise_on_conflict)
    if len(plain) < len(requests):
        for index, request in enumerate(requests):
            if request.unique_key is not None:
                results[index] = _pg_unique(conn, request, index, dispatch_now,
                                            raise_on_conflict)
    return _complete(results)


def _pg_insert_batch(conn: Connection[Any], requests: Sequence[EnqueueRequest],
                     pending: list[int], results: list[EnqueueResult | None],
                     dispatch_now: bool, raise_on_conflict: bool) -> None:
    """The items at ``pending`` in one INSERT (and one SELECT for those whose idempotency key
    was taken), their results written into ``results``."""
    for _ in range(ATTEMPTS):
        cur = conn.execute(
            PG["enqueue_jobs"], _pg_insert_params(requests, pending, dispatch_now)
        )
        for row in cur.fetchall():
            index = pending[int(row[0]) - 1]
            results[index] = EnqueueResult(_inserted_job(requests[index], row[1:]), created=True)
        missing = [i for i in pending if results[i] is None]
        if not missing:
            break
        cur = conn.execute(
            PG["find_idempotent_jobs"],
            {
                "ords": missing,
                "tenant_ids": [requests[i].tenant_id for i in missing],
                "idempotency_keys": [requests[i].idempotency_key for i in missing],
                "job_types": [requests[i].job_type for i in missing],
                "payloads": [canonical_json(requests[i].payload) for i in missing],
            },
        )
        for row in cur.fetchall():
            index, job = int(row[0]), job_from_row(row[1:])
            same = same_job(job, requests[index].job_type, requests[index].payload)
            if not same and raise_on_conflict:
                raise _conflict(requests[index], job, index)
            results[index] = EnqueueResult(job, created=False, conflict=not same)
        pending = [i for i in missing if results[i] is None]
        if not pending:
            break


def _pg_unique(conn: Connection[Any], request: EnqueueRequest, index: int,
               dispatch_now: bool, raise_on_conflict: bool) -> EnqueueResult:
    params = {**pg_enqueue_params(request), "dispatch_now": dispatch_now}
    result = enqueue_unique(lambda q, p: conn.execute(q, p).fetchone(), PG, request, params,
                            job_from_row)
    if result.conflict and raise_on_conflict:
        raise _conflict(request, result.job, index)
    return result


def _inserted_job(
    request: EnqueueRequest, row: Sequence[Any], to_time: Callable[[Any], Any] = _same
) -> Job:
    """A new row from its item plus what the database decided (``enqueue_jobs`` returns id,
    payload, scheduled_at, created_at, updated_at, dispatched_at, queue, max_attempts: the
    last two are the type's published defaults when the item left them out): decoding all
    24 columns of every row would cost more than the INSERT."""
    return Job(
        id=int(row[0]), tenant_id=request.tenant_id, job_type=request.job_type,
        queue=str(row[6]), payload=decode_payload(row[1]), status=JobStatus.QUEUED,
        priority=request.priority, attempts=0, max_attempts=int(row[7]),
        scheduled_at=to_time(row[2]), created_at=to_time(row[3]), updated_at=to_time(row[4]),
        idempotency_key=request.idempotency_key, dispatched_at=to_time(row[5]),
        traceparent=request.traceparent,
    )


def _complete(results: list[EnqueueResult | None]) -> list[EnqueueResult]:
    done = [r for r in results if r is not None]
    if len(done) != len(results):
        raise StoreUnavailable(f"enqueue_many raced with deletion {ATTEMPTS} times")
    return done


# -- SQLite ----------------------------------------------------------------------------------


def sqlite_enqueue_params(request: EnqueueRequest) -> dict[str, Any]:
    return {
        "tenant_id": request.tenant_id,
        "job_type": request.job_type,
        "queue": request.queue,
        "payload": request.payload_json or canonical_json(request.payload),
        "priority": request.priority,
        "max_attempts": request.max_attempts,
        "scheduled_at": request.scheduled_at.timestamp() if request.scheduled_at else None,
        "delay_s": float(request.delay_s or 0.0),
        "idempotency_key": request.idempotency_key,
        "traceparent": request.traceparent,
        "dispatch_now": request.dispatch_now,
    }


def sqlite_enqueue_many(
    conn: sqlite3.Connection,
    requests: Sequence[EnqueueRequest],
    raise_on_conflict: bool,
    to_job: Callable[[Sequence[Any]], Job],
) -> list[EnqueueResult]:
    """Store thread: every item in one ``BEGIN IMMEDIATE`` transaction. In-process statements
    cost microseconds, so one per item is as fast as a set-based INSERT and maps exactly."""
    insert, find = SQLITE["enqueue_jobs"], SQLITE["find_idempotent_job"]
    results: list[EnqueueResult] = []
    with sqlite_transaction(conn):
        for index, request in enumerate(requests):
            params = sqlite_enqueue_params(request)
            if request.unique_key is not None:
                result = enqueue_unique(lambda q, p: conn.execute(q, p).fetchone(), SQLITE,
                                        request, params, to_job)
                if result.conflict and raise_on_conflict:
                    raise _conflict(request, result.job, index)
                results.append(result)
                continue
            row = conn.execute(insert, params).fetchone()
            if row is not None:
                results.append(EnqueueResult(
                    _inserted_job(request, row, epoch_to_datetime), created=True
                ))
                continue
            # The whole batch holds the write lock: the row that skipped the insert is there.
            row = conn.execute(find, params).fetchone()
            job = to_job(row)
            same = same_job(job, request.job_type, request.payload)
            if not same and raise_on_conflict:
                raise _conflict(request, job, index)
            results.append(EnqueueResult(job, created=False, conflict=not same))
    return results
