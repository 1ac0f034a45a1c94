"""Notify: other processes' new work wakes this one at once (PostgreSQL LISTEN/NOTIFY from
a trigger, SQLite's data_version). Only a wake-up: the database claim decides."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gochatd.errors import StoreUnavailable

if TYPE_CHECKING:
    from gochatd.service import Worker


async def notify_loop(worker: Worker) -> None:
    backoff_s = 0.1
    while True:
        try:
            woke = await worker.store.wait_for_notification(5.0)
            backoff_s = 0.1
        except StoreUnavailable as exc:
            worker.transient_error("listen", exc)
            await trio.sleep(backoff_s)
            backoff_s = min(backoff_s * 2, 5.0)
            continue
        if woke:
            worker.intake_wakeup.set()
            worker.schedule_wakeup.set()
