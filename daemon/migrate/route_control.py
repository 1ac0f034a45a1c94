"""The migrator's side of tenant routes: set a route's state, and wait for the fleet.

Routes live in the source (the daemons' home database); the states are described in
sql/<dialect>/0007_change_tracking.up.sql and store/route_table.py. Every change raises the
table's version and is announced (NOTIFY on PostgreSQL, migration 0016); each daemon follows
it (migrate/routing/follower.py) and acknowledges each version it sees in ``gochatd_route_acks``.
``wait_for_fleet`` is the barrier: it returns once every live daemon has seen a version. A
daemon is live while its fleet heartbeat (``gochatd_daemons``, loops/fleet.py) or its last
acknowledgement (a daemon of an older release re-acknowledges every 5 s) is within
``LIVE_S`` by the database clock.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gochatd.migrate.backends import Database, Endpoint, query
from gochatd.migrate.canonical import epoch_to_utc
from gochatd.migrate.tables import Table
from gochatd.store.route_table import EVERY_TENANT, RouteState
from gochatd.store.sqlite import sqlite_url_path

#: A daemon whose fleet heartbeat or acknowledgement is this recent counts as live
#: (loops/fleet.ALIVE_S).
LIVE_S = 15.0
#: How often the barrier re-reads the acknowledgements.
_POLL_S = 0.1


@dataclass(frozen=True, slots=True)
class RouteRow:
    tenant_id: str
    state: RouteState
    destination: str
    version: int
    readonly_until: datetime | None
    window_over: bool


@dataclass(frozen=True, slots=True)
class FleetAck:
    """The barrier's outcome: which live daemons have seen the version, and which not."""

    version: int
    acked: tuple[str, ...]
    waiting: tuple[str, ...]
    seconds: float

    @property
    def complete(self) -> bool:
        return not self.waiting

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "acked": len(self.acked), "live": len(self.acked)
                + len(self.waiting), "waiting_for": list(self.waiting),
                "seconds": round(self.seconds, 3)}


def route_key(scope: str | None) -> str:
    """The route row of a scope: a tenant's own, or the every-tenant one for ``--all``."""
    return EVERY_TENANT if scope is None else scope


def route_url(destination: Endpoint) -> str:
    """What a route stores: no password (the daemons get it from PGPASSWORD or .pgpass,
    libpq's own places), and a SQLite path made absolute so every daemon finds the file."""
    if destination.dialect == "sqlite":
        return "sqlite:///" + str(Path(sqlite_url_path(destination.url)).resolve())
    parts = urlsplit(destination.url)
    if parts.password is None:
        return destination.url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = (f"{parts.username}@" if parts.username else "") + host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def get_route(source: Database, key: str) -> RouteRow | None:
    rows = source.fetch(query(source.dialect, "route_get"), {"tenant": key})
    return _row(rows[0]) if rows else None


def list_routes(source: Database) -> list[RouteRow]:
    return [_row(r) for r in source.fetch(query(source.dialect, "route_list"))]


def prepare_tracking(database: Database) -> list[str]:
    """Change tracking (migrations 0007, 0010), in the source and the destination of a move:
    catch-up reads the source's numbers, rollback the destination's. It costs every write,
    so a database that never takes part in a move runs without it."""
    if database.fetch(query(database.dialect, "change_tracking_installed"))[0][0]:
        return []
    database.execute_script(query(database.dialect, "install_change_tracking"))
    return ["change tracking"]


def prepare_source(source: Database) -> list[str]:
    """What only a move needs in the source, installed by the first ``start``: change
    tracking, the read-only guard of moved tenants and the catch-up index. Each costs every
    write, so a database that never moves anything has none. Returns what was installed now."""
    done = prepare_tracking(source)
    if not source.fetch(query(source.dialect, "route_guard_installed"))[0][0]:
        source.execute_script(query(source.dialect, "install_route_guard"))
        done.append("the read-only guard of moved tenants")
    if source.dialect == "postgres":  # CONCURRENTLY: one statement per query
        for name in ("jobs", "outbox", "dependencies", "batches"):
            source.execute(query(source.dialect, f"install_change_index_{name}"))
    else:
        source.execute_script(query(source.dialect, "install_change_indexes"))
    return done


def set_route(source: Database, key: str, destination: str, state: RouteState, *,
              window_s: float | None = None) -> int:
    """Upsert the route; the new table version."""
    rows = source.fetch(query(source.dialect, "route_set"), {
        "tenant": key, "destination": destination, "state": state.value,
        "window_s": window_s})
    return int(rows[0][0])


def fleet_acks(source: Database, version: int) -> FleetAck:
    acks = source.fetch(query(source.dialect, "route_acks"), {"live_s": LIVE_S})
    return FleetAck(version, tuple(w for w, v in acks if int(v) >= version),
                    tuple(w for w, v in acks if int(v) < version), 0.0)


def wait_for_fleet(source: Database, version: int, timeout_s: float) -> FleetAck:
    """Poll the acknowledgements until every live daemon has seen ``version`` or the
    timeout passes; the last reading either way."""
    started = time.monotonic()
    while True:
        seen = fleet_acks(source, version)
        elapsed = time.monotonic() - started
        if seen.complete or elapsed >= timeout_s:
            return FleetAck(seen.version, seen.acked, seen.waiting, elapsed)
        time.sleep(_POLL_S)


def destination_writes_after(destination: Database, tenant: str | None, after: int) -> int:
    """Rows of the scope the destination itself wrote after ``after`` (its own counter)."""
    rows = destination.fetch(query(destination.dialect, "destination_writes_after"),
                             {"tenant": tenant, "after": after})
    return int(rows[0][0])


#: Room left between the source's ids and the destination's after a partial move: both
#: keep allocating, and an id must name one row in the fleet (a job, a reply, an edge, a
#: batch): a later move of another tenant into the same destination upserts by id.
ID_GAP = 1 << 40


def separate_ids(source: Database, destination: Database,
                 tables: Sequence[Table]) -> dict[str, int]:
    """Put the destination's next ids of each table far above the source's; the floors set."""
    floors: dict[str, int] = {}
    for table in tables:
        if not table.serial_key:
            continue
        floor = int(source.fetch(query(source.dialect, "last_id", table))[0][0]) + ID_GAP
        destination.execute(query(destination.dialect, "id_floor", table), {"floor": floor})
        if destination.dialect == "sqlite":
            destination.execute(query(destination.dialect, "id_floor_existing", table),
                                {"floor": floor})
        floors[table.name] = floor
    return floors


def _row(row: tuple[Any, ...]) -> RouteRow:
    tenant, state, destination, version, until, over = row
    if until is not None and not isinstance(until, datetime):
        until = epoch_to_utc(float(until))  # SQLite keeps epoch seconds
    return RouteRow(tenant, RouteState(state), destination, int(version), until, bool(over))
