"""Watchdog: pings systemd from the event loop itself (a wedged loop misses its pings and
systemd restarts the process) and keeps the STATUS= line current."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from gochatd.service import Worker

STATUS_EVERY_S = 5.0


async def watchdog_loop(worker: Worker) -> None:
    notifier = worker.notifier
    if not notifier.enabled:
        return
    interval = min(notifier.watchdog_interval_s or STATUS_EVERY_S, STATUS_EVERY_S)
    while True:
        if notifier.watchdog_interval_s is not None:
            notifier.watchdog()
        if worker.ready.is_set():
            notifier.status(worker.status_line())
        await trio.sleep(interval)
