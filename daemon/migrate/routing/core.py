"""The routed store's core (``RouterBase``; store.py adds the job operations): the home
store and the destinations the route table names, their lifecycle, the re-read of the
routes, and the paths a call takes.

Without routes (the normal case) a call goes straight to the home store through
``_unless_routed``, the one fast path: a ``TenantMoved`` from the home database means a route
appeared since the last read, so the routes are re-read and the call takes the routed path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import anyio

from gochatd.errors import StoreUnavailable, TenantMoved
from gochatd.migrate.routing.view import _HOLD_POLL_S, ROUTES_SCHEMA, RouteView
from gochatd.model import DEFAULT_PRIORITY_AGING_S
from gochatd.obs.logs import get_logger
from gochatd.obs.redact import mask_url
from gochatd.store.base import JobStore
from gochatd.store.route_table import RouteTable, route_table
from gochatd.store.scope import TenantScope
from gochatd.worker.job_types import JobTypeDefaults
from gochatd.worker.runnable import ANY_TYPE, RunnableTypes

T = TypeVar("T")


class ScopedStore(JobStore, Protocol):
    """What the router needs of each database's store (both SQL stores are one)."""

    tenant_scope: TenantScope

    async def route_version(self) -> int: ...
    async def list_routes(self) -> list[tuple[str, str, str, int]]: ...
    async def ack_routes(self, worker_id: str, version: int) -> None: ...
    async def forget_route_ack(self, worker_id: str) -> None: ...


class RouterBase(RouteView[ScopedStore]):
    """Routes, stores and lifecycle; ``RoutedStore`` adds the ``JobStore`` operations."""

    def __init__(
        self, home: ScopedStore, open_destination: Callable[[str], ScopedStore], *,
        hold_s: float = 30.0,
    ) -> None:
        super().__init__(home)
        self.dialect: str = home.dialect
        self.has_notifications: bool = home.has_notifications
        self._open_destination = open_destination
        self.hold_s = hold_s
        self._routing = False  # the home schema has a route table
        self._limits: dict[str, int] = {}
        self._queue_limits: dict[str, int] = {}
        self._aging_s = DEFAULT_PRIORITY_AGING_S
        self._runnable = ANY_TYPE
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
    def queue_limits(self) -> dict[str, int]:
        return self._queue_limits

    @queue_limits.setter
    def queue_limits(self, limits: dict[str, int]) -> None:
        self._queue_limits = limits
        for store in self._all_stores():
            store.queue_limits = limits

    @property
    def priority_aging_s(self) -> float:
        return self._aging_s

    @priority_aging_s.setter
    def priority_aging_s(self, aging_s: float) -> None:
        self._aging_s = aging_s
        for store in self._all_stores():
            store.priority_aging_s = aging_s

    @property
    def runnable(self) -> RunnableTypes:
        return self._runnable

    @runnable.setter
    def runnable(self, runnable: RunnableTypes) -> None:
        self._runnable = runnable
        for store in self._all_stores():
            store.runnable = runnable

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
                store.queue_limits = self._queue_limits
                store.priority_aging_s = self._aging_s
                store.runnable = self._runnable
                self._destinations[url] = store
                say("route_destination_opened", destination=mask_url(url))
            self._apply(table)
            say("routes_changed", version=table.version,
                routes={t: r.state.value for t, r in table.routes.items()})
            return table

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
        return self.store_now(tenant_id)

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

    # -- the paths a call takes ------------------------------------------------------------

    async def _unless_routed(
        self, direct: bool, call: Callable[[ScopedStore], Awaitable[T]],
        routed: Callable[[], Awaitable[T]],
    ) -> T:
        """``call`` on the home store while ``direct`` (no route concerns this call), else
        ``routed()``. A ``TenantMoved`` from home means a route appeared since the last
        read: re-read the routes and take the routed path."""
        if direct:
            try:
                return await call(self.home)
            except TenantMoved:
                await self.refresh_routes(force=True)
        return await routed()

    # -- work across tenants: every active database, each within its scope -----------------

    async def _each(self, call: Callable[[ScopedStore], Awaitable[T]]) -> list[T]:
        try:
            return [await call(store) for store in self.active()]
        except TenantMoved:
            # A route changed since our last read and the database refused a moved tenant's
            # row: follow it now rather than at the next refresh, and go again.
            await self.refresh_routes(force=True)
            return [await call(store) for store in self.active()]
