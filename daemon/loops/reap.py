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


async def reap_once(worker: Worker, window: ReapWindow | None = None) -> int:
    """One pass; with ``window``, only leases that expired since its last complete pass
    and those of rows written since."""
    within_s, after_id = (None, None) if window is None else await window.begin(worker)
    result = await worker.store.reap_expired_leases(
        BATCH, expired_within_s=within_s, created_after_id=after_id)
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


class ReapWindow:
    """The reaper's keyset: leases that expired since the last complete pass (by time), and
    rows created since it (by id: foreign SQL may write a running row whose lease is long
    gone)."""

    def __init__(self) -> None:
        self.time = ScanWindow()
        self._after_id: int | None = None
        self._newest: int | None = None

    async def begin(self, worker: Worker) -> tuple[float | None, int | None]:
        self._newest = await worker.store.newest_job_id()
        within_s = self.time.begin()
        return within_s, None if within_s is None else self._after_id

    def complete(self) -> None:
        self.time.complete()
        self._after_id = self._newest


async def reap_loop(worker: Worker) -> None:
    window = ReapWindow()
    while True:
        try:
            if await reap_once(worker, window) >= BATCH:
                continue
        except StoreUnavailable as exc:
            worker.transient_error("reap", exc)
        await trio.sleep(worker.settings.worker_reap_interval_s)
