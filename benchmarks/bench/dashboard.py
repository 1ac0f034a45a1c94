"""The fleet dashboard's queries with ``dashboard_jobs`` (1M) jobs in the table, on
PostgreSQL and SQLite (issue 16: each under 50 ms). Each database is filled with bulk SQL
(``bench_fill_*``: the mix of statuses a long-lived system holds, two days of per-minute
counters, 20 daemons), vacuumed/analysed, then every query the dashboard's tabs run is
called through the store (SQL, driver and decoding, as the admin API runs it): one warm-up,
then ``ROUNDS`` timed calls, so that PostgreSQL's plan cache has settled on its generic or
custom plan. The row is the slowest query's median; every query's p50 and max are in the
JSON. The exact counts of the whole table (``counts_exact``) are a scan, reported apart: the
endpoint serves them as a snapshot (``counts_endpoint``). docs/bench.md shows the plans
(EXPLAIN) behind them."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import trio

from benchmarks.bench.options import BenchOptions
from benchmarks.bench.queries import bench_queries
from benchmarks.bench.report import Report, progress
from benchmarks.bench.scratch import scratch_database
from benchmarks.bench.stats import percentile
from gochatd.admin.fleet import CountsSnapshot
from gochatd.model import JobFilter, JobStatus
from gochatd.store import JobStore, open_store
from gochatd.store.sqlite import SqliteStore
from gochatd.testing import migrate

ROUNDS = 15
CHUNK = 250_000

Query = Callable[[JobStore, int], Awaitable[object]]


async def _counts(store: JobStore, top: int) -> object:
    return (await store.count_jobs_by_status(), await store.count_scheduled_jobs(),
            await store.count_delayed_jobs())


def _counts_endpoint() -> Query:
    """What GET /v1/jobs/counts costs: a snapshot of the exact counts, at most
    ``SNAPSHOT_S`` old once counting is slow (admin/fleet.py)."""
    snapshot = CountsSnapshot()
    return lambda store, top: snapshot.get(store)


def _listing(*, deep: bool = False, **kw: Any) -> Query:
    """A page of 50, newest first; ``deep``: from the middle of the table (a cursor)."""

    async def run(store: JobStore, top: int) -> object:
        after = top // 2 if deep else None
        return await store.list_jobs(JobFilter(limit=50, newest_first=True, after_id=after, **kw))

    return run


def _old_id(store: JobStore, top: int) -> Awaitable[object]:
    return store.list_jobs(JobFilter(limit=50, newest_first=True, search=str(top // 3)))


#: What the dashboard's tabs and charts ask, by name.
QUERIES: dict[str, Query] = {
    "counts_exact": _counts,
    "counts_endpoint": _counts_endpoint(),
    "newest_page": _listing(),
    "newest_page_deep": _listing(deep=True),
    "dead_tab": _listing(status=JobStatus.DEAD),
    "retries_tab": _listing(status=JobStatus.RETRYING),
    "busy_tab": _listing(status=JobStatus.RUNNING),
    "scheduled_tab": _listing(scheduled=True),
    "search_common": _listing(search="user-99"),
    "search_none": _listing(search="no job has this text"),
    "search_old_id": _old_id,
    "throughput_hour": lambda store, top: store.job_counts(60, None),
    "throughput_by_type": lambda store, top: store.job_counts(60, "job_type"),
    "fleet": lambda store, top: store.list_daemons(),
}


async def run_dashboard(opts: BenchOptions, report: Report) -> None:
    dialects = [d for d in ("postgres", "sqlite")
                if any(b.partition("+")[0] == d or (d == "postgres" and b.startswith("pg"))
                       for b in opts.backends)] or ["postgres", "sqlite"]
    for dialect in dialects:
        async with scratch_database(dialect, opts.pg_server) as url:
            progress(f"  dashboard on {dialect}: filling {opts.sizes.dashboard_jobs:,} jobs")
            fill_s = await trio.to_thread.run_sync(_fill, url, dialect, opts.sizes.dashboard_jobs)
            figures = await _measure(url)
            figures["fill_s"] = round(fill_s, 1)
            report.put(f"dashboard.{dialect}", figures)


def _fill(url: str, dialect: str, jobs: int) -> float:
    """Migrate, then fill with bulk SQL on one connection of the bench's own."""
    queries = bench_queries(dialect)
    t0 = time.perf_counter()

    trio.from_thread.run(migrate, url)
    steps = [("bench_fill_dashboard", {"first": first, "count": min(CHUNK, jobs - first + 1)})
             for first in range(1, jobs + 1, CHUNK)]
    steps += [("bench_fill_job_counts", {}), ("bench_fill_daemons", {}), ("bench_vacuum_all", {})]
    if dialect == "postgres":
        with psycopg.connect(url, autocommit=True) as conn:
            for name, params in steps:
                conn.execute(queries[name].encode(), params)
    else:
        lite = sqlite3.connect(SqliteStore.from_url(url).path, isolation_level=None)
        try:
            for name, params in steps:
                lite.execute(queries[name], params)
        finally:
            lite.close()
    return time.perf_counter() - t0


async def _measure(url: str) -> dict[str, float]:
    store = open_store(url)
    await store.open()
    try:
        top = await store.newest_job_id()
        figures: dict[str, float] = {}
        for name, query in QUERIES.items():
            await query(store, top)  # warm-up: caches, the first plan
            times_ms = []
            for _ in range(ROUNDS):
                t0 = time.perf_counter()
                await query(store, top)
                times_ms.append((time.perf_counter() - t0) * 1000)
            figures[f"{name}_p50_ms"] = round(percentile(times_ms, 50), 2)
            figures[f"{name}_max_ms"] = round(max(times_ms), 2)
        # The row: what the dashboard's requests cost (the counts as the endpoint serves them).
        figures["slowest_p50_ms"] = max(v for k, v in figures.items()
                                        if k.endswith("_p50_ms") and k != "counts_exact_p50_ms")
        return figures
    finally:
        await store.close()
