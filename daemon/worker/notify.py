"""Notify: other processes' new work wakes this one at once (PostgreSQL LISTEN/NOTIFY from
a trigger, SQLite's data_version). Only a wake-up: the database claim decides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.errors import StoreUnavailable
from gochatd.obs.counters import Counters
from gochatd.store import JobStore
from gochatd.worker.wakeup import Wakeups

WAIT_S = 5.0
BACKOFF_MAX_S = 5.0


@dataclass(frozen=True, slots=True)
class NotifyResult:
    woke: bool


class NotifyListener:
    def __init__(self, *, store: JobStore, wakeups: Wakeups, counters: Counters) -> None:
        self._store = store
        self._wakeups = wakeups
        self._counters = counters

    async def run_once(self) -> NotifyResult:
        woke = await self._store.wait_for_notification(WAIT_S)
        if woke:
            self._wakeups.new_work()
        return NotifyResult(woke)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        task_status.started()
        backoff_s = 0.1
        while True:
            try:
                await self.run_once()
                backoff_s = 0.1
            except StoreUnavailable as exc:
                self._counters.transient_error("listen_failed", exc)
                await trio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, BACKOFF_MAX_S)
