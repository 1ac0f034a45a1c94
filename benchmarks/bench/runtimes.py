"""Every Python runtime (issue 12), on one backend (PostgreSQL + Redis by default), durable:

1. producers, one job per call, sequential, in alternating rounds: ``SyncClient.enqueue``
   from a thread (no event loop), ``Client.enqueue`` under Trio and under ``asyncio.run``;
2. handlers: an in-process worker drains a backlog of no-op jobs written for Trio, for
   asyncio (through the daemon's trio-asyncio loop) and as a plain ``def`` (a thread); the
   process CPU per job from the first start to the last completion, in alternating rounds.
   Every round's worker registers all three, so each drain runs with the same loops open;
   the difference to the Trio drain is a runtime's overhead per job;
3. the handler call alone (``*_handler_call_cpu_us``): the wrapped no-op handler awaited
   ``count`` times in a row inside the daemon's trio-asyncio loop, no worker, no database.

Figures are medians over the rounds (``runtimes.*``).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from benchmarks.bench.inprocess import bench_settings, wait_completed
from benchmarks.bench.options import BenchOptions
from benchmarks.bench.report import Report, progress
from benchmarks.bench.scratch import drop_streams, scratch_database, stream_prefix
from gochatd.client.client import Client
from gochatd.client.sync_client import SyncClient
from gochatd.context import JobContext
from gochatd.new_job import NewJob
from gochatd.obs.logs import get_logger
from gochatd.testing import migrate
from gochatd.worker.registry import Registry, handler_spec
from gochatd.worker.runtimes import loop_for
from gochatd.worker.service import Worker

#: Jobs per producer and round: half of N, at most this many (the rate is steady by then).
SEQUENTIAL_MAX = 2_000
#: The producers' jobs go where the handler drains' workers never look.
PRODUCER_QUEUE = "bench_producers"
HANDLER_TYPES = {"trio": "bench:trio", "asyncio": "bench:asyncio", "thread": "bench:thread"}


def _sync_rate(url: str, redis_url: str, prefix: str, count: int) -> float:
    with SyncClient(url, redis_url or None, stream_prefix=prefix) as client:
        t0 = time.perf_counter()
        for _ in range(count):
            client.enqueue("sys:noop", {}, queue=PRODUCER_QUEUE)
        return count / (time.perf_counter() - t0)


async def _async_rate(url: str, redis_url: str, prefix: str, count: int) -> float:
    """The async client's sequential rate, under whichever loop runs it."""
    async with Client(url, redis_url or None, stream_prefix=prefix) as client:
        t0 = time.perf_counter()
        for _ in range(count):
            await client.enqueue("sys:noop", {}, queue=PRODUCER_QUEUE)
        return count / (time.perf_counter() - t0)


class _FirstStart:
    """The process CPU time at the first handler start of a drain."""

    def __init__(self) -> None:
        self.cpu: float | None = None

    def mark(self) -> None:
        if self.cpu is None:
            self.cpu = time.process_time()


def _registry(first: _FirstStart) -> Registry:
    async def on_trio(ctx: JobContext) -> None:
        first.mark()

    async def on_asyncio(ctx: JobContext) -> None:
        first.mark()

    def in_thread(ctx: JobContext) -> None:
        first.mark()

    registry = Registry()
    for runtime, fn in (("trio", on_trio), ("asyncio", on_asyncio), ("thread", in_thread)):
        registry.add(handler_spec(HANDLER_TYPES[runtime], fn, runtime=runtime))
    return registry


