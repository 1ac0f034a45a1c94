"""Scheduler and sweep (streams mode).

The scheduler XADDs jobs that became due without a stream entry (delayed jobs, retries,
foreign INSERTs, reaped leases) and then sleeps until the next due time by the database
clock, or until woken by an enqueue or a notification. Twice per ``sweep_interval_s`` the
sweep re-dispatches due jobs whose last dispatch is older than half the interval (lost
XADDs), topping up only what the stream is not already holding, and trims acknowledged
entries. So a lost XADD is healed within one ``sweep_interval_s``: a row marked just after a
pass is younger than half the interval at the next pass and older at the one after. A pass
that filled a queue's room (``MAXLEN`` trimmed entries never read, Redis lost its data)
is followed by another within ``REFILL_AGAIN_S``, until the stranded jobs are back.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.config.settings import Settings
from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.errors import DispatchUnavailable, StoreUnavailable
from gochatd.loops.scan_window import ScanWindow
from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.store import JobStore
from gochatd.worker.lifecycle import Lifecycle, State
from gochatd.worker.queues import QueueSelection
from gochatd.worker.wakeup import Wakeup

DISPATCH_BATCH = 500
SWEEP_TARGET = 1000
#: After a pass that filled a queue's room (a stream trimmed or flushed under many jobs),
#: the next pass comes this soon instead of half an interval later; the room still bounds
#: each pass, so this never floods a stream.
REFILL_AGAIN_S = 1.0
#: Marking rows dispatched and XADDing them is one step: a cancel in between (the worker
#: stopping) would leave rows marked but never added, stranded until the sweep.
DISPATCH_SHIELD_S = 15.0


def sweep_period_s(sweep_interval_s: float) -> float:
    """How often the sweep runs, and how old a dispatch must be for it to count as lost."""
    return sweep_interval_s / 2


@dataclass(frozen=True, slots=True)
class ScheduleConfig:
    sweep_interval_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> ScheduleConfig:
        return cls(settings.worker_redis_sweep_interval_s)


@dataclass(frozen=True, slots=True)
class ScheduleResult:
    dispatched: int
    swept: int | None  # None: no sweep this pass
    wait_s: float  # until the next pass (next due job, next sweep)


class Scheduler:
    def __init__(self, config: ScheduleConfig, *, store: JobStore, streams: RedisStreams,
                 queues: QueueSelection, lifecycle: Lifecycle, wakeup: Wakeup,
                 counters: Counters, worker_id: str) -> None:
        self.config = config
        self._store = store
        self._streams = streams
        self._queues = queues
        self._lifecycle = lifecycle
        self._wakeup = wakeup
        self._counters = counters
        self._window = ScanWindow()
        self._next_sweep: float | None = None
        self._refilled = False  # the last pass filled a queue's room: more may be stranded
        self._log = get_logger(worker_id=worker_id)

    def reconfigure(self, settings: Settings) -> None:
        self.config = ScheduleConfig.from_settings(settings)

    async def dispatch_due(self) -> int:
        with trio.CancelScope(shield=True), trio.move_on_after(DISPATCH_SHIELD_S):
            refs = await self._store.dispatch_due_jobs(self._queues.queues, DISPATCH_BATCH)
            if refs:
                await self._streams.publish(refs)
                self._counters.inc("due_jobs_dispatched", len(refs))
            return len(refs)
        return 0

    async def sweep(self, *, windowed: bool = True) -> int:
        """Re-dispatch jobs whose dispatch is older than a sweep interval; windowed, only
        those dispatched since the last complete pass (plus that interval)."""
        older_than_s = sweep_period_s(self.config.sweep_interval_s)
        within_s = self._window.begin() if windowed else None
        # Trimmed first: what a stream then holds bounds its backlog (group_backlog).
        await self._streams.trim(self._queues.queues)
        rooms = {queue: SWEEP_TARGET - await self._streams.backlog(queue)
                 for queue in self._queues.queues}
        refs = await self._store.redispatch_stale_jobs(
            rooms, older_than_s,
            dispatched_within_s=None if within_s is None else within_s + older_than_s,
        )
        if refs:
            await self._streams.publish(refs)
        healed = len(refs)
        found = Counter(ref.queue for ref in refs)
        left_behind = any(found[queue] >= room for queue, room in rooms.items())
        self._refilled = any(0 < room <= found[queue] for queue, room in rooms.items())
        if windowed and not left_behind:
            self._window.complete()
        if healed:
            self._counters.inc("sweep_redispatched", healed)
            self._log.info("sweep_redispatched", jobs=healed)
        return healed

    async def run_once(self) -> ScheduleResult:
        """Dispatch what is due; sweep when its time has come; say how long to wait."""
        period_s = sweep_period_s(self.config.sweep_interval_s)
        if self._next_sweep is None:
            self._next_sweep = trio.current_time() + period_s
        dispatched = await self.dispatch_due()
        if dispatched >= DISPATCH_BATCH:
            return ScheduleResult(dispatched, None, 0.0)
        swept = None
        if trio.current_time() >= self._next_sweep:
            self._next_sweep = trio.current_time() + period_s
            swept = await self.sweep()
            if self._refilled:
                self._next_sweep = min(self._next_sweep, trio.current_time() + REFILL_AGAIN_S)
        wait_s = math.inf
        due_in = await self._store.next_due_in_s(self._queues.queues, undispatched_only=True)
        if due_in is not None:
            # Due already but locked by another dispatcher: look again shortly.
            wait_s = due_in if due_in > 0 else 0.01
        wait_s = min(wait_s, max(0.0, self._next_sweep - trio.current_time()))
        return ScheduleResult(dispatched, swept, wait_s)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        task_status.started()
        while True:
            if self._lifecycle.dispatch is not State.STREAMS:
                await self._wakeup.wait(1.0)
                continue
            try:
                wait_s = (await self.run_once()).wait_s
            except (StoreUnavailable, DispatchUnavailable) as exc:
                self._counters.transient_error("schedule_failed", exc)
                wait_s = 0.5
            if self._next_sweep is not None:
                wait_s = min(wait_s, max(0.0, self._next_sweep - trio.current_time()))
            await self._wakeup.wait(wait_s)
