"""Group commit for concurrent single enqueues.

Tasks that call ``Client.enqueue`` at the same time share one INSERT and one XADD pipeline:
each caller queues its request and waits for the flush lock; whoever gets the lock writes
everything queued so far (its own request and those that arrived while the previous write
was in flight). A lone sequential producer pays nothing extra (its batch is one job), and
eight concurrent producers pay one round trip per batch instead of one per job.

Each caller still gets its own answer: its row, or its own ``IdempotencyConflict``. A store
error fails every caller of that batch, as it would have failed each one alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio

from gochatd.errors import IdempotencyConflict, StoreUnavailable
from gochatd.model import EnqueueRequest, EnqueueResult

#: Most jobs written by one flush; the rest wait for the next.
MAX_GROUP = 512
WRITE_TIMEOUT_S = 30.0

WriteBatch = Callable[[Sequence[EnqueueRequest]], Awaitable[list[EnqueueResult]]]


@dataclass(eq=False)
class _Waiter:
    request: EnqueueRequest
    taken: bool = False
    result: EnqueueResult | None = None
    error: BaseException | None = None
    done: anyio.Event = field(default_factory=anyio.Event)


class GroupCommit:
    def __init__(self, write: WriteBatch) -> None:
        self._write = write
        self._queued: list[_Waiter] = []
        self._lock = anyio.Lock()

    async def submit(self, request: EnqueueRequest) -> EnqueueResult:
        waiter = _Waiter(request)
        self._queued.append(waiter)
        try:
            async with self._lock:
                while not waiter.taken:
                    await self._flush()
        except anyio.get_cancelled_exc_class():
            if not waiter.taken:  # never written: forget it
                self._queued.remove(waiter)
                raise
            # Already part of a write in flight: its outcome is as uncertain as a single
            # enqueue cancelled mid-round-trip, so report the cancellation.
            raise
        await waiter.done.wait()
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        if waiter.result.conflict:
            key = waiter.request.idempotency_key
            assert key is not None
            raise IdempotencyConflict(waiter.request.tenant_id, key, waiter.result.job.id)
        return waiter.result

    async def _flush(self) -> None:
        batch, self._queued = self._queued[:MAX_GROUP], self._queued[MAX_GROUP:]
        for waiter in batch:
            waiter.taken = True
        try:
            # Other callers' jobs ride on this write: one caller's cancellation must not
            # abandon them half-way. A write that hangs is still given up in the end.
            with anyio.CancelScope(shield=True) as scope:
                scope.deadline = anyio.current_time() + WRITE_TIMEOUT_S
                results = await self._write([w.request for w in batch])
            if scope.cancelled_caught:
                raise StoreUnavailable(f"enqueue: no answer from the store in {WRITE_TIMEOUT_S:g}s")
        except Exception as exc:
            for waiter in batch:
                waiter.error = exc
        else:
            for waiter, result in zip(batch, results, strict=True):
                waiter.result = result
        finally:
            for waiter in batch:
                waiter.done.set()
