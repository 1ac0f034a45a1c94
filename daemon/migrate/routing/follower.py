"""Routes: follow the tenant route table (``gochatd migrate``) so that every daemon serves
a moved tenant from its new database promptly, and acknowledge each version: the migrator's
barrier waits until every live daemon has (docs/migrate.md).

A fleet that never moves a tenant pays nothing for this: on PostgreSQL a route change is
announced (NOTIFY, migration 0016), and the table is read when it is, and every
``FALLBACK_S`` in case an announcement was lost; elsewhere (SQLite, a pooler without a listen
URL) it is read every ``REFRESH_S``. Each version is acknowledged once: the barrier takes a
daemon's liveness from its fleet heartbeat (loops/fleet.py), not from repeated acks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.loops.every import run_on_change
from gochatd.obs.counters import Counters
from gochatd.store import RoutingStore
from gochatd.worker.wakeup import Wakeups

REFRESH_S = 0.5
FALLBACK_S = 30.0


@dataclass(frozen=True, slots=True)
class RoutesResult:
    version: int
    acked: bool
    changed: bool


class RouteFollower:
    def __init__(self, *, store: RoutingStore, worker_id: str, wakeups: Wakeups,
                 counters: Counters) -> None:
        self._store = store
        self._worker_id = worker_id
        self._wakeups = wakeups
        self._counters = counters
        self._acked: int | None = None

    async def run_once(self) -> RoutesResult:
        version = (await self._store.refresh_routes()).version
        if version == self._acked:
            return RoutesResult(version, acked=False, changed=False)
        # Acked only after the destinations it names were opened (refresh raises
        # otherwise): a daemon that cannot reach a destination holds the barrier.
        await self._store.ack_routes(self._worker_id, version)
        changed = self._acked is not None
        if changed:
            self._wakeups.intake.set()
        self._acked = version
        return RoutesResult(version, acked=True, changed=changed)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        await run_on_change("routes_failed", "routes", self.run_once, self._store, short_s=REFRESH_S,
                            fallback_s=FALLBACK_S, counters=self._counters,
                            task_status=task_status)

    async def forget_ack(self) -> None:
        """A stopped daemon no longer holds back the migrator's barrier."""
        await self._store.forget_route_ack(self._worker_id)
