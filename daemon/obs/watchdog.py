"""Watchdog: pings systemd from the event loop itself (a wedged loop misses its pings and
systemd restarts the process) and keeps the STATUS= line current. Started only when
``$NOTIFY_SOCKET`` is set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.obs.sdnotify import Notifier
from gochatd.worker.lifecycle import Lifecycle

STATUS_EVERY_S = 5.0


@dataclass(frozen=True, slots=True)
class WatchdogResult:
    pinged: bool
    status: str | None


class Watchdog:
    def __init__(self, *, notifier: Notifier, lifecycle: Lifecycle) -> None:
        self._notifier = notifier
        self._lifecycle = lifecycle

    @property
    def enabled(self) -> bool:
        return self._notifier.enabled

    @property
    def interval_s(self) -> float:
        return min(self._notifier.watchdog_interval_s or STATUS_EVERY_S, STATUS_EVERY_S)

    def run_once(self) -> WatchdogResult:
        pinged = self._notifier.watchdog_interval_s is not None
        if pinged:
            self._notifier.watchdog()
        status = None
        if self._lifecycle.ready.is_set():
            status = self._lifecycle.status_line()
            self._notifier.status(status)
        return WatchdogResult(pinged, status)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        task_status.started()
        while True:
            self.run_once()
            await trio.sleep(self.interval_s)
