"""Pauses: follow the fleet-wide queue pauses stored in the database (admin API), so every
daemon stops claiming from a paused queue within ``REFRESH_S``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.counters import Counters
from gochatd.logs import get_logger
from gochatd.loops.every import run_every
from gochatd.queues import QueueSelection
from gochatd.store import JobStore
from gochatd.wakeup import Wakeups

REFRESH_S = 0.5


@dataclass(frozen=True, slots=True)
class PausesResult:
    paused: frozenset[str]
    changed: bool


class PauseFollower:
    def __init__(self, *, store: JobStore, queues: QueueSelection, wakeups: Wakeups,
                 counters: Counters, worker_id: str) -> None:
        self._store = store
        self._queues = queues
        self._wakeups = wakeups
        self._counters = counters
        #: One refresh at a time (the loop's and the admin API's after a pause): a read
        #: that began before a pause committed must not overwrite the state read after it.
        self._lock = trio.Lock()
        self._log = get_logger(worker_id=worker_id)

    async def run_once(self) -> PausesResult:
        async with self._lock:
            paused = frozenset(await self._store.paused_queues())
            changed = paused != self._queues.paused
            if changed:
                self._log.info("queue_pauses_changed", paused=sorted(paused))
                self._queues.paused = paused
                self._wakeups.intake.set()
                self._wakeups.slot_freed.set()
            return PausesResult(paused, changed)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        await run_every("pauses", self.run_once, lambda: REFRESH_S, self._counters, task_status)
