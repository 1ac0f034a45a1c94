"""Scheduler and sweep (streams mode).

The scheduler XADDs jobs that became due without a stream entry (delayed jobs, retries,
foreign INSERTs, reaped leases) and then sleeps until the next due time by the database
clock, or until woken by an enqueue or a notification. Twice per ``sweep_interval_s`` the
sweep re-dispatches due jobs whose last dispatch is older than half the interval (lost
XADDs), topping up only what the stream is not already holding, and trims acknowledged
entries. So a lost XADD is healed within one ``sweep_interval_s``: a row marked just after a
pass is younger than half the interval at the next pass and older at the one after.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import trio

from gochatd.errors import DispatchUnavailable, StoreUnavailable
from gochatd.loops.scan_window import ScanWindow

if TYPE_CHECKING:
    from gochatd.dispatch.redis_streams import RedisStreams
    from gochatd.service import Worker

DISPATCH_BATCH = 500
SWEEP_TARGET = 1000
#: Marking rows dispatched and XADDing them is one step: a cancel in between (the worker
#: stopping) would leave rows marked but never added, stranded until the sweep.
DISPATCH_SHIELD_S = 15.0


async def dispatch_due(worker: Worker, streams: RedisStreams) -> int:
    with trio.CancelScope(shield=True), trio.move_on_after(DISPATCH_SHIELD_S):
        refs = await worker.store.dispatch_due_jobs(worker.queues, DISPATCH_BATCH)
        if refs:
            await streams.publish(refs)
            worker.counters["scheduled_dispatches"] += len(refs)
        return len(refs)
    return 0


def sweep_period_s(sweep_interval_s: float) -> float:
    """How often the sweep runs, and how old a dispatch must be for it to count as lost."""
    return sweep_interval_s / 2


async def sweep(worker: Worker, streams: RedisStreams, window: ScanWindow | None = None) -> int:
    """Re-dispatch jobs whose dispatch is older than a sweep interval; with ``window``, only
    those dispatched since its last complete pass (plus that interval)."""
    healed, left_behind = 0, False
    older_than_s = sweep_period_s(worker.settings.worker_redis_sweep_interval_s)
    within_s = window.begin() if window is not None else None
    for queue in worker.queues:
        room = SWEEP_TARGET - await streams.backlog(queue)
        refs = await worker.store.redispatch_stale_jobs(
            queue, older_than_s, room,
            dispatched_within_s=None if within_s is None else within_s + older_than_s,
        )
        left_behind = left_behind or len(refs) >= room
        if refs:
            await streams.publish(refs)
            healed += len(refs)
    if window is not None and not left_behind:
        window.complete()
    if healed:
        worker.counters["sweep_redispatched"] += healed
        worker.log.info("sweep_redispatched", jobs=healed)
    await streams.trim(worker.queues)
    return healed


async def schedule_loop(worker: Worker) -> None:
    from gochatd.service import Mode

    next_sweep = trio.current_time() + sweep_period_s(worker.settings.worker_redis_sweep_interval_s)
    window = ScanWindow()
    while True:
        streams = worker.streams
        if worker.mode is not Mode.STREAMS or streams is None:
            await worker.schedule_wakeup.wait(1.0)
            continue
        wait_s = math.inf
        try:
            if await dispatch_due(worker, streams) >= DISPATCH_BATCH:
                continue
            if trio.current_time() >= next_sweep:
                next_sweep = trio.current_time() + sweep_period_s(
                    worker.settings.worker_redis_sweep_interval_s
                )
                await sweep(worker, streams, window)
            due_in = await worker.store.next_due_in_s(worker.queues, undispatched_only=True)
            if due_in is not None:
                # Due already but locked by another dispatcher: look again shortly.
                wait_s = due_in if due_in > 0 else 0.01
        except (StoreUnavailable, DispatchUnavailable) as exc:
            worker.transient_error("schedule", exc)
            wait_s = 0.5
        wait_s = min(wait_s, max(0.0, next_sweep - trio.current_time()))
        await worker.schedule_wakeup.wait(wait_s)
