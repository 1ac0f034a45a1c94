"""Rates and idle latency on one backend, with an in-process worker:

1. enqueue, one job per call, sequential (into a backlog nobody consumes yet);
2. bulk enqueue (``Client.enqueue_many``, batches of 1,000) fills the backlog up to N;
3. drain: the worker starts; first job started -> N-th job completed;
4. end to end: ``producers`` tasks, each awaiting one enqueue at a time, N jobs;
5. idle enqueue->start: one job at a time on an idle worker.

On ``postgres+redis-cluster`` the same run goes through a 3-master Redis Cluster of the
bench's own; ``cluster_vs_single`` then compares its drain and end-to-end with the single
Redis of the same run (``postgres+redis``).
"""

from __future__ import annotations

import contextlib
import resource
import time
from collections.abc import AsyncIterator
from typing import Any

import trio

from benchmarks.bench.inprocess import (
    bench_settings,
    concurrent,
    noop_enqueue,
    running_worker,
    sequential,
    wait_completed,
)
from benchmarks.bench.options import BenchOptions
from benchmarks.bench.profiling import profile_drain
from benchmarks.bench.report import Report
from benchmarks.bench.scratch import (
    bench_database,
    drop_streams,
    scratch_cluster,
    stream_prefix,
)
from benchmarks.bench.stats import StartTracker, summary_ms
from gochatd.client.client import Client
from gochatd.new_job import NewJob
from gochatd.testing import migrate

BULK_BATCH = 1_000
#: The sequential rate is measured over half of N, at most this many jobs; the rest of the
#: backlog is written in bulk (the sequential rate is steady long before 10k, and slow).
SEQUENTIAL_MAX = 3_000
CLUSTER = "postgres+redis-cluster"
SINGLE = "postgres+redis"


async def bulk_enqueue(client: Client, count: int, batch: int = BULK_BATCH) -> float:
    """Jobs/s of ``enqueue_many`` in batches of ``batch``."""
    t0 = time.perf_counter()
    left = count
    while left > 0:
        size = min(batch, left)
        await client.enqueue_many([NewJob("sys:noop", {}) for _ in range(size)])
        left -= size
    return count / (time.perf_counter() - t0)


async def run_throughput(opts: BenchOptions, backend: str, report: Report,
                         *, profile: bool) -> None:
    n = opts.sizes.jobs
    prefix = stream_prefix()
    figures: dict[str, Any] = {"jobs": n}
    tracker = StartTracker()
    cluster = backend == CLUSTER
    async with _redis_for(opts, backend, prefix) as redis_url, \
            bench_database(backend, opts.pg_server) as (url, listen_url):
        settings = bench_settings(url, redis_url, prefix, opts.concurrency,
                                  redis_cluster=cluster, database_listen_url=listen_url)
        await migrate(url)  # a Client refuses a database without the schema
        async with Client(url, redis_url or None, stream_prefix=prefix,
                          redis_cluster=cluster) as producer:
            seq = max(1, min(n // 2, SEQUENTIAL_MAX))
            figures["enqueue_jobs_per_s"] = await sequential(noop_enqueue(producer), seq)
            figures["bulk_enqueue_jobs_per_s"] = await bulk_enqueue(producer, n - seq)
        backlog = n
        async with running_worker(settings, tracker) as worker:
            figures["mode"] = worker.mode.value
            t_end = await wait_completed(worker, backlog, timeout_s=600)
            assert tracker.first_start is not None
            figures["drain_jobs"] = backlog
            figures["drain_jobs_per_s"] = backlog / (t_end - tracker.first_start)

            t0 = time.perf_counter()
            made = await concurrent(noop_enqueue(worker.client, tracker), n, opts.producers)
            t_end = await wait_completed(worker, backlog + made, timeout_s=600)
            figures["e2e_jobs_per_s"] = made / (t_end - t0)
            figures.update(summary_ms(tracker.latencies_ms, "e2e_latency"))

            tracker.reset_latencies()
            await _idle_samples(worker.client, tracker, opts.sizes.idle_samples)
            idle = list(tracker.latencies_ms)
            figures.update(summary_ms(idle, "idle_latency"))
            figures["idle_latency_mean_ms"] = sum(idle) / len(idle)
            figures["stale_finishes"] = worker.counters["stale_finishes"]
            if profile and opts.profile_path:
                async def fill() -> int:
                    await bulk_enqueue(worker.client, n)
                    return n

                await profile_drain(worker, fill, opts.profile_path)
                figures["profile"] = opts.profile_path
        figures["process_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report.put(backend, figures)


@contextlib.asynccontextmanager
async def _redis_for(opts: BenchOptions, backend: str, prefix: str) -> AsyncIterator[str]:
    """The Redis URL of ``backend`` ("" for none): the given server (its streams under
    ``prefix`` dropped afterwards) or a cluster of our own."""
    if backend == CLUSTER:
        async with scratch_cluster() as url:
            yield url
    elif backend.endswith("+redis"):  # postgres+redis, pgbouncer+redis
        try:
            yield opts.redis_url
        finally:
            await drop_streams(opts.redis_url, prefix)
    else:
        yield ""


def cluster_vs_single(report: Report) -> None:
    """The cluster's drain and end-to-end rates as a change from the single Redis's, in %
    (negative: slower), when both ran."""
    for name in ("drain_jobs_per_s", "e2e_jobs_per_s"):
        single = report.figures.get(f"{SINGLE}.{name}")
        cluster = report.figures.get(f"{CLUSTER}.{name}")
        if isinstance(single, float | int) and isinstance(cluster, float | int) and single:
            key = name.removesuffix("_jobs_per_s")
            report.figures[f"redis_cluster.{key}_change_pct"] = round(
                (cluster - single) / single * 100, 1)


async def _idle_samples(client: Client, tracker: StartTracker, samples: int) -> None:
    enqueue = noop_enqueue(client, tracker)
    for _ in range(samples):
        started = tracker.started
        await enqueue()
        await tracker.wait_started(started + 1, timeout_s=10)
        # Let the finish write and the intake go back to its blocking read: idle means idle.
        await trio.sleep(0.005)

