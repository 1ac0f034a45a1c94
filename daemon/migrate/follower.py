"""Routes: follow the tenant route table (``gochatd migrate``) so that every daemon serves
a moved tenant from its new database within ``REFRESH_S``, and acknowledge each version:
the migrator's barrier waits until every live daemon has (docs/migrate.md).

The acknowledgement is repeated every ``ACK_EVERY_S`` even without a change, which is what
tells the migrator this daemon is alive (it counts acks younger than 15 s)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.counters import Counters
from gochatd.loops.every import run_every
from gochatd.store import RoutingStore
from gochatd.wakeup import Wakeups

REFRESH_S = 0.5
ACK_EVERY_S = 5.0


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
        self._acked_at = -ACK_EVERY_S

    async def run_once(self) -> RoutesResult:
        version = (await self._store.refresh_routes()).version
        changed = version != self._acked
        if not changed and trio.current_time() - self._acked_at < ACK_EVERY_S:
            return RoutesResult(version, acked=False, changed=False)
        # Acked only after the destinations it names were opened (refresh raises
        # otherwise): a daemon that cannot reach a destination holds the barrier.
        await self._store.ack_routes(self._worker_id, version)
        if changed:
            self._wakeups.intake.set()
        self._acked, self._acked_at = version, trio.current_time()
        return RoutesResult(version, acked=True, changed=changed)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        await run_every("routes", self.run_once, lambda: REFRESH_S, self._counters, task_status)

    async def forget_ack(self) -> None:
        """A stopped daemon no longer holds back the migrator's barrier."""
        await self._store.forget_route_ack(self._worker_id)
