"""``gochatd bench``: enqueue rate, drain rate, end-to-end rate, enqueue->start latency and
peak RSS, measured in-process against a scratch database (and Redis, if given)."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import trio

from gochatd.client import Client
from gochatd.config import Settings
from gochatd.context import JobContext
from gochatd.registry import HandlerSpec, Registry
from gochatd.service import Worker

DEFAULT_PG = "postgresql://root@127.0.0.1:5432/test"
IDLE_SAMPLES = 200


class Recorder:
    def __init__(self) -> None:
        self.enqueued: dict[int, float] = {}
        self.started: dict[int, float] = {}
        self.any_started = trio.Event()

    async def noop(self, ctx: JobContext) -> None:
        self.started[ctx.job_id] = time.perf_counter()
        self.any_started.set()
        self.any_started = trio.Event()

    def latencies_ms(self, ids: list[int]) -> list[float]:
        return [
            (self.started[i] - self.enqueued[i]) * 1000
            for i in ids if i in self.started and i in self.enqueued
        ]


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@asynccontextmanager
async def _scratch_database(args: argparse.Namespace) -> AsyncIterator[str]:
    if args.backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="gochatd-bench-") as tmp:
            yield f"sqlite:///{tmp}/bench.db"
        return
    server = args.database_url or os.environ.get("GOCHAT_DATABASE_URL") or DEFAULT_PG
    if not server.startswith("postgres"):
        server = DEFAULT_PG
    name = f"gochatd_bench_{uuid.uuid4().hex[:8]}"
    base = server.rpartition("/")[0]

    def admin(sql: str) -> None:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql)

    await trio.to_thread.run_sync(admin, f'CREATE DATABASE "{name}"')
    try:
        yield f"{base}/{name}"
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _wait_completed(worker: Worker, target: int, timeout_s: float = 600) -> float:
    with trio.fail_after(timeout_s):
        # The counter belongs to the worker; a 2 ms poll is noise in a benchmark.
        while worker.counters["finished_completed"] < target:  # noqa: ASYNC110
            await trio.sleep(0.002)
    return time.perf_counter()


async def run_bench(args: argparse.Namespace) -> int:
    n, prefix = args.jobs, f"gochatd-bench-{uuid.uuid4().hex[:8]}"
    recorder = Recorder()
    registry = Registry()
    registry.add(HandlerSpec("sys:noop", recorder.noop))
    results: dict[str, Any] = {
        "backend": args.backend, "redis": bool(args.redis), "jobs": n,
        "concurrency": args.concurrency, "producers": args.producers,
    }
    async with _scratch_database(args) as url:
        settings = Settings(
            database_url=url, redis_url=args.redis, worker_concurrency=args.concurrency,
            worker_queues={"default": 1}, worker_redis_stream_prefix=prefix,
            worker_redis_block_timeout_s=1.0, worker_db_pool_size=8, admin_listen="off",
        )
        # 1. sequential enqueue into a backlog nobody consumes yet
        async with Client(url, args.redis or None, stream_prefix=prefix) as producer:
            assert producer.store is not None
            await producer.store.migrate()
            t0 = time.perf_counter()
            for _ in range(n):
                await producer.enqueue("sys:noop", {})
            results["enqueue_jobs_per_s"] = n / (time.perf_counter() - t0)

        worker = Worker(settings, registry=registry, migrate=True)
        async with trio.open_nursery() as nursery:
            t_start = time.perf_counter()
            nursery.start_soon(worker.run)
            # 2. drain the backlog
            t_end = await _wait_completed(worker, n)
            first = min(recorder.started.values())
            results["drain_jobs_per_s"] = n / (t_end - first)
            results["drain_including_startup_s"] = t_end - t_start
            results["mode"] = worker.mode.value

            # 3. end to end: producers and workers together
            e2e_ids: list[int] = []
            per_producer = n // args.producers

            async def produce() -> None:
                for _ in range(per_producer):
                    t = time.perf_counter()
                    job = await worker.client.enqueue("sys:noop", {})
                    recorder.enqueued[job.id] = t
                    e2e_ids.append(job.id)

            t0 = time.perf_counter()
            async with trio.open_nursery() as producers:
                for _ in range(args.producers):
                    producers.start_soon(produce)
            t_end = await _wait_completed(worker, n + len(e2e_ids))
            results["e2e_jobs_per_s"] = len(e2e_ids) / (t_end - t0)
            lat = recorder.latencies_ms(e2e_ids)
            results["e2e_latency_ms"] = {"p50": _pct(lat, 50), "p95": _pct(lat, 95),
                                         "p99": _pct(lat, 99)}

            # 4. idle latency: one job at a time on an idle worker
            idle_ids: list[int] = []
            for _ in range(IDLE_SAMPLES):
                t = time.perf_counter()
                job = await worker.client.enqueue("sys:noop", {})
                recorder.enqueued[job.id] = t
                idle_ids.append(job.id)
                with trio.fail_after(10):
                    while job.id not in recorder.started:
                        await recorder.any_started.wait()
                await trio.sleep(0.002)
            lat = recorder.latencies_ms(idle_ids)
            results["idle_latency_ms"] = {"p50": _pct(lat, 50), "p95": _pct(lat, 95),
                                          "p99": _pct(lat, 99),
                                          "mean": statistics.fmean(lat) if lat else None}
            worker.request_stop()
        results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        results["stale_rejections"] = worker.counters["stale_rejections"]
    if args.redis:
        await _drop_streams(args.redis, prefix)
    _print(results)
    if args.json:
        await trio.Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


async def _drop_streams(url: str, prefix: str) -> None:
    import redis

    def drop() -> None:
        client = redis.Redis.from_url(url)
        keys = list(client.scan_iter(f"{prefix}:*"))
        if keys:
            client.delete(*keys)
        client.close()

    await trio.to_thread.run_sync(drop)


def _print(r: dict[str, Any]) -> None:
    dispatch = "redis streams" if r["redis"] else "polling"
    print(f"gochatd bench: {r['jobs']} sys:noop jobs, backend {r['backend']}, {dispatch} "
          f"(mode {r.get('mode')}), concurrency {r['concurrency']}, {r['producers']} producers")
    print(f"  enqueue (sequential, 1 job/call)  {r['enqueue_jobs_per_s']:10.0f} jobs/s")
    print(f"  drain (backlog, first->last)      {r['drain_jobs_per_s']:10.0f} jobs/s")
    print(f"  end-to-end (producers + workers)  {r['e2e_jobs_per_s']:10.0f} jobs/s")
    e, i = r["e2e_latency_ms"], r["idle_latency_ms"]
    print(f"  enqueue->start under load  p50 {e['p50']:.2f} ms  p95 {e['p95']:.2f} ms  "
          f"p99 {e['p99']:.2f} ms")
    print(f"  enqueue->start idle        p50 {i['p50']:.2f} ms  p95 {i['p95']:.2f} ms  "
          f"p99 {i['p99']:.2f} ms")
    print(f"  peak RSS                          {r['peak_rss_mb']:10.1f} MB")
    print(f"  stale rejections                  {r['stale_rejections']:10d}")
