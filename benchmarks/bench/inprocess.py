"""An in-process Worker for the bench, and the producer shapes it is measured with:
sequential, N concurrent tasks each awaiting one enqueue at a time, and a paced rate."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio

from benchmarks.bench.stats import StartTracker
from gochatd.client.client import Client
from gochatd.config.settings import Settings
from gochatd.model import Job
from gochatd.worker.registry import HandlerSpec, Registry
from gochatd.worker.service import Worker

Enqueue = Callable[[], Awaitable[Job]]


def bench_settings(url: str, redis_url: str, prefix: str, concurrency: int,
                   **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "database_url": url, "redis_url": redis_url, "worker_concurrency": concurrency,
        "worker_queues": {"default": 1}, "worker_redis_stream_prefix": prefix,
        "worker_redis_block_timeout_s": 1.0, "worker_db_pool_size": 8, "admin_listen": "off",
    }
    base.update(overrides)
    return Settings(**base)


@asynccontextmanager
async def running_worker(settings: Settings, tracker: StartTracker) -> AsyncIterator[Worker]:
    registry = Registry()
    registry.add(HandlerSpec("sys:noop", tracker.noop))
    worker = Worker(settings, registry=registry, migrate=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker.run)
        with trio.fail_after(60):
            await worker.lifecycle.ready.wait()
        try:
            yield worker
        finally:
            worker.request_stop()
            with trio.move_on_after(60):
                await worker.lifecycle.stopped.wait()


async def wait_completed(worker: Worker, target: int, timeout_s: float) -> float:
    """Return the perf_counter time at which ``target`` jobs had completed."""
    with trio.fail_after(timeout_s):
        # The counter belongs to the worker; a 2 ms poll is noise in a benchmark.
        while worker.counters["finished_completed"] < target:  # noqa: ASYNC110
            await trio.sleep(0.002)
    return time.perf_counter()


def noop_enqueue(client: Client, tracker: StartTracker | None = None,
                 **kwargs: Any) -> Enqueue:
    async def enqueue() -> Job:
        at = time.perf_counter()
        job = await client.enqueue("sys:noop", {}, **kwargs)
        if tracker is not None:
            tracker.enqueued(job.id, at)
        return job

    return enqueue


async def sequential(enqueue: Enqueue, count: int) -> float:
    """Jobs/s of one producer awaiting one enqueue at a time."""
    t0 = time.perf_counter()
    for _ in range(count):
        await enqueue()
    return count / (time.perf_counter() - t0)


async def concurrent(enqueue: Enqueue, count: int, producers: int) -> int:
    """``producers`` tasks, each awaiting one enqueue at a time; returns jobs enqueued."""
    per_task = count // producers

    async def produce() -> None:
        for _ in range(per_task):
            await enqueue()

    async with trio.open_nursery() as nursery:
        for _ in range(producers):
            nursery.start_soon(produce)
    return per_task * producers


async def paced(enqueue: Enqueue, rate: float, duration_s: float, max_in_flight: int = 256) -> int:
    """Offer ``rate`` jobs/s for ``duration_s``: each enqueue is its own task, started on a
    fixed schedule, so a slow call does not slow the offered rate (up to ``max_in_flight``).
    Returns the number of jobs offered."""
    total = max(1, math.floor(rate * duration_s))
    limiter = trio.CapacityLimiter(max_in_flight)

    async def one() -> None:
        async with limiter:
            await enqueue()

    t0 = trio.current_time()
    async with trio.open_nursery() as nursery:
        for i in range(total):
            await trio.sleep_until(t0 + i / rate)
            nursery.start_soon(one)
    return total
