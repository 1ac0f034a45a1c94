"""Pauses: follow the fleet-wide queue pauses stored in the database (admin API), so every
daemon stops claiming from a paused queue within ``REFRESH_S``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gochatd.errors import StoreUnavailable

if TYPE_CHECKING:
    from gochatd.service import Worker

REFRESH_S = 0.5


async def refresh_pauses(worker: Worker) -> None:
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
