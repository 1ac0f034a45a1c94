"""Reaper: running jobs whose lease expired (by the database clock) go back to retrying,
or to dead once attempts are exhausted. Runs at start and every ``reap_interval_s``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.config import Settings
from gochatd.counters import Counters
from gochatd.errors import StoreUnavailable
from gochatd.logs import get_logger
from gochatd.loops.scan_window import ScanWindow
from gochatd.store import JobStore
from gochatd.wakeup import Wakeups

BATCH = 1000


@dataclass(frozen=True, slots=True)
class ReapConfig:
    interval_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> ReapConfig:
        return cls(settings.worker_reap_interval_s)


@dataclass(frozen=True, slots=True)
class ReapResult:
    retried: int
    dead: int

    @property
    def count(self) -> int:
        return self.retried + self.dead


class ReapWindow:
    """The reaper's keyset: leases that expired since the last complete pass (by time), and
    rows created since it (by id: foreign SQL may write a running row whose lease is long
    gone)."""

    def __init__(self) -> None:
        self.time = ScanWindow()
        self._after_id: int | None = None
        self._newest: int | None = None

    async def begin(self, store: JobStore) -> tuple[float | None, int | None]:
        self._newest = await store.newest_job_id()
        within_s = self.time.begin()
        return within_s, None if within_s is None else self._after_id

    def complete(self) -> None:
        self.time.complete()
        self._after_id = self._newest


class Reaper:
    def __init__(self, config: ReapConfig, *, store: JobStore, counters: Counters,
                 wakeups: Wakeups, worker_id: str) -> None:
        self.config = config
        self._store = store
        self._counters = counters
        self._wakeups = wakeups
        self._window = ReapWindow()
        self._log = get_logger(worker_id=worker_id)

    def reconfigure(self, settings: Settings) -> None:
        self.config = ReapConfig.from_settings(settings)

    async def run_once(self, *, windowed: bool = True) -> ReapResult:
        """One pass; windowed, only leases that expired since the last complete pass and
        those of rows written since."""
        window = self._window if windowed else None
        within_s, after_id = (None, None) if window is None else await window.begin(self._store)
        result = await self._store.reap_expired_leases(
            BATCH, expired_within_s=within_s, created_after_id=after_id)
        reaped = ReapResult(len(result.retried), len(result.dead))
        if window is not None and reaped.count < BATCH:
            window.complete()
        if reaped.count:
            self._counters.inc("leases_reaped", reaped.count)
            self._log.warning("leases_reaped", retried=[r.job_id for r in result.retried][:20],
                              dead=result.dead[:20])
            self._wakeups.new_work()
        return reaped

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        task_status.started()
        while True:
            try:
                if (await self.run_once()).count >= BATCH:
                    continue
            except StoreUnavailable as exc:
                self._counters.transient_error("reap", exc)
            await trio.sleep(self.config.interval_s)
