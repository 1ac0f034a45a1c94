"""Handlers in every runtime inside one Trio daemon: asyncio handlers (through the daemon's
trio-asyncio loop) use asyncio's own APIs and are cancelled like Trio handlers on a timeout
or a shutdown, their task finished before the outcome is written; plain ``def`` handlers run
in threads and a timeout says so."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

import trio

import gochatd
from gochatd.context import JobContext
from gochatd.model import Job, JobStatus
from gochatd.store import JobStore
from gochatd.worker.registry import handler_spec
from gochatd.worker.runtimes import loop_for
from tests.integration.helpers import (
    make_registry,
    opened_store,
    started_worker,
    wait_all_status,
)
from tests.support.harness import make_settings
from tests.support.wait import wait_until


async def wait_status(store: JobStore, job_id: int, status: JobStatus, timeout_s: float) -> Job:
    return (await wait_all_status(store, [job_id], status, timeout_s=timeout_s))[job_id]


@dataclass(eq=False)
class AsyncioSide:
    """What the asyncio handlers saw, written from the asyncio loop's callbacks."""

    results: dict[int, int] = field(default_factory=dict)
    loops: set[int] = field(default_factory=set)
    tasks: dict[int, asyncio.Task[object]] = field(default_factory=dict)
    cleaned_up: list[int] = field(default_factory=list)
    started: list[int] = field(default_factory=list)


async def test_an_asyncio_handler_runs_jobs_with_asyncio_apis(pg_clean: str, redis_url: str) -> None:
    side = AsyncioSide()

    async def on_asyncio(ctx: JobContext) -> None:
        loop = asyncio.get_running_loop()
        side.loops.add(id(loop))
        queue: asyncio.Queue[int] = asyncio.Queue()
        # Two timers out of order: the queue hands them back in time order.
        loop.call_later(0.02, queue.put_nowait, ctx.payload["n"] * 2)
        loop.call_later(0.01, queue.put_nowait, ctx.payload["n"])
        first = await asyncio.wait_for(queue.get(), 30)
        second = await asyncio.wait_for(queue.get(), 30)
        await asyncio.sleep(0)
        side.results[ctx.job_id] = first + second

    registry = make_registry(handler_spec("aio:queue", on_asyncio, runtime="asyncio"))
    settings = make_settings(pg_clean, redis_url, worker_concurrency=10)
    async with started_worker(settings, registry=registry) as run:
        async with gochatd.Client(pg_clean, redis_url) as client:
            jobs = [await client.enqueue("aio:queue", {"n": n}) for n in range(20)]
        await wait_all_status(run.worker.store, [j.id for j in jobs], JobStatus.COMPLETED,
                              timeout_s=60)
    assert side.results == {j.id: 3 * n for n, j in enumerate(jobs)}
    assert len(side.loops) == 1, "one trio-asyncio loop for the daemon"


async def test_a_timeout_cancels_the_asyncio_task(pg_clean: str, redis_url: str) -> None:
    side = AsyncioSide()

    async def forever(ctx: JobContext) -> None:
        task = asyncio.current_task()
        assert task is not None
        side.tasks[ctx.job_id] = task
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0)  # cleanup may still await on asyncio
            side.cleaned_up.append(ctx.job_id)

    registry = make_registry(handler_spec("aio:forever", forever, runtime="asyncio",
                                          timeout_s=0.5, max_attempts=1))
    async with started_worker(make_settings(pg_clean, redis_url), registry=registry) as run:
        async with gochatd.Client(pg_clean, redis_url) as client:
            job = await client.enqueue("aio:forever", {})
        dead = await wait_status(run.worker.store, job.id, JobStatus.DEAD, timeout_s=30)
    assert dead.error_class == "timeout"
    assert dead.last_error == "handler timed out after 0.5s"
    task = side.tasks[job.id]
    assert task.done() and task.cancelled()
    assert side.cleaned_up == [job.id]


