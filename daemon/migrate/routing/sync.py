"""Tenant routes for ``SyncClient``: the routed store's rules (routing/view.py, core.py) on the
calling thread, with the store's units on lent connections.

The same rules as ``Client``'s routed store: without routes every call goes to the home
database; a ``TenantMoved`` from a database (its route trigger) re-reads the route table
and goes again where the tenant lives now; a tenant whose cutover runs (frozen) has its
writes held, at most ``hold_s``; work across tenants reads every database that serves one,
each within its tenant scope (the scopes are view.py's).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from gochatd.errors import StoreUnavailable, TenantMoved
from gochatd.migrate.routing.view import _HOLD_POLL_S, ROUTES_SCHEMA, RouteView
from gochatd.store import ops
from gochatd.store.db import Db
from gochatd.store.route_table import route_table
from gochatd.store.sql_store import SqlJobStore

T = TypeVar("T")
P = ParamSpec("P")


class SyncRoutes(RouteView[SqlJobStore]):
    """The home store and the destinations of moved tenants, each run on lent connections."""

    def __init__(self, home: SqlJobStore, open_destination: Callable[[str], SqlJobStore], *,
                 hold_s: float = 30.0) -> None:
        super().__init__(home)
        self._open_destination = open_destination
        self.hold_s = hold_s
        self._routing = False

    def start(self, schema_version: int) -> None:
        """After the schema check: read the routes if the schema has the route table."""
        self._routing = schema_version >= ROUTES_SCHEMA
        self.refresh()

    def refresh(self, *, force: bool = False) -> None:
        if not self._routing:
            return
        version = self.home.run_lent(ops.route_version)
        if version == self.routes.version and not force:
            return
        table = route_table(self.home.run_lent(ops.list_routes))
        for url in sorted(table.destinations() - set(self._destinations)):
            self._destinations[url] = self._open_destination(url)
        self._apply(table)

    def close(self) -> None:
        stores, self._destinations = list(self._destinations.values()), {}
        for store in [*stores, self.home]:
            store.close_lent()

    # -- where a call goes (RouteView: active, store_now) --------------------------------

    def _writer(self, tenant_id: str | None) -> SqlJobStore:
        deadline = time.monotonic() + self.hold_s
        while self.routes.is_frozen(tenant_id):
            if time.monotonic() >= deadline:
                raise StoreUnavailable(
                    "a tenant's move to another database is taking longer than "
                    f"{self.hold_s:g}s; retry later")
            time.sleep(_HOLD_POLL_S)
            self.refresh()
        return self.store_now(tenant_id)

    def for_tenant(self, tenant_id: str | None, fn: Callable[Concatenate[Db, P], T],
                   *args: P.args, **kwargs: P.kwargs) -> T:
        """One tenant's unit where its rows are (``RouterBase._for_tenant``), home directly
        while no route exists (``_unless_routed``)."""
        if not self.routes.routes:
            try:
                return self.home.run_lent(fn, *args, **kwargs)
            except TenantMoved:
                self.refresh(force=True)
        for _ in range(3):
            store = self._writer(tenant_id)
            try:
                return store.run_lent(fn, *args, **kwargs)
            except TenantMoved:
                self.refresh(force=True)
        raise TenantMoved()

    def each(self, fn: Callable[Concatenate[Db, P], T], *args: P.args,
             **kwargs: P.kwargs) -> list[T]:
        """The unit on every active database, each within its scope (``RouterBase._each``)."""
        try:
            return [s.run_lent(fn, *args, **kwargs) for s in self.active()]
        except TenantMoved:
            self.refresh(force=True)
            return [s.run_lent(fn, *args, **kwargs) for s in self.active()]


__all__ = ["SyncRoutes"]