async def _handler_cpu_us(url: str, redis_url: str, prefix: str, opts: BenchOptions,
                          runtime: str, count: int) -> float:
    """Process CPU per job while a fresh worker drains ``count`` jobs of one runtime."""
    async with Client(url, redis_url or None, stream_prefix=prefix) as producer:
        for start in range(0, count, 1_000):
            await producer.enqueue_many([NewJob(HANDLER_TYPES[runtime], {})
                                         for _ in range(min(1_000, count - start))])
    first = _FirstStart()
    worker = Worker(bench_settings(url, redis_url, prefix, opts.concurrency),
                    registry=_registry(first), migrate=True)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(worker.run)
        try:
            await wait_completed(worker, count, timeout_s=600)
            end = time.process_time()
        finally:
            worker.request_stop()
            with trio.move_on_after(60):
                await worker.lifecycle.stopped.wait()
    assert first.cpu is not None
    return (end - first.cpu) / max(1, count - 1) * 1e6


async def _bridge_us(calls: int) -> dict[str, float]:
    """The handler call alone, no worker: CPU per call of the wrapped no-op handler of each
    runtime, awaited sequentially inside the daemon's trio-asyncio loop (``loop_for``)."""
    first = _FirstStart()
    registry = _registry(first)
    ctx = JobContext(job_id=1, job_type="bench:trio", queue="default", tenant_id="default",
                     payload={}, attempt=1, max_attempts=1, fence=1, log=get_logger())
    got: dict[str, float] = {}
    async with loop_for(registry.runtimes()):
        for runtime, job_type in HANDLER_TYPES.items():
            spec = registry.get(job_type)
            assert spec is not None
            t0 = time.process_time()
            for _ in range(calls):
                await spec.fn(ctx)
            got[runtime] = (time.process_time() - t0) / calls * 1e6
    return got


async def _rounds(rounds: int, steps: dict[str, Callable[[], Awaitable[float]]]
                  ) -> dict[str, float]:
    """Each step once per round, alternating; the median of each."""
    got: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(rounds):
        progress(f"    round {i + 1}/{rounds}: {', '.join(steps)}")
        for name, step in steps.items():
            got[name].append(await step())
    return {name: statistics.median(values) for name, values in got.items()}


async def run_runtimes(opts: BenchOptions, backend: str, report: Report) -> None:
    redis_url = opts.redis_url if backend == "postgres+redis" else ""
    prefix = stream_prefix()
    count = max(50, min(opts.sizes.jobs // 2, SEQUENTIAL_MAX))
    rounds = opts.sizes.runtime_rounds
    figures: dict[str, Any] = {"backend": backend, "jobs_per_round": count, "rounds": rounds}
    try:
        async with scratch_database(backend, opts.pg_server) as url:
            await migrate(url)  # a Client refuses a database without the schema
            rates = await _rounds(rounds, {
                "sync": lambda: trio.to_thread.run_sync(_sync_rate, url, redis_url, prefix, count),
                "trio": lambda: _async_rate(url, redis_url, prefix, count),
                "asyncio": lambda: trio.to_thread.run_sync(
                    asyncio.run, _async_rate(url, redis_url, prefix, count)),
            })
            bridge = await _bridge_us(count)
            cpu = await _rounds(rounds, {
                runtime: lambda runtime=runtime: _handler_cpu_us(  # type: ignore[misc]
                    url, redis_url, prefix, opts, runtime, count)
                for runtime in HANDLER_TYPES
            })
    finally:
        if redis_url:
            await drop_streams(redis_url, prefix)
    figures.update({
        "sync_enqueue_jobs_per_s": rates["sync"],
        "trio_enqueue_jobs_per_s": rates["trio"],
        "asyncio_enqueue_jobs_per_s": rates["asyncio"],
        "asyncio_client_change_pct": (rates["asyncio"] / rates["trio"] - 1) * 100,
        **{f"{runtime}_handler_cpu_us_per_job": value for runtime, value in cpu.items()},
        "asyncio_handler_overhead_us": cpu["asyncio"] - cpu["trio"],
        "thread_handler_overhead_us": cpu["thread"] - cpu["trio"],
        **{f"{runtime}_handler_call_cpu_us": value for runtime, value in bridge.items()},
    })
    report.put("runtimes", figures)
