"""Reaper: running jobs whose lease expired (by the database clock) go back to retrying,
or to dead once attempts are exhausted. Runs at start and every ``reap_interval_s``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gochatd.errors import StoreUnavailable
from gochatd.loops.scan_window import ScanWindow

if TYPE_CHECKING:
    from gochatd.service import Worker

BATCH = 1000


async def reap_once(worker: Worker, window: ScanWindow | None = None) -> int:
    """One pass; with ``window``, only leases that expired since its last complete pass."""
    within_s = window.begin() if window is not None else None
    result = await worker.store.reap_expired_leases(BATCH, expired_within_s=within_s)
    count = len(result.retried) + len(result.dead)
    if window is not None and count < BATCH:
        window.complete()
    if count:
        worker.counters["reaped_leases"] += count
        worker.log.warning(
            "leases_reaped", retried=[r.job_id for r in result.retried][:20], dead=result.dead[:20]
        )
        worker.schedule_wakeup.set()
        worker.intake_wakeup.set()
    return count


async def reap_loop(worker: Worker) -> None:
    window = ScanWindow()
    while True:
        try:
            if await reap_once(worker, window) >= BATCH:
                continue
        except StoreUnavailable as exc:
            worker.transient_error("reap", exc)
        await trio.sleep(worker.settings.worker_reap_interval_s)
