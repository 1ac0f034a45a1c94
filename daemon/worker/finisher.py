"""The finisher: batches runners' fenced state changes into one store round trip, and XACKs
their stream entries once the states have committed: on the store's connection thread,
right after the commit, in the same thread hop (``ack_here``). When the store could not
(a batch routed to several databases, a batch with nothing to write) or an XACK there
failed a moment ago, a separate acker task XACKs them instead, after the commit too."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from gochatd.dispatch.entries import StreamEntry
from gochatd.dispatch.redis_streams import ACK_TIMEOUT_S, RedisStreams
from gochatd.errors import DispatchUnavailable, StoreUnavailable
from gochatd.model import Finish, Job
from gochatd.obs.logs import get_logger
from gochatd.store import JobStore

MAX_BATCH = 512
#: After an XACK on the store's thread failed, XACKs go to the acker task for this long: a
#: black-holed Redis then holds no finish (and no runner) for ``HERE_TIMEOUT_S``.
INLINE_ACK_PAUSE_S = 5.0
#: How long a finish may wait for other running jobs' finishes to share its UPDATE.
LINGER_S = 0.002


@dataclass(eq=False)
class InlineAck:
    """The XACK the store runs on its thread after the commit (``after_commit``); what
    happened is read back on the Trio side. It never raises: the states have committed."""

    streams: RedisStreams
    entries: list[StreamEntry]
    ran: bool = False
    error: str | None = None

    def __call__(self) -> None:
        self.ran = True
        try:
            self.streams.ack_here(self.entries)
        except Exception as exc:  # the finish stands; the entries are reclaimed later
            self.error = str(exc) or type(exc).__name__


@dataclass(eq=False)
class FinishRequest:
    finish: Finish | None  # None: nothing to write, only the entry to ack
    entry: StreamEntry | None
    job: Job | None = None  # for metrics labels
    done: trio.Event = field(default_factory=trio.Event)
    applied: bool = False


class Finisher:
    """Owns the receive end of the finish channel; the daemon owns the send end and closes
    it only after every runner has returned, so nothing is ever sent on a closed channel."""

    def __init__(
        self,
        store: JobStore,
        streams: Callable[[], RedisStreams | None],
        on_flushed: Callable[[list[FinishRequest]], None],
        running: Callable[[], int] = lambda: 0,
    ) -> None:
        self._store = store
        #: Jobs this worker holds (running or waiting for their finish to be written).
        self._running = running
        self._streams = streams
        self._on_flushed = on_flushed
        self.send_channel, self._receive_channel = trio.open_memory_channel[FinishRequest](
            math.inf
        )
        self.finished = trio.Event()
        self._log = get_logger(component="finisher")
        #: Until when XACKs go to the acker task (an XACK on the store's thread failed).
        self._inline_ack_paused_until = -math.inf

    async def submit(
        self, finish: Finish | None, entry: StreamEntry | None, job: Job | None = None
    ) -> bool:
        request = FinishRequest(finish, entry, job)
        self.send_channel.send_nowait(request)
        await request.done.wait()
        return request.applied

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # XACKs go to a separate acker: a batch's XACK round trip then overlaps the next
        # batch's write instead of queueing in front of it.
        ack_send, ack_receive = trio.open_memory_channel[list[StreamEntry]](math.inf)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._ack_loop, ack_receive)
                async with ack_send, self._receive_channel:
                    task_status.started()
                    async for first in self._receive_channel:
                        batch = await self._collect(first)
                        entries = await self._flush(batch)
                        if entries:
                            ack_send.send_nowait(entries)
        finally:
            self.finished.set()

    async def _collect(self, first: FinishRequest) -> list[FinishRequest]:
        """Everything waiting; and while other jobs are still running (their finishes are
        near), up to LINGER_S more, so a busy worker writes one UPDATE for several read
        batches. A lone job's finish is written at once."""
        batch = [first]
        self._take_waiting(batch)
        if len(batch) < MAX_BATCH and self._running() > len(batch):
            with trio.move_on_after(LINGER_S):
                while len(batch) < MAX_BATCH:
                    try:
                        batch.append(await self._receive_channel.receive())
                    except trio.EndOfChannel:
                        break
                    self._take_waiting(batch)
                    if self._running() <= len(batch):
                        break
        return batch

    def _take_waiting(self, batch: list[FinishRequest]) -> None:
        while len(batch) < MAX_BATCH:
            try:
                batch.append(self._receive_channel.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                return

    async def _flush(self, batch: list[FinishRequest]) -> list[StreamEntry]:
        """Write the batch's states (and XACK their entries in the same hop), release its
        runners; return the entries still to XACK (the acker's)."""
        finishes = [r.finish for r in batch if r.finish is not None]
        entries = [r.entry for r in batch if r.entry is not None]
        inline = self._inline_ack(entries) if finishes else None
        applied = await self._write(finishes, inline)
        if inline is not None and inline.ran:
            if inline.error is not None:
                self._log.warning("xack_failed", entries=len(entries), error=inline.error)
                self._inline_ack_paused_until = trio.current_time() + INLINE_ACK_PAUSE_S
            entries = []
        for request in batch:
            request.applied = request.finish is not None and request.finish.job_id in applied
        # The states have committed: release the runners (and their handler slots) now.
        self._on_flushed(batch)
        for request in batch:
            request.done.set()
        return entries

    def _inline_ack(self, entries: list[StreamEntry]) -> InlineAck | None:
        """The XACK for the store's thread, unless there is none to send or one failed
        there a moment ago."""
        streams = self._streams()
        if not entries or streams is None:
            return None
        if trio.current_time() < self._inline_ack_paused_until:
            return None
        return InlineAck(streams, entries)

    async def _ack_loop(self, receive: trio.MemoryReceiveChannel[list[StreamEntry]]) -> None:
        """XACK committed jobs' entries, merging whatever queued up meanwhile. The XACK only
        tidies the streams (unacked entries are reclaimed, and their jobs are no longer
        claimable, so the reclaim just acks them); it may hang while Redis is unreachable."""
        async with receive:
            async for first in receive:
                entries = list(first)
                while True:
                    try:
                        entries.extend(receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                streams = self._streams()
                if streams is None:
                    continue
                with trio.move_on_after(ACK_TIMEOUT_S) as ack_scope:
                    try:
                        await streams.ack(entries)
                    except DispatchUnavailable:
                        self._log.warning("xack_failed", entries=len(entries))
                if ack_scope.cancelled_caught:
                    self._log.warning("xack_failed", entries=len(entries), error="timeout")

    async def _write(self, finishes: list[Finish], inline: InlineAck | None) -> set[int]:
        """The fenced write, retried until the store answers; ``inline`` runs after the
        commit that answered (a retry that applies nothing still commits, then acks)."""
        delay = 0.05
        retried = False
        while True:
            try:
                applied = await self._store.finish_jobs(finishes, after_commit=inline)
            except StoreUnavailable as exc:
                self._log.warning("finish_retrying", error=str(exc), jobs=len(finishes))
                retried = True
                await trio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            if retried:
                applied |= await self._applied_before(finishes, applied)
            return applied

    async def _applied_before(self, finishes: list[Finish], applied: set[int]) -> set[int]:
        """After a failed round trip the first attempt may have committed: those rows now
        show our fence and target status (one query for the batch)."""
        unsure = [f for f in finishes if f.job_id not in applied]
        states = await self._store.get_job_states([f.job_id for f in unsure])
        return {f.job_id for f in unsure if states.get(f.job_id) == (f.fence, f.status)}
