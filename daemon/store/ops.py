"""The job operations as units ``fn(db, ...)``: what ``Client`` and ``SyncClient`` run (the
async store hands each to a connection thread, ``SyncClient`` runs it on a lent connection),
and the writes whose statements differ by dialect (enqueue, the finish, the claims).

Each unit is written once; where the dialects' SQL differs (PostgreSQL's arrays and
single-statement CTEs, SQLite's JSON and ``BEGIN IMMEDIATE``) it says so in one branch.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from gochatd.config.rates import QueueRate
from gochatd.errors import IdempotencyConflict, InvalidTransition, JobNotFound, StoreUnavailable
from gochatd.model import (
    AfterCommit,
    AttemptOutcome,
    ClaimedJob,
    EnqueueRequest,
    EnqueueResult,
    Finish,
    Job,
    JobAttempt,
    JobFilter,
    Lease,
    LeaseState,
    Outcome,
)
from gochatd.outbox.store import reply_rows
from gochatd.store import search
from gochatd.store.attempts import (
    ATTEMPTS_KEPT_PER_JOB,
    applied_attempts,
    sqlite_record_attempts,
)
from gochatd.store.capped_claims import Caps, pg_claim_capped, sqlite_claim_capped
from gochatd.store.db import AfterFinish, Db, PgDb, SqliteDb
from gochatd.store.enqueue_many import (
    pg_enqueue_many,
    pg_enqueue_params,
    sqlite_enqueue_many,
    sqlite_enqueue_params,
)
from gochatd.store.rate_windows import RateLimitedClaim, claim_within_rate
from gochatd.store.rows import head_waited_s, same_job, with_result
from gochatd.store.unique import enqueue_unique

# -- producers -----------------------------------------------------------------------------


def enqueue(db: Db, request: EnqueueRequest, after_commit: AfterCommit | None) -> EnqueueResult:
    """One job (or the one holding its key: ``IdempotencyConflict`` if it differs); then
    ``after_commit`` on the same thread (the client's XADD)."""
    params = (pg_enqueue_params if db.dialect == "postgres" else sqlite_enqueue_params)(request)
    with db.serialised():
        result = insert_one(db, request, params)
        if result.conflict:
            assert request.idempotency_key is not None
            raise IdempotencyConflict(request.tenant_id, request.idempotency_key, result.job.id)
    if after_commit is not None:
        after_commit([result])
    return result


def insert_one(db: Db, request: EnqueueRequest, params: dict[str, Any]) -> EnqueueResult:
    if request.unique_key is not None:
        return enqueue_unique(lambda q, p: _first(db.run(q, dict(p))), db.queries.sql,
                              request, params, db.job)
    for _ in range(3):  # PostgreSQL: the existing row may vanish between the two statements
        rows = db.read("enqueue_job", params)
        if rows:
            return EnqueueResult(db.job(rows[0]), created=True)
        rows = db.read("find_idempotent_job", params)
        if rows:
            job = db.job(rows[0])
            return EnqueueResult(job, created=False,
                                 conflict=not same_job(job, request.job_type, request.payload))
    raise StoreUnavailable("enqueue raced with deletion three times")


def _lite(db: Db) -> sqlite3.Connection:
    assert isinstance(db, SqliteDb)
    return db.conn


def _first(rows: list[Any]) -> Any:
    return rows[0] if rows else None


def enqueue_many(db: Db, requests: Sequence[EnqueueRequest], raise_on_conflict: bool,
                 after_commit: AfterCommit | None) -> list[EnqueueResult]:
    """Every item in one transaction (PostgreSQL: one INSERT; SQLite: one per item)."""
    if isinstance(db, PgDb):
        with db.transaction():
            results = pg_enqueue_many(db.conn, requests, raise_on_conflict)
    else:
        results = sqlite_enqueue_many(_lite(db), requests, raise_on_conflict, db.job)
    if after_commit is not None:
        after_commit(results)
    return results


# -- claims and finishes -------------------------------------------------------------------


def claimed(db: Db, rows: list[Any], owner: str) -> list[ClaimedJob]:
    jobs = [db.job(r) for r in rows]
    return [ClaimedJob(job=job, lease_owner=owner, fence=job.fence) for job in jobs]


#: Multi-row writes by id (a claim of named jobs, a finish batch, a lease extension) take
#: their rows in id order: an UPDATE ... FROM unnest(ids) locks them in the array's order,
#: and two such writes over the same jobs in different orders (a heartbeat and a finish,
#: over a slow link) deadlocked: PostgreSQL aborted the heartbeat (chaos slow_network).
def _finish_id(finish: Finish) -> int:
    return finish.job_id


def _lease_id(lease: Lease) -> int:
    return lease.job_id


def claim_jobs(db: Db, ids: Sequence[int], owner: str, lease_s: float) -> list[ClaimedJob]:
    rows = db.write("claim_jobs", {"ids": db.list(sorted(ids)), "owner": owner, "lease_s": lease_s})
    return claimed(db, rows, owner)


def claim_due_jobs(db: Db, queues: Sequence[str], limit: int, owner: str, lease_s: float,
                   aging_s: float, dispatched_only: bool,
                   due_within_s: Mapping[str, float | None] | None = None,
                   ) -> tuple[list[ClaimedJob], list[tuple[str, float]]]:
    """The polling claim: each queue in turn until ``limit`` (SQLite: in one transaction).
    ``due_within_s``: each queue's due-time window (PostgreSQL, store/claim_window.py); then
    also, per queue, how long the oldest head it considered had waited (0: drained)."""
    rows: list[Any] = []
    seen: list[tuple[str, float]] = []
    with db.serialised():
        for queue in queues:
            want = limit - len(rows)
            if want <= 0:
                break
            got = db.write("claim_due_jobs", _due_params(
                queue, want, owner, lease_s, aging_s, dispatched_only,
                None if due_within_s is None else due_within_s[queue]))
            rows.extend(got)
            if due_within_s is not None:
                seen.append((queue, 0.0 if len(got) < want else head_waited_s(got)))
    return claimed(db, rows, owner), seen


def _due_params(queue: str, limit: int, owner: str, lease_s: float, aging_s: float,
                dispatched_only: bool, due_within_s: float | None) -> dict[str, Any]:
    return {"queue": queue, "limit": limit, "owner": owner, "lease_s": lease_s,
            "aging_s": aging_s, "dispatched_only": dispatched_only, "skip_tenants": "[]",
            "due_within_s": due_within_s}


def claim_capped(db: Db, caps: Caps, ids: Sequence[int] | None, queues: Sequence[str],
                 limit: int, owner: str, lease_s: float, backlog: bool,
                 aging_s: float) -> list[ClaimedJob]:
    """Both claim paths while a tenant or a queue has a cap (store/capped_claims.py)."""
    return claimed(db, _capped_rows(db, caps, ids, queues, limit, owner, lease_s, backlog,
                                    aging_s), owner)


def _capped_rows(db: Db, caps: Caps, ids: Sequence[int] | None, queues: Sequence[str],
                 limit: int, owner: str, lease_s: float, backlog: bool,
                 aging_s: float) -> list[Any]:
    if isinstance(db, PgDb):
        return pg_claim_capped(db.conn, caps, ids, queues, limit, owner, lease_s,
                               backlog=backlog, queries=db.queries, aging_s=aging_s)
    return sqlite_claim_capped(_lite(db), caps, ids, queues, limit, owner, lease_s,
                               backlog=backlog, queries=db.queries, aging_s=aging_s)


def claim_rate_limited(db: Db, caps: Caps | None, queue: str, rate: QueueRate, limit: int,
                       owner: str, lease_s: float, aging_s: float,
                       dispatched_only: bool) -> RateLimitedClaim:
    """One rate-limited queue's claim in one transaction (store/rate_windows.py): the
    window's row locked, at most what it has left claimed (plain or capped), then charged."""
    def claim(n: int) -> list[Any]:
        if caps is not None:
            return _capped_rows(db, caps, None, [queue], n, owner, lease_s, False, aging_s)
        # A full pass, no due-time window: a rate-limited claim takes few jobs, from the head.
        return db.read("claim_due_jobs", _due_params(queue, n, owner, lease_s, aging_s,
                                                     dispatched_only, None))

    with db.transaction():  # PostgreSQL: a nested claim's own transaction is a savepoint
        result = claim_within_rate(db.read, claim, queue, rate, limit)
    return RateLimitedClaim(claimed(db, result.rows, owner), result.full, result.window_left_s)


def finish_jobs(db: Db, finishes: Sequence[Finish], after_commit: AfterFinish | None) -> set[int]:
    """``_finish_batch``; then ``after_commit`` on the same thread (the finisher's XACK:
    strictly after the commit, in the same thread hop). Rows in id order (see claim_jobs)."""
    applied = _finish_batch(db, sorted(finishes, key=_finish_id))
    if after_commit is not None:
        after_commit()
    return applied


def _finish_batch(db: Db, finishes: Sequence[Finish]) -> set[int]:
    """The fenced UPDATE of a batch, and for the rows it applied the completions' replies
    (and SQLite: the runs' attempts; PostgreSQL records them in the statement)."""
    if isinstance(db, PgDb):
        params = _pg_finish_params(finishes)
        replies = reply_rows(finishes)
        if not replies:  # the common path stays one plain UPDATE
            return {int(r[0]) for r in db.write("finish_jobs", params)}
        rows = db.write("finish_jobs_with_replies", {  # one statement: a CTE feeds the INSERT
            **params, "r_jobs": [r[0] for r in replies], "r_channels": [r[1] for r in replies],
            "r_recipients": [r[2] for r in replies], "r_bodies": [r[3] for r in replies],
            "r_keys": [r[4] for r in replies]})
        return {int(r[0]) for r in rows}
    batch = [[f.job_id, f.lease_owner, f.fence, f.status.value, max(0.0, f.delay_s),
              f.outcome is Outcome.INTERRUPTED, f.error_class, f.last_error,
              f.result]  # JSON text or None (docs/results.md)
             for f in finishes]
    with db.transaction():
        applied = {int(r[0]) for r in db.write("finish_jobs", {"batch": json.dumps(batch)})}
        # Only the completions that applied in this very transaction.
        mine = [list(r) for r in reply_rows(finishes) if r[0] in applied]
        if mine:
            db.write("insert_replies", {"replies": json.dumps(mine)})
        sqlite_record_attempts(_lite(db), applied_attempts(finishes, applied))
    return applied


def _pg_finish_params(finishes: Sequence[Finish]) -> dict[str, Any]:
    return {
        "ids": [f.job_id for f in finishes], "owners": [f.lease_owner for f in finishes],
        "fences": [f.fence for f in finishes], "statuses": [f.status.value for f in finishes],
        "delays": [max(0.0, f.delay_s) for f in finishes],
        "refunds": [f.outcome is Outcome.INTERRUPTED for f in finishes],
        "classes": [f.error_class for f in finishes], "errors": [f.last_error for f in finishes],
        "results": [f.result for f in finishes],  # JSON text or None (docs/results.md)
        "attempts_kept": ATTEMPTS_KEPT_PER_JOB,
    }


def extend_leases(db: Db, leases: Sequence[Lease], owner: str, lease_s: float
                  ) -> list[LeaseState]:
    """Rows in id order (see claim_jobs)."""
    leases = sorted(leases, key=_lease_id)
    if isinstance(db, PgDb):
        params: dict[str, Any] = {"ids": [x.job_id for x in leases],
                                  "fences": [x.fence for x in leases]}
    else:
        params = {"leases": json.dumps([[x.job_id, x.fence] for x in leases])}
    rows = db.write("extend_leases", {**params, "owner": owner, "lease_s": lease_s})
    return [LeaseState(int(r[0]), bool(r[1])) for r in rows]


def reap_expired_leases(db: Db, params: dict[str, Any]) -> list[Any]:
    """The reaper's UPDATE, its attempts recorded (PostgreSQL: in the statement)."""
    with db.serialised():
        rows = db.write("reap_expired_leases", params)
        if db.dialect == "sqlite":
            sqlite_record_attempts(
                _lite(db), [[r[0], AttemptOutcome.LEASE_EXPIRED.value, r[5]] for r in rows])
    return rows


# -- one job -------------------------------------------------------------------------------


def get_job(db: Db, job_id: int) -> Job | None:
    rows = db.read("get_job", {"id": job_id})
    return with_result(db.job(rows[0]), rows[0]) if rows else None


def list_job_attempts(db: Db, job_id: int) -> list[JobAttempt]:
    rows = db.read("list_job_attempts", {"id": job_id, "limit": ATTEMPTS_KEPT_PER_JOB})
    return [db.attempt(r) for r in rows]


def newest_job_id(db: Db) -> int:
    rows = db.read("newest_job_id", {})
    return int(rows[0][0]) if rows else 0


def list_jobs(db: Db, flt: JobFilter) -> list[Job]:
    name = ("list_scheduled_jobs" if flt.scheduled
            else "list_jobs_newest" if flt.newest_first else "list_jobs")
    found = search.search_params(flt.search)
    if found["pattern"] is not None:  # bounded: the newest SEARCH_WINDOW ids
        found["search_after_id"] = max(0, newest_job_id(db) - search.SEARCH_WINDOW)
    rows = db.read(name, {
        "status": flt.status.value if flt.status else None, "queue": flt.queue,
        "tenant_id": flt.tenant_id, "job_type": flt.job_type, "after_id": flt.after_id,
        "limit": flt.limit, **found})
    jobs = [db.job(r) for r in rows]
    named = found["search_id"]
    if named is not None and named <= (found["search_after_id"] or 0):
        # An id older than the window: looked up by its key, kept if the page holds it.
        job = get_job(db, named)
        if job is not None and named not in {j.id for j in jobs}:
            jobs = search.page_with(jobs, job, flt)
    return jobs


def requeue_job(db: Db, job_id: int) -> Job:
    rows = db.write("requeue_job", {"id": job_id})
    if rows:
        return db.job(rows[0])
    raise _transition_error(db, job_id, "retry", "dead or cancelled")


def cancel_job(db: Db, job_id: int) -> Job:
    rows = db.write("cancel_waiting_job", {"id": job_id})
    if not rows:
        rows = db.write("request_cancel_running_job", {"id": job_id})
    if rows:
        return db.job(rows[0])
    raise _transition_error(db, job_id, "cancel", "queued, retrying or running")


def _transition_error(db: Db, job_id: int, verb: str, allowed: str) -> Exception:
    job = get_job(db, job_id)
    if job is None:
        return JobNotFound(job_id)
    return InvalidTransition(f"cannot {verb} job {job_id}: it is {job.status}, not {allowed}")


def route_version(db: Db) -> int:
    return int(db.read("route_version", {})[0][0])


def list_routes(db: Db) -> list[tuple[str, str, str, int]]:
    return [(r[0], r[1], r[2], int(r[3])) for r in db.read("list_routes", {})]



def schema_version(db: Db) -> int:
    """The newest migration applied (0: no schema)."""
    if db.dialect == "postgres":
        exists = db.run("SELECT to_regclass('gochatd_schema_migrations')", {})[0][0] is not None
    else:
        exists = bool(db.run(
            "SELECT 1 FROM sqlite_master WHERE name = 'gochatd_schema_migrations'", {}))
    if not exists:
        return 0
    return int(db.run("SELECT coalesce(max(version), 0) FROM gochatd_schema_migrations",
                      {})[0][0])
