"""Pauses: follow the fleet-wide queue pauses stored in the database (admin API), so every
daemon stops claiming from a paused queue within ``REFRESH_S``."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import trio

from gochatd.errors import StoreUnavailable

if TYPE_CHECKING:
    from gochatd.service import Worker

REFRESH_S = 0.5
#: One refresh at a time per worker (the loop's and the admin API's after a pause): a read
#: that began before a pause committed must not overwrite the state read after it.
_REFRESH_LOCKS: weakref.WeakKeyDictionary[Worker, trio.Lock] = weakref.WeakKeyDictionary()


async def refresh_pauses(worker: Worker) -> None:
    async with _REFRESH_LOCKS.setdefault(worker, trio.Lock()):
        paused = frozenset(await worker.store.paused_queues())
        if paused != worker.paused_queues:
            worker.log.info("queue_pauses_changed", paused=sorted(paused))
            worker.paused_queues = paused
            worker.intake_wakeup.set()
            worker.slot_freed.set()


async def pauses_loop(worker: Worker) -> None:
    while True:
        try:
            await refresh_pauses(worker)
        except StoreUnavailable as exc:
            worker.transient_error("pauses", exc)
        await trio.sleep(REFRESH_S)