async def test_shutdown_cancels_a_running_asyncio_handler(pg_clean: str, redis_url: str) -> None:
    side = AsyncioSide()

    async def parked(ctx: JobContext) -> None:
        task = asyncio.current_task()
        assert task is not None
        side.tasks[ctx.job_id] = task
        side.started.append(ctx.job_id)
        try:
            await asyncio.Event().wait()
        finally:
            side.cleaned_up.append(ctx.job_id)

    registry = make_registry(handler_spec("aio:parked", parked, runtime="asyncio"))
    settings = make_settings(pg_clean, redis_url, worker_shutdown_grace_s=0.2)
    async with started_worker(settings, registry=registry) as run:
        async with gochatd.Client(pg_clean, redis_url) as client:
            job = await client.enqueue("aio:parked", {})

        async def running() -> bool:
            return job.id in side.started

        await wait_until(running, timeout_s=30, what="the asyncio handler started")
        assert await run.stop() == 0
    async with opened_store(pg_clean) as store:
        row = await wait_status(store, job.id, JobStatus.RETRYING, timeout_s=5)
    assert row.error_class == "interrupted" and row.attempts == 0  # refunded
    assert side.tasks[job.id].cancelled() and side.cleaned_up == [job.id]


async def test_a_plain_def_runs_in_a_thread_and_its_timeout_says_so(
    pg_clean: str, redis_url: str
) -> None:
    threads: dict[int, str] = {}
    release = threading.Event()

    def in_thread(ctx: JobContext) -> None:
        threads[ctx.job_id] = threading.current_thread().name
        if ctx.payload.get("hang"):
            release.wait(60)

    registry = make_registry(handler_spec("sync:work", in_thread, timeout_s=0.5, max_attempts=1))
    try:
        async with started_worker(make_settings(pg_clean, redis_url), registry=registry) as run:
            async with gochatd.Client(pg_clean, redis_url) as client:
                quick = await client.enqueue("sync:work", {})
                hung = await client.enqueue("sync:work", {"hang": True})
            await wait_status(run.worker.store, quick.id, JobStatus.COMPLETED, timeout_s=30)
            dead = await wait_status(run.worker.store, hung.id, JobStatus.DEAD, timeout_s=30)
    finally:
        release.set()
    assert threads[quick.id] != threading.main_thread().name
    assert dead.error_class == "timeout"
    assert dead.last_error == ("handler timed out after 0.5s in its thread "
                               "(the thread runs on until the function returns)")
    await trio.lowlevel.checkpoint()


def _ctx() -> JobContext:
    from gochatd.obs.logs import get_logger

    return JobContext(job_id=1, job_type="aio:x", queue="default", tenant_id="default",
                      payload={}, attempt=1, max_attempts=1, fence=1, log=get_logger())


async def test_an_asyncio_handler_cancelled_before_its_first_step_never_runs() -> None:
    ran: list[int] = []

    async def handler(ctx: JobContext) -> None:
        ran.append(ctx.job_id)

    spec = handler_spec("aio:x", handler, runtime="asyncio")
    async with loop_for({"asyncio"}):
        with trio.CancelScope() as scope:
            scope.cancel()
            await spec.fn(_ctx())
        assert scope.cancelled_caught
    assert ran == []  # and no "coroutine was never awaited" warning (warnings are errors)


async def test_an_asyncio_handler_that_swallows_its_cancellation_still_ends_cancelled() -> None:
    after: list[str] = []

    async def stubborn(ctx: JobContext) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            after.append("swallowed")

    spec = handler_spec("aio:x", stubborn, runtime="asyncio")
    async with loop_for({"asyncio"}):
        with trio.move_on_after(0.05) as scope:
            await spec.fn(_ctx())
            after.append("returned normally")  # never: the scope is checked after it
    assert scope.cancelled_caught and after == ["swallowed"]
