"""The routed store: one ``JobStore`` over the home database and, while tenants migrate,
their destinations (``gochatd migrate``; docs/migrate.md).

Every tenant is served by exactly one database at a time, read from the route table
(store/route_table.py). Each underlying store is given a tenant scope, so work that spans
tenants (polling claims, the reaper, the sweep, retention, listings) runs on every open
database and each one acts only on its own tenants. Work for one tenant (enqueue, finish,
lease extension, outbox deliveries) goes to that tenant's database. A tenant whose cutover
is in progress (frozen) has its writes held until the route changes, bounded by
``hold_s``; the home database refuses them anyway (the route trigger), so a write that
slips past a stale route table comes back as ``TenantMoved`` and is retried here.

Without routes (the normal case) every call goes straight to the home store.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime

import anyio

from gochatd.config.rates import QueueRate
from gochatd.errors import JobNotFound
from gochatd.migrate.routing.controls import RoutedControls
from gochatd.migrate.routing.core import ScopedStore
from gochatd.migrate.routing.fleet import RoutedFleet
from gochatd.migrate.routing.view import ROUTES_SCHEMA, concat, group_by, merge_pages
from gochatd.migrate.routing.workflows import RoutedWorkflows
from gochatd.model import (
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
from gochatd.periodic_jobs.slots import SlotClaim
from gochatd.store.db import AfterFinish
from gochatd.store.rate_windows import RateLimitedClaim
from gochatd.worker.job_types import JobTypeChange, JobTypeDefaults, PublishedJobType


class RoutedStore(RoutedFleet, RoutedControls, RoutedWorkflows):
    """A ``JobStore`` (see store/base.py for each method's contract)."""

    # -- one tenant's writes ---------------------------------------------------------------

    async def enqueue(
        self, request: EnqueueRequest, *, after_commit: AfterCommit | None = None
    ) -> EnqueueResult:
        def call(s: ScopedStore) -> Awaitable[EnqueueResult]:
            return s.enqueue(request, after_commit=after_commit)

        return await self._unless_routed(
            not self.routes.routes, call, lambda: self._for_tenant(request.tenant_id, call))

    async def enqueue_many(
        self, requests: Sequence[EnqueueRequest], *, raise_on_conflict: bool = False,
        after_commit: AfterCommit | None = None,
    ) -> list[EnqueueResult]:
        def call(s: ScopedStore) -> Awaitable[list[EnqueueResult]]:
            return s.enqueue_many(requests, raise_on_conflict=raise_on_conflict,
                                  after_commit=after_commit)

        return await self._unless_routed(
            not self.routes.routes, call,
            lambda: self._enqueue_many_routed(requests, raise_on_conflict, after_commit))

    async def _enqueue_many_routed(
        self, requests: Sequence[EnqueueRequest], raise_on_conflict: bool,
        after_commit: AfterCommit | None,
    ) -> list[EnqueueResult]:
        groups = group_by(range(len(requests)), lambda i: requests[i].tenant_id)
        if len(groups) == 1:
            ((tenant, _),) = groups.items()
            return await self._for_tenant(tenant, lambda s: s.enqueue_many(
                requests, raise_on_conflict=raise_on_conflict, after_commit=after_commit))
        # Several tenants: they may live in different databases, so all-or-nothing can only
        # hold per database; each tenant's items go in one batch, results back in order.
        results: list[EnqueueResult | None] = [None] * len(requests)
        for tenant, indexes in groups.items():
            batch = [requests[i] for i in indexes]

            async def insert(store: ScopedStore, batch: list[EnqueueRequest] = batch
                             ) -> list[EnqueueResult]:
                return await store.enqueue_many(batch, raise_on_conflict=raise_on_conflict,
                                                after_commit=after_commit)

            done = await self._for_tenant(tenant, insert)
            for i, result in zip(indexes, done, strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    async def finish_jobs(
        self, finishes: Sequence[Finish], *, after_commit: AfterFinish | None = None
    ) -> set[int]:
        # Routed, a batch may commit in several databases: no single unit runs after all of
        # them, so ``after_commit`` is not run (the finisher acks on its own then).
        return await self._unless_routed(
            not self.routes.routes, lambda s: s.finish_jobs(finishes, after_commit=after_commit),
            lambda: self._finish_jobs_routed(finishes))

    async def _finish_jobs_routed(self, finishes: Sequence[Finish]) -> set[int]:
        applied: set[int] = set()

        async def finish_group(tenant: str, group: list[Finish]) -> None:
            applied.update(await self._for_tenant(tenant, lambda s: s.finish_jobs(group)))

        async with anyio.create_task_group() as nursery:  # a held tenant doesn't hold the others
            for tenant, group in group_by(finishes, lambda f: f.tenant_id).items():
                nursery.start_soon(finish_group, tenant, group)
        return applied

    async def extend_leases(
        self, leases: Sequence[Lease], owner: str, lease_s: float
    ) -> list[LeaseState]:
        return await self._unless_routed(
            not self.routes.routes, lambda s: s.extend_leases(leases, owner, lease_s),
            lambda: self._extend_leases_routed(leases, owner, lease_s))

    async def _extend_leases_routed(
        self, leases: Sequence[Lease], owner: str, lease_s: float
    ) -> list[LeaseState]:
        states: list[LeaseState] = []

        async def extend_group(tenant: str, group: list[Lease]) -> None:
            states.extend(await self._for_tenant(
                tenant, lambda s: s.extend_leases(group, owner, lease_s)))

        async with anyio.create_task_group() as nursery:
            for tenant, group in group_by(leases, lambda x: x.tenant_id).items():
                nursery.start_soon(extend_group, tenant, group)
        return states

    # -- work across tenants: every active database, each within its scope -----------------

    async def claim_jobs(self, ids: Sequence[int], owner: str, lease_s: float) -> list[ClaimedJob]:
        return concat(await self._each(lambda s: s.claim_jobs(ids, owner, lease_s)))

    async def claim_delivered_jobs(
        self, delivered: Mapping[str, Sequence[int | None]], owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        return await self._unless_routed(
            not self.routes.moves_anything,
            lambda s: s.claim_delivered_jobs(delivered, owner, lease_s),
            lambda: self._claim_delivered_routed(delivered, owner, lease_s))

    async def _claim_delivered_routed(
        self, delivered: Mapping[str, Sequence[int | None]], owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        # While tenants move, a job may live in either database: the named ids, on each
        # (stream order, not docs/priority.md's, for the duration of the move).
        ids = [job_id for queue_ids in delivered.values() for job_id in queue_ids
               if job_id is not None]
        return await self.claim_jobs(ids, owner, lease_s) if ids else []

    async def claim_due_jobs(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        return await self._unless_routed(
            not self.routes.moves_anything,
            lambda s: s.claim_due_jobs(queues, limit, owner, lease_s),
            lambda: self._claim_due_routed(queues, limit, owner, lease_s))

    async def _claim_due_routed(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        return await self._claim_in_turn(
            limit, lambda store, n: store.claim_due_jobs(queues, n, owner, lease_s))

    async def claim_capped_backlog(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        return await self._claim_in_turn(
            limit, lambda store, n: store.claim_capped_backlog(queues, n, owner, lease_s))

    async def _claim_in_turn(
        self, limit: int, claim: Callable[[ScopedStore, int], Awaitable[list[ClaimedJob]]]
    ) -> list[ClaimedJob]:
        """Up to ``limit`` jobs from each active database in turn, until it is reached."""
        claimed: list[ClaimedJob] = []
        for store in self.active():
            if len(claimed) >= limit:
                break
            claimed.extend(await claim(store, limit - len(claimed)))
        return claimed

    async def claim_rate_limited(
        self, queue: str, rate: QueueRate, limit: int, owner: str, lease_s: float,
        *, dispatched_only: bool = False,
    ) -> RateLimitedClaim:
        # While tenants move, each database counts its own window (as caps do).
        claimed: list[ClaimedJob] = []
        full, left_s = False, float(rate.period_s)
        for store in self.active():
            if len(claimed) >= limit:
                break
            got = await store.claim_rate_limited(queue, rate, limit - len(claimed), owner,
                                                 lease_s, dispatched_only=dispatched_only)
            claimed.extend(got.claimed)
            full, left_s = full or got.full, min(left_s, got.window_left_s)
        return RateLimitedClaim(claimed, full, left_s)

    async def reap_expired_leases(
        self, limit: int = 1000, *, expired_within_s: float | None = None,
        created_after_id: int | None = None,
    ) -> ReapResult:
        result = ReapResult()
        for part in await self._each(lambda s: s.reap_expired_leases(
                limit, expired_within_s=expired_within_s, created_after_id=created_after_id)):
            result.retried.extend(part.retried)
            result.dead.extend(part.dead)
        return result

    async def newest_job_id(self) -> int:
        return max(await self._each(lambda s: s.newest_job_id()))

    async def dispatch_due_jobs(self, queues: Sequence[str], limit: int) -> list[DispatchRef]:
        return concat(await self._each(lambda s: s.dispatch_due_jobs(queues, limit)))

    async def redispatch_stale_jobs(
        self, limits: Mapping[str, int], older_than_s: float, *,
        dispatched_within_s: float | None = None,
    ) -> list[DispatchRef]:
        return concat(await self._each(lambda s: s.redispatch_stale_jobs(
            limits, older_than_s, dispatched_within_s=dispatched_within_s)))

    async def next_due_in_s(self, queues: Sequence[str], undispatched_only: bool) -> float | None:
        found = [x for x in await self._each(
            lambda s: s.next_due_in_s(queues, undispatched_only)) if x is not None]
        return min(found) if found else None

    async def get_job(self, job_id: int) -> Job | None:
        for store in self.active():
            job = await store.get_job(job_id)
            if job is not None:
                return job
        return None

    async def get_job_states(self, job_ids: Sequence[int]) -> dict[int, tuple[int, JobStatus]]:
        found: dict[int, tuple[int, JobStatus]] = {}
        for states in await self._each(lambda s: s.get_job_states(job_ids)):
            found.update(states)
        return found

    async def list_job_attempts(self, job_id: int) -> list[JobAttempt]:
        """From the database that holds the job now (attempts do not move with a tenant)."""
        for store in self.active():
            if await store.get_job(job_id) is not None:
                return await store.list_job_attempts(job_id)
        return []

    async def list_jobs(self, flt: JobFilter) -> list[Job]:
        if flt.tenant_id is not None:
            return await self.store_now(flt.tenant_id).list_jobs(flt)
        return merge_pages(await self._each(lambda s: s.list_jobs(flt)), flt)

    async def requeue_job(self, job_id: int) -> Job:
        job = await self._owner_of(job_id)
        return await self._for_tenant(job.tenant_id, lambda s: s.requeue_job(job_id))

    async def cancel_job(self, job_id: int) -> Job:
        job = await self._owner_of(job_id)
        return await self._for_tenant(job.tenant_id, lambda s: s.cancel_job(job_id))

    async def _owner_of(self, job_id: int) -> Job:
        job = await self.get_job(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    async def count_jobs_by_status(self) -> dict[JobStatus, int]:
        totals: dict[JobStatus, int] = defaultdict(int)
        for counts in await self._each(lambda s: s.count_jobs_by_status()):
            for status, n in counts.items():
                totals[status] += n
        return dict(totals)

    async def count_scheduled_jobs(self) -> int:
        return sum(await self._each(lambda s: s.count_scheduled_jobs()))

    async def count_delayed_jobs(self) -> int:
        return sum(await self._each(lambda s: s.count_delayed_jobs()))

    async def prune_finished_jobs(self, status: JobStatus, older_than_s: float, limit: int) -> int:
        return sum(await self._each(
            lambda s: s.prune_finished_jobs(status, older_than_s, limit)))

    async def prune_change_tombstones(self, older_than_s: float, limit: int) -> int:
        stores = self._all_stores()  # tombstones have no tenant scope: every database
        return sum([await s.prune_change_tombstones(older_than_s, limit) for s in stores])

    async def count_prunable_jobs(self, status: JobStatus, older_than_s: float) -> int:
        return sum(await self._each(lambda s: s.count_prunable_jobs(status, older_than_s)))

    async def requeue_dead_jobs(self, flt: JobFilter) -> list[int]:
        return concat(await self._each(lambda s: s.requeue_dead_jobs(flt)))

    async def queue_stats(self) -> list[QueueStats]:
        parts = concat(await self._each(lambda s: s.queue_stats()))
        return _merge_queue_stats(parts)

    async def running_by_tenant(self) -> dict[str, int]:
        totals: dict[str, int] = defaultdict(int)
        for counts in await self._each(lambda s: s.running_by_tenant()):
            for tenant, n in counts.items():
                totals[tenant] += n
        return dict(totals)

    async def wait_for_notification(self, timeout_s: float) -> bool:
        stores = self.active()
        if len(stores) == 1:
            return await stores[0].wait_for_notification(timeout_s)
        woken = False
        async with anyio.create_task_group() as nursery:
            async def wait(store: ScopedStore) -> None:
                nonlocal woken
                if await store.wait_for_notification(timeout_s):
                    woken = True
                    nursery.cancel_scope.cancel()

            for store in stores:
                nursery.start_soon(wait, store)
        return woken


    # -- fleet-wide tables: move only with the every-tenant route -------------------------

    async def pause_queue(self, queue: str, by: str) -> bool:
        return await self._for_tenant(None, lambda s: s.pause_queue(queue, by))

    async def resume_queue(self, queue: str) -> bool:
        return await self._for_tenant(None, lambda s: s.resume_queue(queue))

    async def paused_queues(self) -> set[str]:
        return await self.store_now(None).paused_queues()

    async def database_now(self) -> datetime:
        return await self.home.database_now()

    async def periodic_slots(self) -> dict[str, datetime]:
        return await self.store_now(None).periodic_slots()

    async def claim_periodic_slot(
        self, name: str, slot: datetime, request: EnqueueRequest | None
    ) -> SlotClaim:
        # The slot record and the job are written together, so both go where the job's
        # tenant lives (the slot moves with the every-tenant route, which covers the tenant).
        tenant = request.tenant_id if request is not None else None
        return await self._for_tenant(
            tenant, lambda s: s.claim_periodic_slot(name, slot, request))

    # -- job types: published into every database, read from home ------------------------

    async def publish_job_types(
        self, types: Sequence[JobTypeDefaults], by: str
    ) -> list[JobTypeChange]:
        # Every database a tenant may be served from: a producer reads the defaults in the
        # database its tenant's INSERT goes to. Not copied by `gochatd migrate`: each daemon
        # writes them here and into every destination it opens later (refresh_routes).
        self._published = (list(types), by)
        changes: dict[str, JobTypeChange] = {}
        for store in self._all_stores():
            for change in await store.publish_job_types(types, by):
                changes.setdefault(change.after.job_type, change)
        return list(changes.values())

    async def list_job_types(self) -> list[PublishedJobType]:
        return await self.home.list_job_types()



def _merge_queue_stats(parts: list[QueueStats]) -> list[QueueStats]:
    merged: dict[str, QueueStats] = {}
    for stats in parts:
        seen = merged.get(stats.queue)
        if seen is None:
            merged[stats.queue] = stats
            continue
        ages = [a for a in (seen.oldest_due_age_s, stats.oldest_due_age_s) if a is not None]
        merged[stats.queue] = QueueStats(
            queue=stats.queue, queued=seen.queued + stats.queued,
            delayed=seen.delayed + stats.delayed, running=seen.running + stats.running,
            retrying=seen.retrying + stats.retrying, dead=seen.dead + stats.dead,
            oldest_due_age_s=max(ages) if ages else None,
        )
    return sorted(merged.values(), key=lambda s: s.queue)


__all__ = ["ROUTES_SCHEMA", "RoutedStore"]
