"""Pauses: follow the fleet-wide queue pauses stored in the database (admin API), so every
daemon stops claiming from a paused queue promptly. On PostgreSQL a pause or resume is
announced (NOTIFY, migration 0016) and the table is read when it is, and every
``FALLBACK_S`` in case an announcement was lost; elsewhere (SQLite, a pooler without a
listen URL) it is read every ``REFRESH_S``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.loops.every import run_on_change
from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.store import JobStore
from gochatd.worker.queues import QueueSelection
from gochatd.worker.wakeup import Wakeups

REFRESH_S = 0.5
FALLBACK_S = 30.0


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
        await run_on_change("pauses_failed", "pauses", self.run_once, self._store, short_s=REFRESH_S,
                            fallback_s=FALLBACK_S, counters=self._counters,
                            task_status=task_status)
