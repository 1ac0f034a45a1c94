"""What both SQL stores share: every operation that is one named query plus decoding.

A backend supplies how to run a named query (``_read``/``_write``), how to pass a list
(PostgreSQL arrays, SQLite JSON) and how to decode a job row; the SQL itself lives in
``sql/<dialect>/queries.sql`` (plain or scoped, store/scope.py) under the same names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gochatd.errors import InvalidTransition, JobNotFound
from gochatd.model import (
    DEFAULT_PRIORITY_AGING_S,
    TERMINAL,
    ClaimedJob,
    DispatchRef,
    Finish,
    Job,
    JobAttempt,
    JobFilter,
    JobStatus,
    Lease,
    LeaseState,
    QueueStats,
    ReapResult,
)
from gochatd.outbox.store import SqlOutboxOps
from gochatd.periodic_jobs.slots import SqlPeriodicOps
from gochatd.store.attempts import ATTEMPTS_KEPT_PER_JOB
from gochatd.store.capped_claims import Caps, split_delivered
from gochatd.store.controls import SqlControlOps
from gochatd.store.fleet import SqlFleetOps
from gochatd.store.job_types import SqlJobTypeOps
from gochatd.store.route_table import SqlRouteOps
from gochatd.store.rows import ref_from_row
from gochatd.store.scope import QueriesInScope

#: The largest id a search text may name (bigint).
_MAX_ID = 2**63 - 1
#: A text search looks at the newest this many ids of a database (docs/operations.md,
#: "Listing jobs"): bounded, whatever the table holds; an id is found anywhere.
SEARCH_WINDOW = 10_000


def search_params(text: str | None) -> dict[str, Any]:
    """A listing's search as the queries take it: ``pattern`` matches the text anywhere, its
    ``%``, ``_`` and ``\\`` literal (``ESCAPE '\\'``); ``search_id`` is the text as an id."""
    if not text:
        return {"pattern": None, "search_id": None, "search_after_id": None}
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    digits = text.strip()
    as_id = int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 19 else None
    return {"pattern": f"%{escaped}%",
            "search_id": as_id if as_id is not None and as_id <= _MAX_ID else None,
            "search_after_id": None}


def page_with(jobs: list[Job], job: Job, flt: JobFilter) -> list[Job]:
    """``jobs`` (one page of ``flt``) with ``job`` too, if it passes the filter and falls
    within the page in its order."""
    matches = ((flt.status is None or job.status is flt.status)
               and flt.queue in (None, job.queue) and flt.tenant_id in (None, job.tenant_id)
               and flt.job_type in (None, job.job_type) and not flt.scheduled)
    after = flt.after_id is None or (job.id < flt.after_id if flt.newest_first
                                     else job.id > flt.after_id)
    if not matches or not after:
        return jobs
    merged = sorted([*jobs, job], key=lambda j: j.id, reverse=flt.newest_first)
    return merged[:flt.limit] if len(jobs) >= flt.limit else merged


class SqlJobStore(QueriesInScope, SqlOutboxOps, SqlPeriodicOps, SqlRouteOps, SqlJobTypeOps, SqlControlOps,
                  SqlFleetOps):
    # -- what a backend provides -----------------------------------------------------------

    async def _read(self, name: str, params: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    async def _write(self, name: str, params: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    def _list(self, values: Sequence[Any]) -> Any:
        raise NotImplementedError

    def _job(self, row: Sequence[Any]) -> Job:
        raise NotImplementedError

    def _attempt(self, row: Sequence[Any]) -> JobAttempt:
        raise NotImplementedError

    def _finish_params(self, finishes: Sequence[Finish]) -> dict[str, Any]:
        raise NotImplementedError

    async def _finish_jobs_with_replies(self, finishes: Sequence[Finish]) -> set[int]:
        """finish_jobs plus the applied completions' replies, in one transaction."""
        raise NotImplementedError

    def _lease_params(self, leases: Sequence[Lease]) -> dict[str, Any]:
        raise NotImplementedError

    # -- claims and leases -----------------------------------------------------------------

    def _claimed(self, row: Sequence[Any], owner: str) -> ClaimedJob:
        job = self._job(row)
        return ClaimedJob(job=job, lease_owner=owner, fence=job.fence)

    #: tenants.<id>.max_running and worker.queue_limits, set by the worker; both empty: the
    #: plain claims run unchanged.
    tenant_limits: dict[str, int] = {}  # replaced by the worker, never mutated
    queue_limits: dict[str, int] = {}  # likewise
    #: worker.priority_aging_s, set by the worker (docs/priority.md).
    priority_aging_s: float = DEFAULT_PRIORITY_AGING_S
    async def _claim_capped(
        self, ids: Sequence[int] | None, queues: Sequence[str], limit: int, owner: str,
        lease_s: float, *, backlog: bool = False,
    ) -> list[ClaimedJob]:
        """Both claim paths while some tenant or queue has a cap (store/capped_claims.py)."""
        raise NotImplementedError

    def _caps(self) -> Caps:
        return Caps(self.tenant_limits, self.queue_limits)

    async def claim_due_jobs(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float,
        *, dispatched_only: bool = False,
    ) -> list[ClaimedJob]:
        """The polling claim (each backend's: one transaction over the queues).
        ``dispatched_only``: only jobs that were given a stream entry (the streams claim)."""
        raise NotImplementedError

    async def claim_capped_backlog(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        if not (self.tenant_limits or self.queue_limits) or limit <= 0 or not queues:
            return []
        return await self._claim_capped(None, queues, limit, owner, lease_s, backlog=True)

    async def running_by_tenant(self) -> dict[str, int]:
        return {str(r[0]): int(r[1]) for r in await self._read("running_by_tenant", {})}

    async def claim_jobs(self, ids: Sequence[int], owner: str, lease_s: float) -> list[ClaimedJob]:
        if not ids:
            return []
        if self.tenant_limits or self.queue_limits:
            return await self._claim_capped(ids, (), len(ids), owner, lease_s)
        rows = await self._write(
            "claim_jobs", {"ids": self._list(list(ids)), "owner": owner, "lease_s": lease_s}
        )
        return [self._claimed(r, owner) for r in rows]

    async def claim_delivered_jobs(
        self, delivered: Mapping[str, Sequence[int | None]], owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        if self.tenant_limits or self.queue_limits:
            named, tokens = split_delivered(delivered, self.queue_limits)
            capped = (await self._claim_capped(named, (), len(named), owner, lease_s)
                      if named else [])
            for queue, n in tokens.items():  # a capped queue's entries: its best jobs
                capped.extend(await self._claim_capped(None, [queue], n, owner, lease_s))
            return capped
        ids = [job_id for queue_ids in delivered.values() for job_id in queue_ids
               if job_id is not None]
        claimed: list[ClaimedJob] = []
        if ids:
            rows = await self._write("claim_delivered_jobs", {
                "ids": self._list(ids), "queues": self._list(list(delivered)),
                "owner": owner, "lease_s": lease_s})
            claimed = [self._claimed(r, owner) for r in rows]
        got = {c.id for c in claimed}
        for queue, queue_ids in delivered.items():
            # A queue holding other priorities, or entries whose jobs are gone (claimed by
            # a poller, a duplicate, an entry spent on a better job): its first due jobs
            # among those that were given an entry, so that entries and jobs stay one to one
            # (a job not dispatched yet gets its own entry from the scheduler).
            short = sum(1 for job_id in queue_ids if job_id is None or job_id not in got)
            if short <= 0:
                continue
            ranked = await self.claim_due_jobs([queue], short, owner, lease_s,
                                               dispatched_only=True)
            claimed.extend(ranked)
            got.update(c.id for c in ranked)
            # Fewer than the entries (the rest locked by another claimer right now): the
            # named jobs themselves, so that no entry is spent without its job running.
            named = [i for i in queue_ids if i is not None and i not in got]
            if len(ranked) < short and named:
                claimed.extend(await self.claim_jobs(named[:short - len(ranked)], owner, lease_s))
        return claimed

    async def finish_jobs(self, finishes: Sequence[Finish]) -> set[int]:
        if not finishes:
            return set()
        if any(f.replies for f in finishes):  # the common path stays one plain UPDATE
            return await self._finish_jobs_with_replies(finishes)
        rows = await self._write("finish_jobs", self._finish_params(finishes))
        return {int(r[0]) for r in rows}

    async def extend_leases(
        self, leases: Sequence[Lease], owner: str, lease_s: float
    ) -> list[LeaseState]:
        if not leases:
            return []
        params = {**self._lease_params(leases), "owner": owner, "lease_s": lease_s}
        rows = await self._write("extend_leases", params)
        return [LeaseState(int(r[0]), bool(r[1])) for r in rows]

    # -- maintenance -----------------------------------------------------------------------

    async def reap_expired_leases(
        self, limit: int = 1000, *, expired_within_s: float | None = None,
        created_after_id: int | None = None,
    ) -> ReapResult:
        rows = await self._reap({"limit": limit, "expired_within_s": expired_within_s,
                                 "created_after_id": created_after_id,
                                 "attempts_kept": ATTEMPTS_KEPT_PER_JOB})
        retried = [ref_from_row(r) for r in rows if r[4] == JobStatus.RETRYING]
        dead = [int(r[0]) for r in rows if r[4] != JobStatus.RETRYING]
        return ReapResult(retried=retried, dead=dead)

    async def _reap(self, params: dict[str, Any]) -> list[Any]:
        """reap_expired_leases with its attempts recorded (PostgreSQL: in the statement)."""
        return await self._write("reap_expired_leases", params)

    async def newest_job_id(self) -> int:
        rows = await self._read("newest_job_id", {})
        return int(rows[0][0]) if rows else 0

    async def dispatch_due_jobs(self, queues: Sequence[str], limit: int) -> list[DispatchRef]:
        rows = await self._write(
            "dispatch_due_jobs", {"queues": self._list(list(queues)), "limit": limit}
        )
        return [ref_from_row(r) for r in rows]

    async def redispatch_stale_jobs(
        self, queue: str, older_than_s: float, limit: int, *,
        dispatched_within_s: float | None = None,
    ) -> list[DispatchRef]:
        if limit <= 0:
            return []
        rows = await self._write(
            "redispatch_stale_jobs",
            {"queue": queue, "older_than_s": older_than_s, "limit": limit,
             "dispatched_within_s": dispatched_within_s},
        )
        return [ref_from_row(r) for r in rows]

    async def next_due_in_s(self, queues: Sequence[str], undispatched_only: bool) -> float | None:
        name = "next_undispatched_in_s" if undispatched_only else "next_due_in_s"
        rows = await self._read(name, {"queues": self._list(list(queues))})
        value = rows[0][0] if rows else None
        if value is not None and value == -math.inf:  # a foreign row due since forever
            return 0.0
        return None if value is None or not math.isfinite(value) else float(value)

    # -- operators -------------------------------------------------------------------------

    async def get_job(self, job_id: int) -> Job | None:
        rows = await self._read("get_job", {"id": job_id})
        return self._job(rows[0]) if rows else None

    async def get_job_states(self, job_ids: Sequence[int]) -> dict[int, tuple[int, JobStatus]]:
        if not job_ids:
            return {}
        rows = await self._read("get_job_states", {"ids": self._list(list(job_ids))})
        return {int(r[0]): (int(r[1]), JobStatus(r[2])) for r in rows}

    async def list_job_attempts(self, job_id: int) -> list[JobAttempt]:
        rows = await self._read("list_job_attempts",
                                {"id": job_id, "limit": ATTEMPTS_KEPT_PER_JOB})
        return [self._attempt(r) for r in rows]

    async def list_jobs(self, flt: JobFilter) -> list[Job]:
        name = ("list_scheduled_jobs" if flt.scheduled
                else "list_jobs_newest" if flt.newest_first else "list_jobs")
        search = search_params(flt.search)
        if search["pattern"] is not None:  # bounded: the newest SEARCH_WINDOW ids
            search["search_after_id"] = max(0, await self.newest_job_id() - SEARCH_WINDOW)
        rows = await self._read(
            name,
            {
                "status": flt.status.value if flt.status else None,
                "queue": flt.queue,
                "tenant_id": flt.tenant_id,
                "job_type": flt.job_type,
                "after_id": flt.after_id,
                "limit": flt.limit,
                **search,
            },
        )
        jobs = [self._job(r) for r in rows]
        named = search["search_id"]
        if named is not None and named <= (search["search_after_id"] or 0):
            # An id older than the window: looked up by its key, kept if the page holds it.
            job = await self.get_job(named)
            if job is not None and named not in {j.id for j in jobs}:
                jobs = page_with(jobs, job, flt)
        return jobs

    async def count_scheduled_jobs(self) -> int:
        rows = await self._read("count_scheduled_jobs", {})
        return int(rows[0][0]) if rows else 0

    async def count_delayed_jobs(self) -> int:
        rows = await self._read("count_delayed_jobs", {})
        return int(rows[0][0]) if rows else 0

    async def requeue_job(self, job_id: int) -> Job:
        rows = await self._write("requeue_job", {"id": job_id})
        if rows:
            return self._job(rows[0])
        raise await self._transition_error(job_id, "retry", "dead or cancelled")

    async def cancel_job(self, job_id: int) -> Job:
        rows = await self._write("cancel_waiting_job", {"id": job_id})
        if not rows:
            rows = await self._write("request_cancel_running_job", {"id": job_id})
        if rows:
            return self._job(rows[0])
        raise await self._transition_error(job_id, "cancel", "queued, retrying or running")

    async def _transition_error(self, job_id: int, verb: str, allowed: str) -> Exception:
        job = await self.get_job(job_id)
        if job is None:
            return JobNotFound(job_id)
        return InvalidTransition(f"cannot {verb} job {job_id}: it is {job.status}, not {allowed}")

    async def count_jobs_by_status(self) -> dict[JobStatus, int]:
        rows = await self._read("count_jobs_by_status", {})
        return {JobStatus(r[0]): int(r[1]) for r in rows}

    async def requeue_dead_jobs(self, flt: JobFilter) -> list[int]:
        rows = await self._write(
            "requeue_dead_jobs",
            {"queue": flt.queue, "tenant_id": flt.tenant_id, "job_type": flt.job_type,
             "limit": flt.limit},
        )
        return sorted(int(r[0]) for r in rows)

    # -- retention -------------------------------------------------------------------------

    async def prune_change_tombstones(self, older_than_s: float, limit: int) -> int:
        rows = await self._write("prune_change_tombstones",
                                 {"older_than_s": older_than_s, "limit": limit})
        return len(rows)

    async def prune_finished_jobs(self, status: JobStatus, older_than_s: float, limit: int) -> int:
        if status not in TERMINAL:
            raise ValueError(f"only finished jobs are pruned, not {status}")
        rows = await self._write(
            "prune_finished_jobs",
            {"status": status.value, "older_than_s": older_than_s, "limit": limit},
        )
        return len(rows)

    async def count_prunable_jobs(self, status: JobStatus, older_than_s: float) -> int:
        if status not in TERMINAL:
            raise ValueError(f"only finished jobs are pruned, not {status}")
        rows = await self._read(
            "count_prunable_jobs", {"status": status.value, "older_than_s": older_than_s}
        )
        return int(rows[0][0]) if rows else 0

    # -- queues ----------------------------------------------------------------------------

    async def pause_queue(self, queue: str, by: str) -> bool:
        return bool(await self._write("pause_queue", {"queue": queue, "by": by}))

    async def resume_queue(self, queue: str) -> bool:
        return bool(await self._write("resume_queue", {"queue": queue}))

    async def paused_queues(self) -> set[str]:
        return {str(r[0]) for r in await self._read("list_paused_queues", {})}

    async def queue_stats(self) -> list[QueueStats]:
        rows = await self._read("queue_stats", {})
        return [
            QueueStats(
                queue=str(r[0]), queued=int(r[1] or 0), delayed=int(r[2] or 0),
                running=int(r[3] or 0), retrying=int(r[4] or 0), dead=int(r[5] or 0),
                oldest_due_age_s=None if r[6] is None or not math.isfinite(r[6])
                else max(0.0, float(r[6])),
            )
            for r in rows
        ]
