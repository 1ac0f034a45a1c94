"""Reaper: running jobs whose lease expired (by the database clock) go back to retrying,
or to dead once attempts are exhausted.

Runs at start, then sleeps until the earliest running lease expires (the database says when)
but at least ``reap_interval_s`` and at most ``lease_s`` (this daemon's: a lease taken after
a pass expires no sooner, unless a daemon with a shorter lease took it). So an idle fleet's
reaper looks once per ``lease_s``, and a lease that expires is reaped about when it does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.config.settings import Settings
from gochatd.errors import StoreUnavailable
from gochatd.loops.scan_window import ScanWindow
from gochatd.model import ReapResult
from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.store import JobStore
from gochatd.worker.wakeup import Wakeups

BATCH = 1000
#: Past the earliest expiry: the database clock must have passed it when the pass runs.
EXPIRY_MARGIN_S = 0.1


@dataclass(frozen=True, slots=True)
class ReapConfig:
    #: The shortest time between two passes.
    interval_s: float
    #: The longest: ``worker.lease_s``.
    max_wait_s: float = 30.0

    @classmethod
    def from_settings(cls, settings: Settings) -> ReapConfig:
        return cls(settings.worker_reap_interval_s, settings.worker_lease_s)

    def wait_s(self, expiry_in_s: float | None) -> float:
        """Until the next pass, given the seconds until the earliest lease expires."""
        longest = max(self.interval_s, self.max_wait_s)
        if expiry_in_s is None:
            return longest
        return min(longest, max(self.interval_s, expiry_in_s + EXPIRY_MARGIN_S))


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
        reaped = await self._store.reap_expired_leases(
            BATCH, expired_within_s=within_s, created_after_id=after_id)
        if window is not None and reaped.count < BATCH:
            window.complete()
        if reaped.count:
            self._counters.inc("leases_reaped", reaped.count)
            self._log.warning("leases_reaped", retried=[r.job_id for r in reaped.retried][:20],
                              dead=reaped.dead[:20])
            self._wakeups.new_work()
        return reaped

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        task_status.started()
        while True:
            wait_s = self.config.interval_s
            try:
                if (await self.run_once()).count >= BATCH:
                    continue
                wait_s = self.config.wait_s(await self._store.next_lease_expiry_in_s(
                    self._window.time.lookback_s()))
            except StoreUnavailable as exc:
                self._counters.transient_error("reap_failed", exc)
            await trio.sleep(wait_s)
