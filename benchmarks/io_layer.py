"""``python -m benchmarks.io_layer``: the I/O layer's options side by side, in one run.

Each row runs the same PostgreSQL statement (``SELECT 1``, prepared) sequentially from Trio
(except the first, which has no loop) and reports the median over rounds of ops/s and of
process CPU per op (every thread of the process counted):

- ``sync, no loop``: the floor, synchronous psycopg on this thread;
- ``handoff``: gochatd's layer, a thread that owns the connection, fed through its queue;
- ``to_thread``: ``trio.to_thread.run_sync`` with a one-token limiter (trio's thread cache);
- ``bridge``: psycopg's asyncio pool through trio-asyncio (what gochatd used before);
- ``16 tasks``: the handoff with 4 connections and 16 Trio tasks sharing it;
- ``INSERT + commit``: one durable write through the handoff (the commit's flush is the
  floor of every enqueue and claim);
- ``10 statements, one unit``: ten statements in one hop, one by one vs psycopg's pipeline
  mode (what a multi-queue claim would gain from pipelining).

Usage: ``python -m benchmarks.io_layer [--dsn URL] [--ops N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import trio

from gochatd.io.handoff import Handoff

DEFAULT_DSN = "postgresql://root@127.0.0.1:5432/test"
QUERY = "SELECT 1"


def _connect(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.Connection.connect(dsn, autocommit=True)


def _one(conn: psycopg.Connection[Any]) -> Any:
    return conn.execute(QUERY, prepare=True).fetchone()


def _insert(conn: psycopg.Connection[Any]) -> Any:
    return conn.execute("INSERT INTO io_layer_bench (n) VALUES (1)", prepare=True)


def _ten(conn: psycopg.Connection[Any]) -> Any:
    return [conn.execute(QUERY, prepare=True).fetchone() for _ in range(10)]


def _ten_pipelined(conn: psycopg.Connection[Any]) -> Any:
    with conn.pipeline():
        cursors = [conn.execute(QUERY, prepare=True) for _ in range(10)]
    return [cur.fetchone() for cur in cursors]


class Row:
    def __init__(self, name: str) -> None:
        self.name = name
        self.rates: list[float] = []
        self.cpu_us: list[float] = []

    def add(self, ops: int, wall_s: float, cpu_s: float) -> None:
        self.rates.append(ops / wall_s)
        self.cpu_us.append(cpu_s * 1e6 / ops)

    def line(self) -> str:
        return (f"{self.name:<34} {statistics.median(self.rates):>10,.0f} "
                f"{statistics.median(self.cpu_us):>12,.1f}")


async def _timed(row: Row, ops: int, op: Callable[[], Awaitable[Any]], per_op: int = 1) -> None:
    await op()  # warm: connect, prepare
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(ops):
        await op()
    row.add(ops * per_op, time.perf_counter() - wall, time.process_time() - cpu)


async def _concurrent(row: Row, ops: int, pool: Handoff[Any]) -> None:
    tasks, each = 16, max(1, ops // 16)

    async def worker() -> None:
        for _ in range(each):
            await pool.run(_one)

    await pool.run(_one)
    wall, cpu = time.perf_counter(), time.process_time()
    async with trio.open_nursery() as nursery:
        for _ in range(tasks):
            nursery.start_soon(worker)
    row.add(tasks * each, time.perf_counter() - wall, time.process_time() - cpu)


async def _bridge(row: Row, ops: int, dsn: str) -> None:
    import asyncio

    import psycopg.waiting
    import trio_asyncio
    from psycopg_pool import AsyncConnectionPool
    from trio_asyncio import aio_as_trio

    # psycopg bound asyncio.get_running_loop when it was imported, before trio_asyncio
    # patched it: point it at the patched function (as gochatd's bridge module did).
    psycopg.waiting.get_running_loop = asyncio.get_running_loop  # type: ignore[attr-defined]

    async with trio_asyncio.open_loop():
        async def make() -> AsyncConnectionPool:
            pool = AsyncConnectionPool(dsn, min_size=1, max_size=4, open=False,
                                       kwargs={"autocommit": True})
            await pool.open(wait=True)
            return pool

        pool = await aio_as_trio(make)()

        async def one() -> Any:
            async with pool.connection() as conn:
                cur = await conn.execute(QUERY, prepare=True)
                return await cur.fetchone()

        try:
            await _timed(row, ops, lambda: aio_as_trio(one)())
        finally:
            await aio_as_trio(pool.close)()


async def _round(rows: dict[str, Row], dsn: str, ops: int, with_bridge: bool) -> None:
    conn = _connect(dsn)
    try:
        _one(conn)
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(ops):
            _one(conn)
        rows["sync"].add(ops, time.perf_counter() - wall, time.process_time() - cpu)
        limiter = trio.CapacityLimiter(1)
        await _timed(rows["to_thread"], ops,
                     lambda: trio.to_thread.run_sync(_one, conn, limiter=limiter))
    finally:
        conn.close()
    pool: Handoff[psycopg.Connection[Any]] = Handoff(
        "bench-pg", lambda: _connect(dsn), lambda c: c.close(), size=4)
    try:
        await _timed(rows["handoff"], ops, lambda: pool.run(_one))
        await pool.run(lambda c: c.execute("CREATE TABLE IF NOT EXISTS io_layer_bench (n int)"))
        try:
            await _timed(rows["insert"], max(1, ops // 4), lambda: pool.run(_insert))
        finally:
            await pool.run(lambda c: c.execute("DROP TABLE IF EXISTS io_layer_bench"))
        await _concurrent(rows["concurrent"], ops, pool)
        await _timed(rows["ten"], max(1, ops // 10), lambda: pool.run(_ten), per_op=10)
        await _timed(rows["ten_pipelined"], max(1, ops // 10), lambda: pool.run(_ten_pipelined),
                     per_op=10)
    finally:
        await pool.close()
    if with_bridge:
        await _bridge(rows["bridge"], ops, dsn)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.io_layer", description=__doc__)
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-bridge", action="store_true",
                        help="skip the trio-asyncio row (needs psycopg_pool)")
    args = parser.parse_args(argv)
    with_bridge = not args.no_bridge
    if with_bridge:
        try:
            import psycopg_pool  # noqa: F401
        except ImportError:
            print("psycopg_pool is not installed: the bridge row is skipped", file=sys.stderr)
            with_bridge = False
    rows = {key: Row(name) for key, name in (
        ("sync", "sync psycopg, no loop"), ("handoff", "handoff (owned thread + queue)"),
        ("to_thread", "trio.to_thread (thread cache)"), ("bridge", "trio-asyncio bridge + pool"),
        ("concurrent", "handoff, 4 conns, 16 tasks"),
        ("insert", "handoff, 1-row INSERT + commit"),
        ("ten", "10 statements in one unit"), ("ten_pipelined", "10 statements, pipeline mode"),
    )}
    for _ in range(args.rounds):  # rounds alternate every option, so drift hits them alike
        trio.run(_round, rows, args.dsn, args.ops, with_bridge)
    print(f"{'SELECT 1, sequential':<34} {'ops/s':>10} {'CPU us/op':>12}")
    for row in rows.values():
        if row.rates:
            print(row.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
