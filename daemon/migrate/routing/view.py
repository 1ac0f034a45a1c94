"""The route table seen as tenant scopes: which database serves which tenant now
(``RouteView``), the scope each database gets from the table, and the merging of the parts
that work across tenants reads from each database. Both the routed store (core.py,
store.py) and ``SyncClient``'s routes (sync.py) decide here where a call goes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

from gochatd.model import Job, JobFilter
from gochatd.store.route_table import EMPTY_ROUTES, EVERY_TENANT, RouteState, RouteTable
from gochatd.store.scope import ALL, TenantScope

T = TypeVar("T")

#: The schema version that has the route table (sql/<dialect>/0007).
ROUTES_SCHEMA = 7
#: How often a held write re-reads the routes.
_HOLD_POLL_S = 0.05


class Scoped(Protocol):
    tenant_scope: TenantScope


S = TypeVar("S", bound=Scoped)


class RouteView(Generic[S]):
    """Which database serves which tenant now: the route table, applied to the home store
    and the destinations as their tenant scopes. The routed store and ``SyncClient``'s
    routes (migrate/routing/sync.py) decide where a call goes here."""

    def __init__(self, home: S) -> None:
        self.home = home
        self._destinations: dict[str, S] = {}
        self.routes: RouteTable = EMPTY_ROUTES

    def _apply(self, table: RouteTable) -> None:
        self.routes = table
        self.home.tenant_scope = home_scope(table)
        for url, store in self._destinations.items():
            store.tenant_scope = destination_scope(table, url)

    def _all_stores(self) -> list[S]:
        return [self.home, *self._destinations.values()]

    def active(self) -> list[S]:
        """The stores that serve at least one tenant now (home if none does)."""
        if not self.routes.moves_anything:
            return [self.home]
        active = [self.home] if not serves_nothing(self.home.tenant_scope) else []
        for store in self._destinations.values():
            if not serves_nothing(store.tenant_scope):
                active.append(store)
        return active or [self.home]

    def store_now(self, tenant_id: str | None) -> S:
        url = self.routes.destination_of(tenant_id)
        return self.home if url is None else self._destinations[url]


# -- scopes ------------------------------------------------------------------------------


def home_scope(table: RouteTable) -> TenantScope:
    own = {t: r for t, r in table.routes.items() if t != EVERY_TENANT}
    gone = (RouteState.FROZEN, RouteState.DESTINATION)
    every = table.routes.get(EVERY_TENANT)
    if every is not None and every.state in gone:
        return TenantScope.only(t for t, r in own.items() if r.state not in gone)
    moved = [t for t, r in own.items() if r.state in gone]
    return TenantScope.all_except(moved) if moved else ALL


def destination_scope(table: RouteTable, url: str) -> TenantScope:
    own = {t: r for t, r in table.routes.items() if t != EVERY_TENANT}
    every = table.routes.get(EVERY_TENANT)

    def here(state: RouteState, destination: str) -> bool:
        return state is RouteState.DESTINATION and destination == url

    if every is not None and here(every.state, every.destination):
        return TenantScope.all_except(t for t, r in own.items() if not here(r.state, r.destination))
    return TenantScope.only(t for t, r in own.items() if here(r.state, r.destination))


def serves_nothing(scope: TenantScope) -> bool:
    return scope.only_listed and not scope.tenants



# -- merging -----------------------------------------------------------------------------


def group_by(items: Iterable[Any], tenant_of: Callable[[Any], str | None]) -> dict[Any, list[Any]]:
    groups: dict[Any, list[Any]] = {}
    for item in items:
        groups.setdefault(tenant_of(item), []).append(item)
    return groups


def concat(parts: Iterable[Iterable[T]]) -> list[T]:
    return [x for part in parts for x in part]



def merge_pages(pages: Iterable[list[Job]], flt: JobFilter) -> list[Job]:
    """One page of ``flt`` from each database's page: each pages in the filter's order, so
    merge in it."""
    jobs = concat(pages)
    if flt.scheduled:
        jobs.sort(key=lambda j: (j.scheduled_at, j.id))
    else:
        jobs.sort(key=lambda j: j.id, reverse=flt.newest_first)
    return jobs[:flt.limit]
