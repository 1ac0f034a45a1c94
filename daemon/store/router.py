"""The routed store: one ``JobStore`` over the home database and, while tenants migrate,
their destinations (``gochatd migrate``; docs/migrate.md).

Every tenant is served by exactly one database at a time, read from the route table
(store/routes.py). Each underlying store is given a tenant scope, so work that spans
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
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

import anyio

from gochatd.errors import JobNotFound, StoreUnavailable, TenantMoved
from gochatd.job_types import JobTypeChange, JobTypeDefaults, PublishedJobType
from gochatd.logs import get_logger
from gochatd.model import (
    DEFAULT_PRIORITY_AGING_S,
    AfterCommit,
    ClaimedJob,
    DispatchRef,
    EnqueueRequest,
    EnqueueResult,
    Finish,
    Job,
    JobFilter,
    JobStatus,
    Lease,
    LeaseState,
    QueueStats,
    ReapResult,
)
from gochatd.outbox.model import OutboxFilter, OutboxMessage, OutboxStats
from gochatd.redact import mask_url
from gochatd.store.base import JobStore
from gochatd.store.periodic_slots import SlotClaim
from gochatd.store.routes import (
    EMPTY_ROUTES,
    EVERY_TENANT,
    RouteState,
    RouteTable,
    route_table,
)
from gochatd.store.scope import ALL, TenantScope

T = TypeVar("T")

#: The schema version that has the route table (sql/<dialect>/0007).
ROUTES_SCHEMA = 7
#: How often a held write re-reads the routes.
_HOLD_POLL_S = 0.05



class ScopedStore(JobStore, Protocol):
    """What the router needs of each database's store (both SQL stores are one)."""

    tenant_scope: TenantScope

    async def route_version(self) -> int: ...
    async def list_routes(self) -> list[tuple[str, str, str, int]]: ...
    async def ack_routes(self, worker_id: str, version: int) -> None: ...
    async def forget_route_ack(self, worker_id: str) -> None: ...


