"""Tenant routes: which database holds each tenant's rows (``gochatd migrate``).

The route table lives in the home database (the one the daemons are configured with); see
sql/<dialect>/0007_change_tracking.up.sql for its states. This module is the read side: a
snapshot of the table and what it means for one tenant. The migrator writes the rows
(daemon/migrate/route_control.py); the routed store (migrate/routing/store.py) acts on them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from gochatd.store.core import StoreCore

#: The route row that covers every tenant without one of its own, and the fleet-wide tables.
EVERY_TENANT = "*"


class RouteState(enum.StrEnum):
    TRACKING = "tracking"  # being copied; home stays the writer
    FROZEN = "frozen"  # cutover in progress: hold writes; home refuses them
    DESTINATION = "destination"  # moved: use the destination
    SOURCE = "source"  # moved back or abandoned: home is the writer again


@dataclass(frozen=True, slots=True)
class Route:
    tenant_id: str
    state: RouteState
    #: The destination URL (never with a password: libpq's PGPASSWORD/.pgpass supply it).
    destination: str
    version: int


@dataclass(frozen=True, slots=True)
class RouteTable:
    """One read of the route table; replaced wholesale on every change."""

    version: int = 0
    routes: Mapping[str, Route] = field(default_factory=dict)

    def route_of(self, tenant_id: str | None) -> Route | None:
        """The tenant's own route, else the every-tenant one (``None``: the fleet-wide
        tables, which only the every-tenant route moves)."""
        own = self.routes.get(tenant_id) if tenant_id is not None else None
        return own if own is not None else self.routes.get(EVERY_TENANT)

    def destination_of(self, tenant_id: str | None) -> str | None:
        """Where the tenant's rows are served from: a destination URL, or None for home."""
        route = self.route_of(tenant_id)
        if route is not None and route.state is RouteState.DESTINATION:
            return route.destination
        return None

    def is_frozen(self, tenant_id: str | None) -> bool:
        route = self.route_of(tenant_id)
        return route is not None and route.state is RouteState.FROZEN

    def destinations(self) -> set[str]:
        """Every destination a daemon should hold open: tracked ones too, so that it can
        reach a destination before it acknowledges the route (the migrator waits for that)."""
        return {r.destination for r in self.routes.values() if r.state is not RouteState.SOURCE}

    @property
    def moves_anything(self) -> bool:
        return any(r.state in (RouteState.FROZEN, RouteState.DESTINATION)
                   for r in self.routes.values())


def route_table(rows: list[tuple[str, str, str, int]]) -> RouteTable:
    """From ``list_routes`` rows: (tenant_id, state, destination, version)."""
    routes = {t: Route(t, RouteState(s), d, int(v)) for t, s, d, v in rows}
    return RouteTable(max((r.version for r in routes.values()), default=0), routes)


EMPTY_ROUTES = RouteTable()


class SqlRouteOps(StoreCore):
    """Mixed into ``SqlJobStore``: the daemon's reads of the route table and its acks."""

    async def route_version(self) -> int:
        return int((await self._read("route_version", {}))[0][0])

    async def list_routes(self) -> list[tuple[str, str, str, int]]:
        return [(r[0], r[1], r[2], int(r[3])) for r in await self._read("list_routes", {})]

    async def ack_routes(self, worker_id: str, version: int) -> None:
        await self._write("ack_routes", {"worker_id": worker_id, "version": version})

    async def forget_route_ack(self, worker_id: str) -> None:
        await self._write("forget_route_ack", {"worker_id": worker_id})
