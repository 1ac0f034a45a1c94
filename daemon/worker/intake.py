"""Intake: how this worker gets claimed jobs into its job pool.

Streams mode reads with a shielded, bounded XREADGROUP (COUNT = free slots), claims the
delivered ids in one conditional UPDATE (or, in a queue holding other priorities than 0,
as many of the queue's first jobs: docs/priority.md) and acks entries whose jobs it did
not get. An entry naming a job type this daemon cannot run is acked unclaimed (the job
waits for a daemon with its handler: docs/job-types.md). Every claim takes only the
daemon's job types (``store.runnable``).
Polling mode claims due jobs straight from the database (``FOR UPDATE SKIP LOCKED`` /
``BEGIN IMMEDIATE``), woken by local enqueues, database notifications and the next due time.
While Redis is configured but down, or refusing writes (``maxmemory`` with ``noeviction``:
reads work but no XADD arrives), the worker polls, probing Redis once a second (a task of
its own: an unanswered probe never holds the poller), and
returns to streams without a restart; it says so (``dispatch/outage.py``: a warning with
backoff, the error counter, the reason /readyz shows). Claimed jobs start in the pool
(``start_jobs``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import trio

from gochatd.config.rates import QueueRate
from gochatd.config.settings import Settings
from gochatd.dispatch.entries import StreamEntry
from gochatd.dispatch.outage import RedisOutage
from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.errors import DispatchUnavailable, StoreUnavailable
from gochatd.io.handoff import abandoned_on_cancel
from gochatd.model import ClaimedJob
from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.store import JobStore
from gochatd.worker.lifecycle import Lifecycle, State
from gochatd.worker.pool import JobPool
from gochatd.worker.queues import QueueSelection
from gochatd.worker.rate_limit import RateLimitedClaims
from gochatd.worker.wakeup import Wakeups

PROBE_INTERVAL_S = 1.0
PROBE_TIMEOUT_S = 0.5
POLL_MIN_S = 0.01
#: Extra time a shielded read+claim may take beyond the BLOCK before we give up on it.
READ_SLACK_S = 15.0


@dataclass(frozen=True, slots=True)
class IntakeConfig:
    lease_s: float
    poll_interval_max_s: float
    queue_rates: Mapping[str, QueueRate] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> IntakeConfig:
        return cls(settings.worker_lease_s, settings.worker_poll_interval_max_s,
                   settings.worker_queue_rates)


@dataclass(frozen=True, slots=True)
class IntakeResult:
    claimed: int
    read: int = 0  # streams: entries read
    next_due_in_s: float | None = None  # polling: when the next job is due, if known


class Intake:
    def __init__(self, config: IntakeConfig, *, store: JobStore, streams: RedisStreams | None,
                 pool: JobPool, queues: QueueSelection, lifecycle: Lifecycle,
                 wakeups: Wakeups, counters: Counters, worker_id: str) -> None:
        self.config = config
        self._store = store
        self._streams = streams
        self._pool = pool
        self._queues = queues
        self._lifecycle = lifecycle
        self._wakeups = wakeups
        self._counters = counters
        self._worker_id = worker_id
        self._log = get_logger(worker_id=worker_id)
        #: Every claim goes through it: rate-limited queues (worker.queue_rates) count their
        #: window; the rest is the store's claim.
        self.claims = RateLimitedClaims(store, config.queue_rates)
        self.outage = (RedisOutage(streams.url, counters=counters, worker_id=worker_id)
                       if streams is not None else None)

    def reconfigure(self, settings: Settings) -> None:
        self.config = IntakeConfig.from_settings(settings)
        self.claims.reconfigure(settings.worker_queue_rates)

    async def run(self) -> None:
        """Until the worker stops claiming: streams while Redis answers, else polling."""
        streams = self._streams
        while not self._lifecycle.stopping:
            if streams is not None and await self._streams_usable(streams):
                self._lifecycle.dispatching(State.STREAMS)
                try:
                    await self._consume(streams)
                except DispatchUnavailable as exc:
                    self._redis_failed(exc)
            self._lifecycle.dispatching(State.POLLING)
            await self._poll(until_streams=streams is not None)

    async def _streams_usable(self, streams: RedisStreams) -> bool:
        try:
            await streams.ensure_groups(self._queues.queues)
        except DispatchUnavailable as exc:
            self._redis_failed(exc)
            return False
        if self.outage is not None:
            self.outage.answered()
            self._lifecycle.degraded = None
        return True

    def _redis_failed(self, exc: DispatchUnavailable | str) -> None:
        assert self.outage is not None
        self.outage.failed(exc)
        self._lifecycle.degraded = self.outage.degraded

    # -- streams ---------------------------------------------------------------------------

    async def _consume(self, streams: RedisStreams) -> None:
        reclaim_every_s = max(1.0, self.config.lease_s / 2)
        next_reclaim = trio.current_time()
        # A read that found less than it could take means a trickle: block straight away
        # next time instead of first filling by weight (one round trip per read, not two).
        fill_first = True
        while not self._lifecycle.stopping:
            if streams.writes_refused:  # nothing new reaches the streams: poll instead
                raise DispatchUnavailable("redis refuses writes (maxmemory)")
            free = self._pool.free_slots()
            if free <= 0:
                await self._wakeups.slot_freed.wait(1.0)
                continue
            if trio.current_time() >= next_reclaim:
                next_reclaim = trio.current_time() + reclaim_every_s
                await self.reclaim_once(streams, free)
                continue
            order = self._queues.order()
            if not order:  # every queue paused
                await self._wakeups.intake.wait(1.0)
                continue
            result = await self.read_once(streams, order, free, fill_first=fill_first)
            fill_first = result.read >= free
            await trio.lowlevel.checkpoint()

    async def reclaim_once(self, streams: RedisStreams, free: int) -> IntakeResult:
        """Entries idle longer than a lease in any consumer's pending list (dead ones)."""
        with trio.CancelScope(shield=True), trio.move_on_after(READ_SLACK_S):
            stranded = await streams.autoclaim(self._queues.intake, self.config.lease_s, free)
            if stranded:
                self._counters.inc("reclaimed_stream_entries", len(stranded))
                return IntakeResult(await self.accept_entries(streams, stranded))
        return IntakeResult(0)

    async def read_once(self, streams: RedisStreams, order: list[str], free: int, *,
                        fill_first: bool) -> IntakeResult:
        # Never cancel an in-flight XREADGROUP: the server may already have moved the entry
        # into our PEL. The read is bounded by BLOCK instead, and stop waits for it.
        with trio.CancelScope(shield=True), trio.move_on_after(streams.block_s + READ_SLACK_S):
            entries = await streams.read(order, free, streams.block_s, fill_first=fill_first)
            self._queues.charge(order, Counter(streams.queue_of(e.stream) for e in entries))
            claimed = await self.accept_entries(streams, entries) if entries else 0
            return IntakeResult(claimed, len(entries))
        return IntakeResult(0)

    async def accept_entries(self, streams: RedisStreams, entries: list[StreamEntry]) -> int:
        """Claim what the entries name; ack what we will not run; hand back what this worker
        may not start now (not claiming, or a queue paused fleet-wide since the read began:
        a blocked XREADGROUP still returns entries of a queue paused meanwhile). Returns
        how many jobs it claimed."""
        if not self._lifecycle.claiming:
            await streams.hand_back(entries)
            return 0
        paused = self._queues.paused
        held = [e for e in entries if streams.queue_of(e.stream) in paused]
        if held:
            await streams.hand_back(held)
            entries = [e for e in entries if streams.queue_of(e.stream) not in paused]
        wanted, drop, delivered = self._sort_entries(streams, entries)
        try:
            claimed = await self.claims.claimer().claim_delivered_jobs(
                delivered, self._worker_id, self.config.lease_s)
        except StoreUnavailable as exc:
            self._counters.transient_error("claim_failed", exc)
            await streams.hand_back(list(wanted.values()))
            await streams.ack(drop)
            await trio.sleep(0.5)
            return 0
        # Start what we claimed before anything else can fail or hang: the leases are ours
        # now. A job claimed in place of a named one (docs/priority.md) has no entry of
        # ours: its own entry stays in the stream and stands for the next job of its queue.
        self._pool.start_jobs(claimed, {c.id: wanted[c.id] for c in claimed if c.id in wanted})
        got = {c.id for c in claimed}
        drop.extend(e for job_id, e in wanted.items() if job_id not in got)
        await streams.ack(drop)
        return len(claimed)

    def _sort_entries(
        self, streams: RedisStreams, entries: list[StreamEntry]
    ) -> tuple[dict[int, StreamEntry], list[StreamEntry], dict[str, list[int | None]]]:
        """(entries to claim by job id, entries to ack, per queue one item per well-formed
        entry: its job id, or None when that id may not be claimed (a duplicate, a job
        running here); each still stands for one job of its queue)."""
        wanted: dict[int, StreamEntry] = {}
        drop: list[StreamEntry] = []
        delivered: dict[str, list[int | None]] = {}
        runnable = self._store.runnable
        for entry in entries:
            ref = entry.parse()
            if ref is None:
                self._counters.inc("malformed_stream_entries")
                self._log.warning("malformed_stream_entry_dropped", stream=entry.stream,
                                  entry_id=entry.entry_id, fields=sorted(entry.fields)[:8])
                drop.append(entry)
                continue
            if ref.job_type and not runnable.can_run(ref.job_type):
                # Not ours to run: acked, and it stands for no job of its queue here. The
                # job stays queued for a daemon with its handler (its claims, its sweep).
                # An entry without the type is left to the claim's own filter.
                self._counters.inc("stream_entries_without_handler")
                drop.append(entry)
                continue
            tokens = delivered.setdefault(streams.queue_of(entry.stream), [])
            if ref.job_id in wanted or ref.job_id in self._pool.jobs:
                drop.append(entry)
                tokens.append(None)
            else:
                wanted[ref.job_id] = entry
                tokens.append(ref.job_id)
        return wanted, drop, delivered

    # -- polling ---------------------------------------------------------------------------

    async def _poll(self, *, until_streams: bool) -> None:
        """Poll until the worker stops claiming; with Redis configured, until a probe
        (its own task, once a second) finds it answering again. The probe never holds the
        poller: an unanswered connect waits out the socket timeout on its thread."""
        redis_back = trio.Event()
        async with trio.open_nursery() as nursery:
            if until_streams:
                nursery.start_soon(self._probe_redis, redis_back)
            await self._poll_until(redis_back)
            nursery.cancel_scope.cancel()

    async def _poll_until(self, redis_back: trio.Event) -> None:
        idle_s = POLL_MIN_S
        while not self._lifecycle.stopping and not redis_back.is_set():
            free = self._pool.free_slots()
            if free <= 0:
                await self._wakeups.slot_freed.wait(PROBE_INTERVAL_S)
                continue
            max_s = self.config.poll_interval_max_s
            try:
                result = await self.poll_once(free)
            except StoreUnavailable as exc:
                self._counters.transient_error("poll_failed", exc)
                await trio.sleep(min(idle_s * 4, 2.0))
                idle_s = min(idle_s * 2, max_s)
                continue
            if result.claimed:
                idle_s = POLL_MIN_S
                continue
            timeout = idle_s
            next_due = result.next_due_in_s
            if next_due is not None and next_due > 0:
                # Sleep until the next job is due (database clock), not a poll tick.
                timeout = min(next_due, max(idle_s, max_s))
            timeout = self.claims.next_open_in_s(timeout)  # a rate-limited queue's window
            await self._wakeups.intake.wait(timeout)
            idle_s = min(idle_s * 2, max_s)

    async def _probe_redis(self, redis_back: trio.Event) -> None:
        """Once a second until Redis answers; then wake the poller to switch back."""
        while True:
            await trio.sleep(PROBE_INTERVAL_S)
            if await self._redis_answers():
                break
        redis_back.set()
        self._wakeups.intake.set()
        self._wakeups.slot_freed.set()

    async def _redis_answers(self) -> bool:
        assert self._streams is not None
        # Bounded, and given up at once: a black-holed Redis answers nothing until the
        # socket timeout (its thread waits that out; its answer is dropped).
        with abandoned_on_cancel(), trio.move_on_after(PROBE_TIMEOUT_S):
            try:
                await self._streams.ping()
                if self._streams.writes_refused:
                    await self._streams.check_writable()
                return True
            except DispatchUnavailable as exc:
                self._redis_failed(exc)
                return False
        self._redis_failed(f"no answer within {PROBE_TIMEOUT_S}s")
        return False

    async def poll_once(self, free: int) -> IntakeResult:
        """Claim up to ``free`` due jobs; when none, ask when the next one is due."""
        # Shielded like a stream read: a claim cancelled after it committed would leave
        # jobs running under a lease nobody heartbeats.
        claimed: list[ClaimedJob] = []
        order = self._queues.order()
        with trio.CancelScope(shield=True), trio.move_on_after(READ_SLACK_S):
            claimed = await self.claims.claimer().claim_due_jobs(
                order, free, self._worker_id, self.config.lease_s)
            self._pool.start_jobs(claimed)
        self._queues.charge(order, Counter(c.job.queue for c in claimed))
        if claimed:
            return IntakeResult(len(claimed))
        return IntakeResult(0, next_due_in_s=await self._store.next_due_in_s(
            self.claims.unheld(self._queues.intake), undispatched_only=False))
