"""``--scenario migrate``: a live move of ``migrate_jobs`` jobs from SQLite to PostgreSQL with
the library functions ``gochatd move run --all --cutover`` uses, and the enqueue cost of
the change tracking that makes it live (migrate_overhead.py).

1. seed: a scratch SQLite file at the latest schema gets N jobs over four tenants (10:5:3:2,
   the status mix of a working queue, ~100-byte payloads), N/10 replies and a few fleet-wide
   rows, in statements of ``SEED_CHUNK`` rows; the 0007 triggers number every row;
2. start (route ``*`` to tracking, the watermark, the fleet barrier: no daemon is running,
   so it returns at once), copy;
3. live writes the copy missed: N/10 jobs complete, N/100 are pruned, N/100 are enqueued;
   catch-up applies them; validate compares both sides at the applied watermark;
4. N/1,000 more jobs complete, then cutover: frozen, final catch-up, delta check,
   destination. Frozen time is cutover's own ``frozen_s``.

The migration steps are synchronous (psycopg, sqlite3) and run on a worker thread, one step
per call, so a Ctrl-C stops the bench between steps (a step it abandons dies with its
scratch database)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import trio

from benchmarks.bench.migrate_overhead import run_overhead
from benchmarks.bench.options import BenchOptions
from benchmarks.bench.queries import bench_queries
from benchmarks.bench.report import Report, progress
from benchmarks.bench.scratch import scratch_database
from gochatd.migrate.backends import Database, parse_endpoint
from gochatd.migrate.catch_up import catch_up_scope
from gochatd.migrate.copy import DEFAULT_BATCH, copy_scope
from gochatd.migrate.phases import Context, Move, cutover, start, validate_move
from gochatd.migrate.schema import check_destination
from gochatd.migrate.state import DatabaseStateStore
from gochatd.migrate.tables import GLOBAL_SCOPE, GLOBAL_TABLES, TENANT_TABLES
from gochatd.store import open_store
from gochatd.store.route_table import EVERY_TENANT

T = TypeVar("T")
SEED_CHUNK = 100_000
WINDOW_S = 3600.0


class _Stopped(Exception):
    """The bench was cancelled while a step ran on its thread."""


async def run_migrate(opts: BenchOptions, report: Report) -> None:
    figures: dict[str, Any] = {"jobs": opts.sizes.migrate_jobs, "batch_size": DEFAULT_BATCH}
    async with scratch_database("sqlite", opts.pg_server) as source_url, \
            scratch_database("postgres", opts.pg_server) as destination_url:
        for url in (source_url, destination_url):
            store = open_store(url, pool_size=1)
            await store.open()
            try:
                await store.migrate()
            finally:
                await store.close()
        move = _Move(source_url, destination_url, opts.sizes.migrate_jobs)
        try:
            await move.run(figures)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(move.close)
    report.put("migrate", figures)
    await run_overhead(opts, report)


class _Move:
    def __init__(self, source_url: str, destination_url: str, jobs: int) -> None:
        self.source = Database(parse_endpoint("source", source_url))
        self.destination = Database(parse_endpoint("destination", destination_url))
        self.jobs = jobs
        self.q = bench_queries("sqlite")
        self.stop = threading.Event()

    async def _step(self, fn: Callable[[], T]) -> T:
        finished = False
        try:
            result = await trio.to_thread.run_sync(fn, abandon_on_cancel=True)
            finished = True
            return result
        finally:
            if not finished:  # cancelled: the abandoned step stops at its next batch
                self.stop.set()

    def close(self) -> None:
        self.source.close()
        self.destination.close()

    def _check(self) -> None:
        if self.stop.is_set():
            raise _Stopped

    async def run(self, figures: dict[str, Any]) -> None:
        n = self.jobs
        t0 = time.perf_counter()
        await self._step(lambda: self._seed(n))
        seconds = time.perf_counter() - t0
        outbox = max(1, n // 10)
        figures.update(seed_s=round(seconds, 2), seed_rows=n + outbox,
                       seed_rows_per_s=(n + outbox) / seconds, outbox_rows=outbox)
        progress(f"  migrate: seeded {n:,} jobs + {outbox:,} replies in {seconds:.1f} s")
        pending = await self._step(
            lambda: check_destination(self.destination, migrate=False, dry_run=True))
        if pending is not None:
            raise RuntimeError(f"bench: the scratch destination is not ready: {pending}")
        ctx = Context(self.source, self.destination, DatabaseStateStore(self.source),
                      self.destination.endpoint.masked, batch_size=DEFAULT_BATCH,
                      say=lambda line: progress(f"  migrate: {line}"))
        tenants = await self._step(self.source.tenants)
        move = Move(EVERY_TENANT, ((GLOBAL_SCOPE, GLOBAL_TABLES),
                                   *((t, TENANT_TABLES) for t in tenants)))
        figures["tenants"] = len(tenants)
        await self._timed(figures, "start", lambda: start(ctx, move))
        copied = await self._timed(figures, "copy", lambda: self._copy(ctx, move))
        figures["copy_rows"] = copied
        figures["copy_rows_per_s"] = copied / figures["copy_s"]
        writes = await self._timed(figures, "live_writes", lambda: self._live_writes(n))
        figures["live_writes"] = writes
        applied = await self._timed(figures, "catch_up", lambda: self._catch_up(ctx, move))
        figures["catch_up_rows"] = applied
        figures["catch_up_rows_per_s"] = applied / figures["catch_up_s"]
        checks = await self._timed(figures, "validate", lambda: validate_move(ctx, move))
        compared = _compared(checks)
        figures["validate_rows"] = compared
        figures["validate_rows_per_s"] = compared / figures["validate_s"]
        tail = max(1, n // 1000)
        await self._step(lambda: self._write("bench_migrate_finish_jobs", count=tail))
        figures["cutover_tail_writes"] = tail
        # As ``move run --cutover``: the validation just done is the one cutover starts from.
        done = await self._timed(figures, "cutover", lambda: cutover(
            ctx, move, window_s=WINDOW_S, validated=checks))
        figures["cutover_frozen_ms"] = float(done["frozen_s"]) * 1000
        # The final catch-up reports running totals: this move's catch-up included.
        figures["cutover_final_catch_up_rows"] = sum(
            int(r.get("rows", 0)) + int(r.get("deletes", 0))
            for r in done.get("final_catch_up", {}).values()) - applied

    async def _timed(self, figures: dict[str, Any], name: str, fn: Callable[[], T]) -> T:
        t0 = time.perf_counter()
        result = await self._step(fn)
        figures[f"{name}_s"] = round(time.perf_counter() - t0, 3)
        progress(f"  migrate: {name} {figures[f'{name}_s']:.2f} s")
        return result

    def _write(self, name: str, **params: Any) -> None:
        self._check()
        self.source.execute(self.q[name], params)

    def _seed(self, n: int) -> None:
        for first in range(1, n + 1, SEED_CHUNK):
            self._write("bench_migrate_seed_jobs", first=first,
                        count=min(SEED_CHUNK, n + 1 - first), total=n)
        replies = max(1, n // 10)
        for first in range(0, replies, SEED_CHUNK):
            self._write("bench_migrate_seed_outbox", first=first,
                        count=min(SEED_CHUNK, replies - first), total=n)
        self._write("bench_migrate_seed_pause")
        self._write("bench_migrate_seed_slots")

    def _live_writes(self, n: int) -> int:
        """What arrived while the copy ran (it saw none of it): retention deletes,
        completions and new jobs, each on different rows (so catch-up applies them all)."""
        finished, pruned, added = max(1, n // 10), max(1, n // 100), max(1, n // 100)
        self._write("bench_migrate_prune_jobs", count=pruned)
        self._write("bench_migrate_finish_jobs", count=finished)
        self._write("bench_migrate_seed_jobs", first=n + 1, count=added, total=n + added)
        return finished + pruned + added

    def _copy(self, ctx: Context, move: Move) -> int:
        copied = 0
        for scope, tables in move.scopes:
            self._check()
            done = copy_scope(ctx.source, ctx.destination, scope=scope, tables=tables,
                              state=ctx.state, destination_label=ctx.destination_label,
                              batch_size=ctx.batch_size,
                              on_batch=lambda _table, _rows: self._check())
            copied += sum(int(t["copied_this_run"]) for t in done["tables"].values())
        return copied

    def _catch_up(self, ctx: Context, move: Move) -> int:
        applied = 0
        for scope, tables in move.scopes:
            self._check()
            done = catch_up_scope(ctx.source, ctx.destination, scope=scope, tables=tables,
                                  state=ctx.state, destination_label=ctx.destination_label,
                                  batch_size=ctx.batch_size)
            applied += int(done["this_run"]["rows"]) + int(done["this_run"]["deletes"])
        return applied



def _compared(checks: dict[str, dict[str, Any]]) -> int:
    """Rows compared by a passing validation (raises on a difference: the bench is broken)."""
    for scope, check in checks.items():
        if not check["equal"]:
            raise RuntimeError(f"bench: validate found a difference in scope {scope!r}")
    return sum(int(t["source"]["count"]) for c in checks.values() for t in c["tables"].values())
