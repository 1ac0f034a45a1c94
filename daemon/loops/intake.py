"""Intake: how this worker gets claimed jobs into its handler pool.

Streams mode reads with a shielded, bounded XREADGROUP (COUNT = free slots), claims the
delivered ids in one conditional UPDATE (or, in a queue holding other priorities than 0,
as many of the queue's first jobs: docs/priority.md) and acks entries whose jobs it did
not get.
Polling mode claims due jobs straight from the database (``FOR UPDATE SKIP LOCKED`` /
``BEGIN IMMEDIATE``), woken by local enqueues, database notifications and the next due time.
While Redis is configured but down the worker polls, probing Redis once a second, and
returns to streams without a restart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from gochatd.dispatch.redis_streams import RedisStreams, StreamEntry
from gochatd.errors import DispatchUnavailable, StoreUnavailable
from gochatd.model import ClaimedJob

if TYPE_CHECKING:
    from gochatd.service import Worker

PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 0.5
POLL_MIN_S = 0.01
#: Extra time a shielded read+claim may take beyond the BLOCK before we give up on it.
READ_SLACK_S = 15.0


async def intake_loop(worker: Worker) -> None:
    from gochatd.service import Mode

    while not worker.stopping:
        streams = worker.streams
        if streams is not None and await _streams_usable(worker, streams):
            worker.set_mode(Mode.STREAMS)
            try:
                await consume_streams(worker, streams)
            except DispatchUnavailable as exc:
                worker.transient_error("stream_read", exc)
        worker.set_mode(Mode.POLLING)
        await poll_database(worker, until_streams=streams is not None)


async def _streams_usable(worker: Worker, streams: RedisStreams) -> bool:
    try:
        await streams.ensure_groups(worker.queues)
    except DispatchUnavailable:
        return False
    return True


async def consume_streams(worker: Worker, streams: RedisStreams) -> None:
    reclaim_every_s = max(1.0, worker.lease_s / 2)
    next_reclaim = trio.current_time()
    # A read that found less than it could take means a trickle: block straight away next
    # time instead of first filling by weight (one round trip per read instead of two).
    fill_first = True
    while not worker.stopping:
        free = worker.free_slots()
        if free <= 0:
            await worker.slot_freed.wait(1.0)
            continue
        if trio.current_time() >= next_reclaim:
            next_reclaim = trio.current_time() + reclaim_every_s
            with trio.CancelScope(shield=True), trio.move_on_after(READ_SLACK_S):
                stranded = await streams.autoclaim(worker.intake_queues, worker.lease_s, free)
                if stranded:
                    worker.counters["reclaimed_entries"] += len(stranded)
                    await accept_entries(worker, streams, stranded)
            continue
        order = worker.queue_order()
        if not order:  # every queue paused
            await worker.intake_wakeup.wait(1.0)
            continue
        # Never cancel an in-flight XREADGROUP: the server may already have moved the entry
        # into our PEL. The read is bounded by BLOCK instead, and stop waits for it.
        with trio.CancelScope(shield=True), trio.move_on_after(
            streams.block_s + READ_SLACK_S
        ):
            entries = await streams.read(order, free, streams.block_s, fill_first=fill_first)
            fill_first = len(entries) >= free
            if entries:
                await accept_entries(worker, streams, entries)
        await trio.lowlevel.checkpoint()


async def accept_entries(
    worker: Worker, streams: RedisStreams, entries: list[StreamEntry]
) -> None:
    """Claim what the entries name; ack what we will not run; hand back what this worker
    may not start now (stopping, draining, paused, or a queue paused fleet-wide since the
    read began: a blocked XREADGROUP still returns entries of a queue paused meanwhile)."""
    if worker.stopping or worker.draining or worker.paused_local:
        await streams.hand_back(entries)
        return
    held = [e for e in entries if streams.queue_of(e.stream) in worker.paused_queues]
    if held:
        await streams.hand_back(held)
        entries = [e for e in entries if streams.queue_of(e.stream) not in worker.paused_queues]
    wanted: dict[int, StreamEntry] = {}
    drop: list[StreamEntry] = []
    # Per queue, one item per well-formed entry: its job id, or None when that id may not be
    # claimed (a duplicate, a job running here); each still stands for one job of its queue.
    delivered: dict[str, list[int | None]] = {}
    for entry in entries:
        ref = entry.parse()
        if ref is None:
            worker.counters["malformed_entries"] += 1
            worker.log.warning("stream_entry_malformed", stream=entry.stream,
                               entry_id=entry.entry_id, fields=sorted(entry.fields)[:8])
            drop.append(entry)
            continue
        tokens = delivered.setdefault(streams.queue_of(entry.stream), [])
        if ref.job_id in wanted or ref.job_id in worker.active:
            drop.append(entry)
            tokens.append(None)
        else:
            wanted[ref.job_id] = entry
            tokens.append(ref.job_id)
    try:
        claimed = await worker.store.claim_delivered_jobs(
            delivered, worker.worker_id, worker.lease_s)
    except StoreUnavailable as exc:
        worker.transient_error("claim", exc)
        await streams.hand_back(list(wanted.values()))
        await streams.ack(drop)
        await trio.sleep(0.5)
        return
    # Start what we claimed before anything else can fail or hang: the leases are ours now.
    # A job claimed in place of a named one (docs/priority.md) has no entry of ours: its
    # own entry stays in the stream and stands for the next job of its queue.
    worker.start_jobs(claimed, {c.id: wanted[c.id] for c in claimed if c.id in wanted})
    got = {c.id for c in claimed}
    drop.extend(e for job_id, e in wanted.items() if job_id not in got)
    await streams.ack(drop)


async def poll_database(worker: Worker, *, until_streams: bool) -> None:
    idle_s = POLL_MIN_S
    next_probe = trio.current_time() + PROBE_INTERVAL_S
    while not worker.stopping:
        if until_streams and trio.current_time() >= next_probe:
            next_probe = trio.current_time() + PROBE_INTERVAL_S
            assert worker.streams is not None
            # Bounded: a black-holed Redis answers nothing until the socket timeout, and
            # the poller must not stop claiming for that long once a second.
            with trio.move_on_after(PROBE_TIMEOUT_S):
                try:
                    await worker.streams.ping()
                    return
                except DispatchUnavailable:
                    pass
        free = worker.free_slots()
        if free <= 0:
            await worker.slot_freed.wait(PROBE_INTERVAL_S)
            continue
        try:
            # Shielded like a stream read: a claim cancelled after it committed would leave
            # jobs running under a lease nobody heartbeats.
            claimed: list[ClaimedJob] = []
            with trio.CancelScope(shield=True), trio.move_on_after(READ_SLACK_S):
                claimed = await worker.store.claim_due_jobs(
                    worker.queue_order(), free, worker.worker_id, worker.lease_s
                )
                worker.start_jobs(claimed)
            if claimed:
                idle_s = POLL_MIN_S
                continue
            next_due = await worker.store.next_due_in_s(
                worker.intake_queues, undispatched_only=False
            )
        except StoreUnavailable as exc:
            worker.transient_error("poll", exc)
            await trio.sleep(min(idle_s * 4, 2.0))
            idle_s = min(idle_s * 2, worker.settings.worker_poll_interval_max_s)
            continue
        timeout = idle_s
        if next_due is not None and next_due > 0:
            # Sleep until the next job is due (database clock), not a poll tick.
            timeout = min(next_due, max(idle_s, worker.settings.worker_poll_interval_max_s))
        if until_streams:
            timeout = min(timeout, max(0.0, next_probe - trio.current_time()))
        await worker.intake_wakeup.wait(timeout)
        idle_s = min(idle_s * 2, worker.settings.worker_poll_interval_max_s)
