"""Group commit: concurrent ``Client.enqueue`` calls share one INSERT and one XADD pipeline,
and each caller still gets its own row, its own conflict and its own cancellation."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import trio
import trio.testing

import gochatd
from gochatd.errors import IdempotencyConflict
from gochatd.model import EnqueueRequest, EnqueueResult, JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import (
    Tracker,
    make_registry,
    sql,
    started_worker,
    wait_all_status,
)
from tests.support.e2e_jobs import upgrade
from tests.support.harness import make_settings


class _CountingWrites:
    """Wraps the client's real batch writer to record the size of each write."""

    def __init__(self, client: gochatd.Client) -> None:
        self.sizes: list[int] = []
        self._write = client._group._write
        client._group._write = self

    async def __call__(self, requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
        self.sizes.append(len(requests))
        return await self._write(requests)


async def test_concurrent_enqueues_share_writes_and_each_gets_its_own_job(
    backend_url: str, redis_url: str
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting()))
    settings = make_settings(backend_url, redis_url, worker_concurrency=20)
    got: dict[int, int] = {}
    async with started_worker(settings, registry=registry) as run:
        async with gochatd.Client(backend_url, redis_url) as client:
            writes = _CountingWrites(client)

            async def produce(p: int) -> None:
                for k in range(25):
                    job = await client.enqueue("test:count", {"p": p, "k": k})
                    got[p * 100 + k] = job.id
                    assert job.payload == {"p": p, "k": k}

            async with trio.open_nursery() as nursery:
                for p in range(8):
                    nursery.start_soon(produce, p)
        await wait_all_status(run.worker.store, list(got.values()), JobStatus.COMPLETED)
    assert len(set(got.values())) == 200
    assert sum(writes.sizes) == 200
    # Eight concurrent producers: far fewer writes than jobs.
    assert len(writes.sizes) < 150, writes.sizes
    assert max(writes.sizes) > 1
    assert sorted(tracker.executions) == sorted(got.values())
    assert set(tracker.executions.values()) == {1}


async def test_a_conflict_in_a_shared_write_fails_only_its_caller(
    backend_url: str
) -> None:
    await upgrade(backend_url)
    async with gochatd.Client(backend_url) as client:
        held = await client.enqueue("sys:noop", {"v": 1}, idempotency_key="k1")
        outcomes: dict[str, object] = {}
        release = trio.Event()

        async def slow_first_write(requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
            await release.wait()  # let the others queue up behind this write
            return await real(requests)

        real = client._group._write
        client._group._write = slow_first_write

        async def one(name: str, **kw: object) -> None:
            try:
                outcomes[name] = (await client.enqueue("sys:noop", **kw)).id  # type: ignore[arg-type]
            except IdempotencyConflict as exc:
                outcomes[name] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(one, "first", payload={"v": 0}))
            await trio.testing.wait_all_tasks_blocked()
            client._group._write = real
            nursery.start_soon(functools.partial(one, "same", payload={"v": 1}, idempotency_key="k1"))
            nursery.start_soon(functools.partial(one, "conflict", payload={"v": 2}, idempotency_key="k1"))
            nursery.start_soon(functools.partial(one, "plain", payload={"v": 3}))
            await trio.testing.wait_all_tasks_blocked()
            release.set()
    assert outcomes["same"] == held.id
    assert isinstance(outcomes["conflict"], IdempotencyConflict)
    assert outcomes["conflict"].existing_id == held.id
    assert isinstance(outcomes["first"], int) and isinstance(outcomes["plain"], int)
    rows = await sql(backend_url, "SELECT count(*) FROM background_jobs")
    assert int(rows[0][0]) == 3  # held, first, plain


async def test_a_caller_cancelled_before_its_write_leaves_nothing(
    backend_url: str
) -> None:
    await upgrade(backend_url)
    async with gochatd.Client(backend_url) as client:
        release = trio.Event()
        real = client._group._write

        async def blocked_write(requests: Sequence[EnqueueRequest]) -> list[EnqueueResult]:
            await release.wait()
            return await real(requests)

        client._group._write = blocked_write
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.enqueue, "sys:noop", {"who": "writer"})
            await trio.testing.wait_all_tasks_blocked()
            with trio.CancelScope() as waiting:
                nursery.start_soon(_cancel_soon, waiting)
                await client.enqueue("sys:noop", {"who": "cancelled"})
            assert waiting.cancelled_caught
            release.set()
    rows = await sql(backend_url, "SELECT payload FROM background_jobs")
    assert len(rows) == 1 and "writer" in str(rows[0][0])


async def _cancel_soon(scope: trio.CancelScope) -> None:
    await trio.testing.wait_all_tasks_blocked()
    scope.cancel()