class RoutedStore:
    """A ``JobStore`` (see store/base.py for each method's contract)."""

    def __init__(
        self, home: ScopedStore, open_destination: Callable[[str], ScopedStore], *,
        hold_s: float = 30.0,
    ) -> None:
        self.home = home
        self.dialect: str = home.dialect
        self.has_notifications: bool = home.has_notifications
        self._open_destination = open_destination
        self._destinations: dict[str, ScopedStore] = {}
        self.routes: RouteTable = EMPTY_ROUTES
        self.hold_s = hold_s
        self._routing = False  # the home schema has a route table
        self._limits: dict[str, int] = {}
        self._aging_s = DEFAULT_PRIORITY_AGING_S
        self._refresh_lock = anyio.Lock()
        #: What this process published (a daemon: its handlers), again into each
        #: destination it opens later.
        self._published: tuple[list[JobTypeDefaults], str] | None = None
        self._log = get_logger(component="router")

    def __repr__(self) -> str:
        return f"RoutedStore({self.home!r})"

    # -- routes ----------------------------------------------------------------------------

    @property
    def tenant_limits(self) -> dict[str, int]:
        return self._limits

    @tenant_limits.setter
    def tenant_limits(self, limits: dict[str, int]) -> None:
        self._limits = limits
        for store in self._all_stores():
            store.tenant_limits = limits

    @property
    def priority_aging_s(self) -> float:
        return self._aging_s

    @priority_aging_s.setter
    def priority_aging_s(self, aging_s: float) -> None:
        self._aging_s = aging_s
        for store in self._all_stores():
            store.priority_aging_s = aging_s

    async def refresh_routes(self, *, force: bool = False) -> RouteTable:
        """Re-read the route table if its version moved; open destinations it names.

        A destination that cannot be opened leaves the previous table in force (and raises
        ``StoreUnavailable``): the daemon must not acknowledge a route it cannot follow."""
        if not self._routing:
            return self.routes
        async with self._refresh_lock:
            version = await self.home.route_version()
            if version == self.routes.version and not force:
                return self.routes
            table = route_table(await self.home.list_routes())
            # The first read (at open) is routine; later ones are the moves themselves.
            say = self._log.info if self.routes.version else self._log.debug
            for url in sorted(table.destinations() - set(self._destinations)):
                store = self._open_destination(url)
                try:
                    await store.open()
                    if self._published is not None:
                        # Before the route is followed (and acknowledged): the tenants'
                        # producers find this daemon's types in their new database.
                        await store.publish_job_types(*self._published)
                except BaseException:
                    await store.close()
                    raise
                store.tenant_limits = self._limits
                store.priority_aging_s = self._aging_s
                self._destinations[url] = store
                say("route_destination_opened", destination=mask_url(url))
            self._apply(table)
            say("routes_changed", version=table.version,
                routes={t: r.state.value for t, r in table.routes.items()})
            return table

    def _apply(self, table: RouteTable) -> None:
        self.routes = table
        self.home.tenant_scope = _home_scope(table)
        for url, store in self._destinations.items():
            store.tenant_scope = _destination_scope(table, url)

    def _all_stores(self) -> list[ScopedStore]:
        return [self.home, *self._destinations.values()]

    def _active(self) -> list[ScopedStore]:
        """The stores that serve at least one tenant now (home if none does)."""
        if not self.routes.moves_anything:
            return [self.home]
        active = [self.home] if not _serves_nothing(self.home.tenant_scope) else []
        for store in self._destinations.values():
            if not _serves_nothing(store.tenant_scope):
                active.append(store)
        return active or [self.home]

    def _store_now(self, tenant_id: str | None) -> ScopedStore:
        url = self.routes.destination_of(tenant_id)
        return self.home if url is None else self._destinations[url]

    async def _writer(self, tenant_id: str | None) -> ScopedStore:
        """The store that takes this tenant's writes, holding while its cutover runs."""
        if self.routes.is_frozen(tenant_id):
            deadline = anyio.current_time() + self.hold_s
            while self.routes.is_frozen(tenant_id):
                if anyio.current_time() >= deadline:
                    raise StoreUnavailable(
                        "a tenant's move to another database is taking longer than "
                        f"{self.hold_s:g}s; retry later")
                await anyio.sleep(_HOLD_POLL_S)
                await self.refresh_routes()
        return self._store_now(tenant_id)

    async def _for_tenant(
        self, tenant_id: str | None, call: Callable[[ScopedStore], Awaitable[T]]
    ) -> T:
        """Run one tenant's write where its rows are. ``TenantMoved`` means the route changed
        after our last read (the database's trigger saw it): re-read and go again."""
        for _ in range(3):
            store = await self._writer(tenant_id)
            try:
                return await call(store)
            except TenantMoved:
                await self.refresh_routes(force=True)
        raise TenantMoved()

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        await self.home.open()
        await self._start_routing()

    async def _start_routing(self) -> None:
        self._routing = await self.home.schema_version() >= ROUTES_SCHEMA
        if self._routing:
            await self.refresh_routes()

    async def close(self) -> None:
        stores, self._destinations = list(self._destinations.values()), {}
        for store in stores:
            await store.close()
        await self.home.close()

    async def migrate(self) -> list[str]:
        applied = await self.home.migrate()
        if not self._routing:
            await self._start_routing()
        return applied

    async def schema_version(self) -> int:
        return int(await self.home.schema_version())

    async def route_version(self) -> int:
        return int(await self.home.route_version()) if self._routing else 0

    async def ack_routes(self, worker_id: str, version: int) -> None:
        if self._routing:
            await self.home.ack_routes(worker_id, version)

    async def forget_route_ack(self, worker_id: str) -> None:
        if self._routing:
            await self.home.forget_route_ack(worker_id)

    # -- one tenant's writes ---------------------------------------------------------------

    async def enqueue(
        self, request: EnqueueRequest, *, after_commit: AfterCommit | None = None
    ) -> EnqueueResult:
        if not self.routes.routes:
            try:
                return await self.home.enqueue(request, after_commit=after_commit)
            except TenantMoved:  # a route appeared since our last read
                await self.refresh_routes(force=True)
        return await self._for_tenant(
            request.tenant_id, lambda s: s.enqueue(request, after_commit=after_commit))

    async def enqueue_many(
        self, requests: Sequence[EnqueueRequest], *, raise_on_conflict: bool = False,
        after_commit: AfterCommit | None = None,
    ) -> list[EnqueueResult]:
        if not self.routes.routes:
            try:
                return await self.home.enqueue_many(
                    requests, raise_on_conflict=raise_on_conflict, after_commit=after_commit)
            except TenantMoved:
                await self.refresh_routes(force=True)
        groups = _group(range(len(requests)), lambda i: requests[i].tenant_id)
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

    async def finish_jobs(self, finishes: Sequence[Finish]) -> set[int]:
        if not self.routes.routes:
            try:
                return await self.home.finish_jobs(finishes)
            except TenantMoved:
                await self.refresh_routes(force=True)
        applied: set[int] = set()

        async def finish_group(tenant: str, group: list[Finish]) -> None:
            if tenant:
                applied.update(await self._for_tenant(tenant, lambda s: s.finish_jobs(group)))
            else:  # no tenant given: each database applies the ones it holds
                for store in self._active():
                    applied.update(await store.finish_jobs(group))

        async with anyio.create_task_group() as nursery:  # a held tenant doesn't hold the others
            for tenant, group in _group(finishes, lambda f: f.tenant_id).items():
                nursery.start_soon(finish_group, tenant, group)
        return applied

    async def extend_leases(
        self, leases: Sequence[Lease], owner: str, lease_s: float
    ) -> list[LeaseState]:
        if not self.routes.routes:
            try:
                return await self.home.extend_leases(leases, owner, lease_s)
            except TenantMoved:
                await self.refresh_routes(force=True)
        states: list[LeaseState] = []

        async def extend_group(tenant: str, group: list[Lease]) -> None:
            if tenant:
                states.extend(await self._for_tenant(
                    tenant, lambda s: s.extend_leases(group, owner, lease_s)))
            else:
                for store in self._active():
                    states.extend(await store.extend_leases(group, owner, lease_s))

        async with anyio.create_task_group() as nursery:
            for tenant, group in _group(leases, lambda x: x.tenant_id).items():
                nursery.start_soon(extend_group, tenant, group)
        return states

    # -- work across tenants: every active database, each within its scope -----------------

    async def _each(self, call: Callable[[ScopedStore], Awaitable[T]]) -> list[T]:
        try:
            return [await call(store) for store in self._active()]
        except TenantMoved:
            # A route changed since our last read and the database refused a moved tenant's
            # row: follow it now rather than at the next refresh, and go again.
            await self.refresh_routes(force=True)
            return [await call(store) for store in self._active()]

    async def claim_jobs(self, ids: Sequence[int], owner: str, lease_s: float) -> list[ClaimedJob]:
        return _concat(await self._each(lambda s: s.claim_jobs(ids, owner, lease_s)))

    async def claim_delivered_jobs(
        self, delivered: Mapping[str, Sequence[int | None]], owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        if not self.routes.moves_anything:
            try:
                return await self.home.claim_delivered_jobs(delivered, owner, lease_s)
            except TenantMoved:
                await self.refresh_routes(force=True)
        # While tenants move, a job may live in either database: the named ids, on each
        # (stream order, not docs/priority.md's, for the duration of the move).
        ids = [job_id for queue_ids in delivered.values() for job_id in queue_ids
               if job_id is not None]
        return await self.claim_jobs(ids, owner, lease_s) if ids else []

    async def claim_due_jobs(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        if not self.routes.moves_anything:
            try:
                return await self.home.claim_due_jobs(queues, limit, owner, lease_s)
            except TenantMoved:
                await self.refresh_routes(force=True)
        claimed: list[ClaimedJob] = []
        for store in self._active():
            if len(claimed) >= limit:
                break
            claimed.extend(await store.claim_due_jobs(queues, limit - len(claimed), owner,
                                                      lease_s))
        return claimed

    async def claim_tenant_backlog(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        claimed: list[ClaimedJob] = []
        for store in self._active():
            if len(claimed) >= limit:
                break
            claimed.extend(await store.claim_tenant_backlog(queues, limit - len(claimed),
                                                            owner, lease_s))
        return claimed

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
        return _concat(await self._each(lambda s: s.dispatch_due_jobs(queues, limit)))

    async def redispatch_stale_jobs(
        self, queue: str, older_than_s: float, limit: int, *,
        dispatched_within_s: float | None = None,
    ) -> list[DispatchRef]:
        return _concat(await self._each(lambda s: s.redispatch_stale_jobs(
            queue, older_than_s, limit, dispatched_within_s=dispatched_within_s)))

    async def next_due_in_s(self, queues: Sequence[str], undispatched_only: bool) -> float | None:
        found = [x for x in await self._each(
            lambda s: s.next_due_in_s(queues, undispatched_only)) if x is not None]
        return min(found) if found else None

    async def get_job(self, job_id: int) -> Job | None:
        for store in self._active():
            job = await store.get_job(job_id)
            if job is not None:
                return job
        return None

    async def list_jobs(self, flt: JobFilter) -> list[Job]:
        if flt.tenant_id is not None:
            return await self._store_now(flt.tenant_id).list_jobs(flt)
        jobs = _concat(await self._each(lambda s: s.list_jobs(flt)))
        jobs.sort(key=lambda j: j.id)  # each database pages by ascending id
        return jobs[:flt.limit]

    async def retry_job(self, job_id: int) -> Job:
        job = await self._owner_of(job_id)
        return await self._for_tenant(job.tenant_id, lambda s: s.retry_job(job_id))

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

    async def prune_finished_jobs(self, status: JobStatus, older_than_s: float, limit: int) -> int:
        return sum(await self._each(
            lambda s: s.prune_finished_jobs(status, older_than_s, limit)))

    async def prune_change_tombstones(self, older_than_s: float, limit: int) -> int:
        stores = self._all_stores()  # tombstones have no tenant scope: every database
        return sum([await s.prune_change_tombstones(older_than_s, limit) for s in stores])

    async def count_prunable_jobs(self, status: JobStatus, older_than_s: float) -> int:
        return sum(await self._each(lambda s: s.count_prunable_jobs(status, older_than_s)))

    async def retry_dead_jobs(self, flt: JobFilter) -> list[int]:
        return _concat(await self._each(lambda s: s.retry_dead_jobs(flt)))

    async def queue_stats(self) -> list[QueueStats]:
        parts = _concat(await self._each(lambda s: s.queue_stats()))
        return _merge_queue_stats(parts)

    async def running_by_tenant(self) -> dict[str, int]:
        totals: dict[str, int] = defaultdict(int)
        for counts in await self._each(lambda s: s.running_by_tenant()):
            for tenant, n in counts.items():
                totals[tenant] += n
        return dict(totals)

    async def wait_for_notification(self, timeout_s: float) -> bool:
        stores = self._active()
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
        return await self._store_now(None).paused_queues()

    async def database_now(self) -> datetime:
        return await self.home.database_now()

    async def periodic_slots(self) -> dict[str, datetime]:
        return await self._store_now(None).periodic_slots()

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

    # -- outbox ----------------------------------------------------------------------------

    async def claim_outbox(
        self, channels: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[OutboxMessage]:
        claimed: list[OutboxMessage] = []
        for store in self._active():
            if len(claimed) >= limit:
                break
            claimed.extend(await store.claim_outbox(channels, limit - len(claimed), owner,
                                                    lease_s))
        return claimed

    async def complete_outbox(
        self, message: OutboxMessage, owner: str, provider_message_id: str | None
    ) -> float | None:
        return await self._for_tenant(
            message.tenant_id, lambda s: s.complete_outbox(message, owner, provider_message_id))

    async def retry_outbox(
        self, message: OutboxMessage, owner: str, delay_s: float, error_class: str
    ) -> bool:
        return await self._for_tenant(
            message.tenant_id, lambda s: s.retry_outbox(message, owner, delay_s, error_class))

    async def fail_outbox(self, message: OutboxMessage, owner: str, error_class: str) -> bool:
        return await self._for_tenant(
            message.tenant_id, lambda s: s.fail_outbox(message, owner, error_class))

    async def reap_outbox_leases(self, max_attempts: int, limit: int = 1000) -> list[int]:
        return _concat(await self._each(lambda s: s.reap_outbox_leases(max_attempts, limit)))

    async def get_outbox(self, message_id: int) -> OutboxMessage | None:
        for store in self._active():
            message = await store.get_outbox(message_id)
            if message is not None:
                return message
        return None

    async def list_outbox(self, flt: OutboxFilter) -> list[OutboxMessage]:
        rows = _concat(await self._each(lambda s: s.list_outbox(flt)))
        rows.sort(key=lambda m: m.id)
        return rows[:flt.limit]

    async def requeue_outbox(self, message_id: int) -> OutboxMessage | None:
        message = await self.get_outbox(message_id)
        if message is None:
            return None
        return await self._for_tenant(
            message.tenant_id, lambda s: s.requeue_outbox(message_id))

    async def outbox_stats(self) -> OutboxStats:
        parts = await self._each(lambda s: s.outbox_stats())
        if len(parts) == 1:
            return parts[0]
        counts: dict[Any, int] = defaultdict(int)
        for part in parts:
            for status, n in part.counts.items():
                counts[status] += n
        ages = [p.oldest_pending_age_s for p in parts if p.oldest_pending_age_s is not None]
        return OutboxStats(dict(counts), max(ages) if ages else None)


# -- scopes ------------------------------------------------------------------------------


def _home_scope(table: RouteTable) -> TenantScope:
    own = {t: r for t, r in table.routes.items() if t != EVERY_TENANT}
    gone = (RouteState.FROZEN, RouteState.DESTINATION)
    every = table.routes.get(EVERY_TENANT)
    if every is not None and every.state in gone:
        return TenantScope.only(t for t, r in own.items() if r.state not in gone)
    moved = [t for t, r in own.items() if r.state in gone]
    return TenantScope.all_except(moved) if moved else ALL


def _destination_scope(table: RouteTable, url: str) -> TenantScope:
    own = {t: r for t, r in table.routes.items() if t != EVERY_TENANT}
    every = table.routes.get(EVERY_TENANT)

    def here(state: RouteState, destination: str) -> bool:
        return state is RouteState.DESTINATION and destination == url

    if every is not None and here(every.state, every.destination):
        return TenantScope.all_except(t for t, r in own.items() if not here(r.state, r.destination))
    return TenantScope.only(t for t, r in own.items() if here(r.state, r.destination))


def _serves_nothing(scope: TenantScope) -> bool:
    return scope.only_listed and not scope.tenants


# -- merging -----------------------------------------------------------------------------


def _group(items: Iterable[Any], tenant_of: Callable[[Any], str | None]) -> dict[Any, list[Any]]:
    groups: dict[Any, list[Any]] = {}
    for item in items:
        groups.setdefault(tenant_of(item), []).append(item)
    return groups


def _concat(parts: Iterable[Iterable[T]]) -> list[T]:
    return [x for part in parts for x in part]


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
