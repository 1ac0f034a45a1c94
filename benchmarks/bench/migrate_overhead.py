"""What the change tracking of a move (migrations 0007, 0010) adds to an enqueue, on SQLite
and PostgreSQL.

Two scratch databases per backend, each at the latest schema and written only through the
store (``open_store``, what the daemon and ``Client`` use underneath):

- ``shipped``: as migrated, no tracking (every database that never moved a tenant): the
  baseline;
- ``tracking``: the numbering triggers, the read-only guard and catch-up index
  ``move start`` installs, and the enqueuing tenant's route in state ``tracking`` (a
  migration in progress; set with the migrator's own ``prepare_source`` and ``set_route``).

``migrate_rounds`` rounds; in each, every variant (in a rotated order) takes
``migrate_samples`` sequential single-job enqueues, each timed, then ``migrate_batches``
``enqueue_many`` calls of ``migrate_batch`` jobs. A variant's p50/p99 is the median over
rounds of each round's p50/p99; deltas compare ``tracking``'s medians with ``shipped``."""

from __future__ import annotations

import statistics
import time
from contextlib import AsyncExitStack
from typing import Any

import trio

from benchmarks.bench.options import BenchOptions
from benchmarks.bench.report import Report, progress
from benchmarks.bench.scratch import scratch_database
from benchmarks.bench.stats import percentile
from gochatd.migrate.backends import Database, parse_endpoint
from gochatd.migrate.route_control import prepare_source, set_route
from gochatd.model import EnqueueRequest
from gochatd.store import JobStore, open_store
from gochatd.store.route_table import RouteState

VARIANTS = ("shipped", "tracking")
DIALECTS = ("sqlite", "postgres")
TENANT = "acme"
WARM_UP = 20
#: A chat message's worth of payload (~100 bytes as JSON).
PAYLOAD: dict[str, Any] = {"chat_id": 100042, "message_id": 7700123, "lang": "en",
                           "text": "where is my order? it said two days and it has been four"}


async def run_overhead(opts: BenchOptions, report: Report) -> None:
    figures: dict[str, Any] = {}
    for dialect in DIALECTS:
        progress(f"  migrate: tracking cost on {dialect}")
        figures.update(await _measure(opts, dialect))
    report.put("migrate", figures)


async def _measure(opts: BenchOptions, dialect: str) -> dict[str, Any]:
    sizes = opts.sizes
    async with AsyncExitStack() as stack:
        stores: dict[str, JobStore] = {}
        urls: dict[str, str] = {}
        for variant in VARIANTS:
            url = await stack.enter_async_context(scratch_database(dialect, opts.pg_server))
            urls[variant] = url
            store = open_store(url, pool_size=1)
            await store.open()
            stack.push_async_callback(store.close)
            await store.migrate()
            await trio.to_thread.run_sync(_prepare, url, variant)
            stores[variant] = store
        for store in stores.values():
            for _ in range(WARM_UP):
                await store.enqueue(_request())
        singles: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
        batches: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for round_no in range(sizes.migrate_rounds):
            order = VARIANTS[round_no % 2:] + VARIANTS[:round_no % 2]
            for variant in order:
                store = stores[variant]
                singles[variant].append(await _singles(store, sizes.migrate_samples))
                for _ in range(sizes.migrate_batches):
                    batches[variant].append(await _batch(store, sizes.migrate_batch))
        figures = _figures(dialect, singles, batches, sizes.migrate_batch)
        for variant, url in urls.items():
            # Proof that each variant is what it claims: the baseline numbered nothing.
            figures[f"{dialect}_{variant}_changes_numbered"] = await trio.to_thread.run_sync(
                _changes_numbered, url)
    return figures


def _prepare(url: str, variant: str) -> None:
    if variant == "tracking":
        db = Database(parse_endpoint("source", url))
        try:
            prepare_source(db)  # as `move start` does: numbering, guard, catch-up index
            set_route(db, TENANT, "postgresql://bench-destination/gochatd", RouteState.TRACKING)
        finally:
            db.close()


def _changes_numbered(url: str) -> int:
    db = Database(parse_endpoint("source", url))
    try:
        return db.change_counter()
    finally:
        db.close()


def _request() -> EnqueueRequest:
    return EnqueueRequest("chat:reply", PAYLOAD, tenant_id=TENANT)


async def _singles(store: JobStore, samples: int) -> tuple[float, float]:
    """(p50, p99) in µs of ``samples`` sequential enqueues."""
    took: list[float] = []
    for _ in range(samples):
        request = _request()
        t0 = time.perf_counter()
        await store.enqueue(request)
        took.append((time.perf_counter() - t0) * 1e6)
    return percentile(took, 50), percentile(took, 99)


async def _batch(store: JobStore, size: int) -> float:
    """ms of one ``enqueue_many`` of ``size`` jobs."""
    requests = [_request() for _ in range(size)]
    t0 = time.perf_counter()
    await store.enqueue_many(requests)
    return (time.perf_counter() - t0) * 1000


def _figures(dialect: str, singles: dict[str, list[tuple[float, float]]],
             batches: dict[str, list[float]], batch_size: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        name = f"{dialect}_{variant}"
        out[f"{name}_p50_us"] = statistics.median(p50 for p50, _ in singles[variant])
        out[f"{name}_p99_us"] = statistics.median(p99 for _, p99 in singles[variant])
        out[f"{name}_batch_ms"] = statistics.median(batches[variant])
        out[f"{name}_batch_us_per_job"] = out[f"{name}_batch_ms"] * 1000 / batch_size
        out[f"{name}_rounds_p50_p99_us"] = [[round(a, 1), round(b, 1)]
                                            for a, b in singles[variant]]
    base = f"{dialect}_shipped"
    per_round = len(batches[VARIANTS[0]]) // len(singles[VARIANTS[0]])
    for variant in VARIANTS[1:]:
        name = f"{dialect}_{variant}"
        # Paired: the variants of one round ran back to back, so a drift of the machine's
        # load between rounds cancels out of these.
        out[f"{name}_p50_paired_delta_us"] = statistics.median(
            mine[0] - theirs[0] for mine, theirs in zip(singles[variant], singles["shipped"],
                                                         strict=True))
        out[f"{name}_batch_paired_delta_pct"] = statistics.median(
            (statistics.median(batches[variant][at:at + per_round])
             / statistics.median(batches["shipped"][at:at + per_round]) - 1) * 100
            for at in range(0, len(batches[variant]), per_round))
        for what in ("p50_us", "p99_us", "batch_us_per_job"):
            delta = out[f"{name}_{what}"] - out[f"{base}_{what}"]
            stem = what.removesuffix("_us").removesuffix("_us_per_job")
            unit = "us_per_job" if what.startswith("batch") else "us"
            out[f"{name}_{stem}_delta_{unit}"] = delta
            out[f"{name}_{stem}_delta_pct"] = delta / out[f"{base}_{what}"] * 100
    return out
