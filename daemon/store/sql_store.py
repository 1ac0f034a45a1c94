"""The SQL store: every ``JobStore`` operation, written once for both dialects.

Each operation is a unit over a ``Db`` (store/db.py), run on a connection thread by
``StoreCore._unit``: the job operations in store/ops.py, the other parts in their own
modules (controls, fleet, job types, routes, outbox, periodic slots), the one-query ones
here. A dialect's store (postgres.py, sqlite.py) adds only its connections, schema
upgrade and wake-ups; the SQL itself lives in ``sql/<dialect>/queries.sql`` (plain or
scoped, store/scope.py) under the same names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime

from gochatd.config.rates import QueueRate
from gochatd.model import (
    DEFAULT_PRIORITY_AGING_S,
    TERMINAL,
    AfterCommit,
    ClaimedJob,
    DispatchRef,
    EnqueueRequest,
    EnqueueResult,
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
from gochatd.periodic_jobs.slots import SlotClaim, SqlPeriodicOps, claim_periodic_slot
from gochatd.store import ops
from gochatd.store.attempts import ATTEMPTS_KEPT_PER_JOB
from gochatd.store.capped_claims import Caps, split_delivered
from gochatd.store.claim_window import ClaimWindows
from gochatd.store.controls import SqlControlOps
from gochatd.store.db import AfterFinish
from gochatd.store.fleet import SqlFleetOps
from gochatd.store.idle import SqlIdleOps
from gochatd.store.job_types import SqlJobTypeOps
from gochatd.store.rate_windows import RateLimitedClaim
from gochatd.store.route_table import SqlRouteOps
from gochatd.store.rows import ref_from_row
from gochatd.workflows import store as workflows
from gochatd.workflows.model import Batch, JobLinks, Workflow, WorkflowResult


class SqlJobStore(SqlOutboxOps, SqlPeriodicOps, SqlRouteOps, SqlJobTypeOps, SqlControlOps,
                  SqlFleetOps, SqlIdleOps):
    #: tenants.<id>.max_running and worker.queue_limits, set by the worker; both empty: the
    #: plain claims run unchanged.
    tenant_limits: dict[str, int] = {}  # replaced by the worker, never mutated
    queue_limits: dict[str, int] = {}  # likewise
    #: worker.priority_aging_s, set by the worker (docs/priority.md).
    priority_aging_s: float = DEFAULT_PRIORITY_AGING_S
    #: The polling claim's due-time window per queue (store/claim_window.py): PostgreSQL's,
    #: whose claim under a held snapshot must not walk every dead index entry; None: SQLite.
    _claim_windows: ClaimWindows | None = None

    async def schema_version(self) -> int:
        return await self._unit(ops.schema_version)

    # -- producers -------------------------------------------------------------------------

    async def enqueue(
        self, request: EnqueueRequest, *, after_commit: AfterCommit | None = None
    ) -> EnqueueResult:
        return await self._unit(ops.enqueue, request, after_commit)

    async def enqueue_many(
        self, requests: Sequence[EnqueueRequest], *, raise_on_conflict: bool = False,
        after_commit: AfterCommit | None = None,
    ) -> list[EnqueueResult]:
        if not requests:
            return []
        return await self._unit(ops.enqueue_many, requests, raise_on_conflict, after_commit)

    async def claim_periodic_slot(
        self, name: str, slot: datetime, request: EnqueueRequest | None
    ) -> SlotClaim:
        return await self._unit(claim_periodic_slot, name, slot, request)

    # -- claims and leases -----------------------------------------------------------------

    def _caps(self) -> Caps:
        return Caps(self.tenant_limits, self.queue_limits)

    async def _claim_capped(
        self, ids: Sequence[int] | None, queues: Sequence[str], limit: int, owner: str,
        lease_s: float, *, backlog: bool = False,
    ) -> list[ClaimedJob]:
        """Both claim paths while some tenant or queue has a cap (store/capped_claims.py)."""
        return await self._unit(ops.claim_capped, self._caps(), ids, queues, limit, owner,
                                lease_s, backlog, self.priority_aging_s)

    async def claim_due_jobs(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float,
        *, dispatched_only: bool = False,
    ) -> list[ClaimedJob]:
        """The polling claim (one unit over the queues).
        ``dispatched_only``: only jobs that were given a stream entry (the streams claim)."""
        if limit <= 0 or not queues:
            return []
        if self.tenant_limits or self.queue_limits:
            return await self._claim_capped(None, queues, limit, owner, lease_s)
        windows = self._claim_windows
        due_within_s = None if windows is None else {q: windows.begin(q) for q in queues}
        claimed, seen = await self._unit(ops.claim_due_jobs, queues, limit, owner, lease_s,
                                         self.priority_aging_s, dispatched_only, due_within_s)
        if windows is not None:
            for queue, behind_s in seen:
                windows.complete(queue, behind_s)
        return claimed

    async def claim_rate_limited(
        self, queue: str, rate: QueueRate, limit: int, owner: str, lease_s: float,
        *, dispatched_only: bool = False,
    ) -> RateLimitedClaim:
        caps = self._caps() if self.tenant_limits or self.queue_limits else None
        return await self._unit(ops.claim_rate_limited, caps, queue, rate, limit, owner,
                                lease_s, self.priority_aging_s, dispatched_only)

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
        return await self._unit(ops.claim_jobs, ids, owner, lease_s)

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
        ids = sorted(job_id for queue_ids in delivered.values() for job_id in queue_ids
                     if job_id is not None)  # rows in id order (ops.claim_jobs)
        claimed: list[ClaimedJob] = []
        if ids:
            rows = await self._write("claim_delivered_jobs", {
                "ids": self._list(ids), "queues": self._list(list(delivered)),
                "owner": owner, "lease_s": lease_s})
            claimed = [ClaimedJob(job, owner, job.fence) for job in map(self._job, rows)]
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

    async def finish_jobs(
        self, finishes: Sequence[Finish], *, after_commit: AfterFinish | None = None
    ) -> set[int]:
        if not finishes:
            return set()
        return await self._unit(ops.finish_jobs, finishes, after_commit)

    async def extend_leases(
        self, leases: Sequence[Lease], owner: str, lease_s: float
    ) -> list[LeaseState]:
        if not leases:
            return []
        return await self._unit(ops.extend_leases, leases, owner, lease_s)

    # -- maintenance -----------------------------------------------------------------------

    async def reap_expired_leases(
        self, limit: int = 1000, *, expired_within_s: float | None = None,
        created_after_id: int | None = None,
    ) -> ReapResult:
        rows = await self._unit(ops.reap_expired_leases, {
            "limit": limit, "expired_within_s": expired_within_s,
            "created_after_id": created_after_id, "attempts_kept": ATTEMPTS_KEPT_PER_JOB})
        retried = [ref_from_row(r) for r in rows if r[4] == JobStatus.RETRYING]
        dead = [int(r[0]) for r in rows if r[4] != JobStatus.RETRYING]
        return ReapResult(retried=retried, dead=dead)

    async def newest_job_id(self) -> int:
        return await self._unit(ops.newest_job_id)

    async def dispatch_due_jobs(self, queues: Sequence[str], limit: int) -> list[DispatchRef]:
        rows = await self._write(
            "dispatch_due_jobs", {"queues": self._list(list(queues)), "limit": limit}
        )
        return [ref_from_row(r) for r in rows]

    async def redispatch_stale_jobs(
        self, limits: Mapping[str, int], older_than_s: float, *,
        dispatched_within_s: float | None = None,
    ) -> list[DispatchRef]:
        wanted = {queue: limit for queue, limit in limits.items() if limit > 0}
        if not wanted:
            return []
        rows = await self._write(
            "redispatch_stale_jobs",
            {"queues": self._list(list(wanted)), "limits": self._list(list(wanted.values())),
             "older_than_s": older_than_s, "dispatched_within_s": dispatched_within_s},
        )
        return [ref_from_row(r) for r in rows]

    async def next_due_in_s(self, queues: Sequence[str], undispatched_only: bool) -> float | None:
        name = "next_undispatched_in_s" if undispatched_only else "next_due_in_s"
        windows = self._claim_windows  # how far back: the polling claim's window, if any
        rows = await self._read(name, {
            "queues": self._list(list(queues)),
            "due_within_s": None if windows is None else windows.widest_s(queues)})
        value = rows[0][0] if rows else None
        if value is not None and value == -math.inf:  # a foreign row due since forever
            return 0.0
        return None if value is None or not math.isfinite(value) else float(value)

    # -- operators -------------------------------------------------------------------------

    async def get_job(self, job_id: int) -> Job | None:
        return await self._unit(ops.get_job, job_id)

    async def enqueue_workflow(self, workflow: Workflow, *,
                               after_commit: AfterCommit | None = None) -> WorkflowResult:
        return await self._unit(workflows.enqueue_workflow, workflow, after_commit)

    async def job_links(self, job_id: int, with_results: bool = True) -> JobLinks | None:
        return await self._unit(workflows.job_links, job_id, with_results)

    async def get_batch(self, batch_id: int) -> Batch | None:
        return await self._unit(workflows.get_batch, batch_id)

    async def get_job_states(self, job_ids: Sequence[int]) -> dict[int, tuple[int, JobStatus]]:
        if not job_ids:
            return {}
        rows = await self._read("get_job_states", {"ids": self._list(list(job_ids))})
        return {int(r[0]): (int(r[1]), JobStatus(r[2])) for r in rows}

    async def list_job_attempts(self, job_id: int) -> list[JobAttempt]:
        return await self._unit(ops.list_job_attempts, job_id)

    async def list_jobs(self, flt: JobFilter) -> list[Job]:
        return await self._unit(ops.list_jobs, flt)

    async def count_scheduled_jobs(self) -> int:
        rows = await self._read("count_scheduled_jobs", {})
        return int(rows[0][0]) if rows else 0

    async def count_delayed_jobs(self) -> int:
        rows = await self._read("count_delayed_jobs", {})
        return int(rows[0][0]) if rows else 0

    async def requeue_job(self, job_id: int) -> Job:
        return await self._unit(ops.requeue_job, job_id)

    async def cancel_job(self, job_id: int) -> Job:
        return await self._unit(ops.cancel_job, job_id)

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
