"""Scratch databases and stream prefixes for one bench run, and a side connection (the
``Probe``) that reads the bench's named queries from them.

PostgreSQL: a database ``gochatd_bench_<random>`` is created on the server and dropped with
FORCE at the end, also on failure or Ctrl-C; the server's own databases are never written.
SQLite: a file in a temporary directory. Redis: streams under a private prefix, deleted at
the end. Redis Cluster: three masters of the bench's own on loopback, stopped at the end."""

from __future__ import annotations

import sqlite3
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
import trio

from benchmarks.bench.options import POOLED
from benchmarks.bench.queries import bench_queries
from benchmarks.bench.report import Report
from gochatd.errors import DispatchUnavailable, StoreUnavailable
from gochatd.obs.redact import mask_url
from gochatd.store.sqlite import SqliteStore


def _server_admin(server: str, sql: str) -> None:
    try:
        with psycopg.connect(server, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.encode())
    except psycopg.Error as exc:
        # One line for the user, without the password; the driver's message names the cause.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreUnavailable(
            f"bench: PostgreSQL server {mask_url(server)}: {reason}") from None


@asynccontextmanager
async def scratch_cluster() -> AsyncIterator[str]:
    """Start a 3-master Redis Cluster on loopback (``redis-server``, ``redis-cli`` on PATH)
    and yield its seed node's URL; stop it afterwards, also on Ctrl-C."""
    from benchmarks.chaos.redis_cluster import RedisCluster

    with tempfile.TemporaryDirectory(prefix="gochatd-bench-cluster-") as tmp:
        cluster = RedisCluster(Path(tmp))
        try:
            try:
                await trio.to_thread.run_sync(cluster.start)
            except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                raise DispatchUnavailable(f"bench: could not start a Redis Cluster: "
                                          f"{str(exc)[:200]}") from None
            yield cluster.url
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(cluster.stop)


@asynccontextmanager
async def scratch_database(backend: str, pg_server: str) -> AsyncIterator[str]:
    """Yield the URL of an empty database for ``backend``; remove it afterwards."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="gochatd-bench-") as tmp:
            await trio.Path(tmp, "bench.db").touch()  # empty: a client refuses a missing file
            yield f"sqlite:///{tmp}/bench.db"
        return
    name = f"gochatd_bench_{uuid.uuid4().hex[:10]}"
    # Identifiers cannot be bound as parameters; the name is ours, lowercase hex.
    await trio.to_thread.run_sync(_server_admin, pg_server, f'CREATE DATABASE "{name}"')
    try:
        yield f"{pg_server.rpartition('/')[0]}/{name}"
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(
                _server_admin, pg_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: Server connections of the bench's pgbouncer: PgBouncer's own default_pool_size.
PGBOUNCER_POOL = 20


@asynccontextmanager
async def bench_database(backend: str, pg_server: str) -> AsyncIterator[tuple[str, str]]:
    """``scratch_database`` for the throughput rows, as (database_url, database_listen_url).
    The ``pgbouncer`` backends put a pgbouncer in transaction mode, started for this run,
    in front of the scratch database; LISTEN goes to the database directly."""
    if not backend.startswith("pgbouncer"):
        async with scratch_database(backend, pg_server) as url:
            yield url, ""
        return
    from benchmarks.pgbouncer import PgBouncer, pgbouncer_binary

    binary = pgbouncer_binary()
    if binary is None:
        raise StoreUnavailable("bench --pgbouncer: pgbouncer is not installed (package pgbouncer)")
    async with scratch_database("postgres", pg_server) as url:
        bouncer = PgBouncer(binary, url, pool_size=PGBOUNCER_POOL)
        try:
            await trio.to_thread.run_sync(bouncer.start)
            yield bouncer.url, url
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(bouncer.stop)


def pooled_change(report: Report) -> None:
    """Drain and end to end through pgbouncer against the direct connection of the same
    run, in % (negative: slower through the pooler)."""
    figures = report.figures
    for direct, pooled in POOLED.items():
        for name in ("drain_jobs_per_s", "e2e_jobs_per_s"):
            a, b = figures.get(f"{direct}.{name}"), figures.get(f"{pooled}.{name}")
            if isinstance(a, int | float) and isinstance(b, int | float) and a > 0:
                figures[f"{pooled}.{name.removesuffix('_jobs_per_s')}_change_pct"] = (
                    100.0 * (b - a) / a)


async def check_redis(redis_url: str) -> None:
    """Fail early, in one line, when the Redis of ``postgres+redis`` does not answer."""
    import redis

    def ping() -> None:
        client = redis.Redis.from_url(redis_url, socket_connect_timeout=5)
        try:
            client.ping()
        except redis.RedisError as exc:
            raise DispatchUnavailable(f"bench: Redis {mask_url(redis_url)}: {exc}") from None
        finally:
            client.close()

    await trio.to_thread.run_sync(ping)


def stream_prefix() -> str:
    return f"gochatd-bench-{uuid.uuid4().hex[:8]}"


async def drop_streams(redis_url: str, prefix: str) -> None:
    import redis

    def drop() -> None:
        client = redis.Redis.from_url(redis_url)
        try:
            keys = list(client.scan_iter(f"{prefix}:*"))
            if keys:
                client.delete(*keys)
        finally:
            client.close()

    with trio.CancelScope(shield=True):
        await trio.to_thread.run_sync(drop)


class Probe:
    """One synchronous side connection, used from a worker thread. It runs only the
    ``bench_*`` named queries (and is also the idle-in-transaction holder)."""

    def __init__(self, database_url: str) -> None:
        self.url = database_url
        self.dialect = "sqlite" if database_url.startswith("sqlite:") else "postgres"
        self._queries = bench_queries(self.dialect)
        self._pg: psycopg.Connection[Any] | None = None
        self._sqlite: sqlite3.Connection | None = None

    def _connect(self) -> None:
        if self.dialect == "postgres":
            self._pg = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        else:
            path = SqliteStore.from_url(self.url).path
            self._sqlite = sqlite3.connect(path, timeout=30, check_same_thread=False)

    def _fetch(self, name: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        if self._pg is None and self._sqlite is None:
            self._connect()
        sql = self._queries[name]
        if self._pg is not None:
            cur = self._pg.execute(sql.encode(), params)
            return cur.fetchall() if cur.description else []
        assert self._sqlite is not None
        return self._sqlite.execute(sql, params).fetchall()

    async def fetch(self, name: str, **params: Any) -> list[tuple[Any, ...]]:
        return await trio.to_thread.run_sync(self._fetch, name, params)

    async def begin_idle_transaction(self) -> int:
        """Open a transaction that holds a transaction id, and leave it idle."""

        def begin() -> int:
            if self._pg is None:
                self._connect()
            assert self._pg is not None
            self._pg.execute(b"BEGIN")
            row = self._pg.execute(self._queries["bench_hold_snapshot"].encode()).fetchone()
            assert row is not None
            return int(row[0])

        return await trio.to_thread.run_sync(begin)

    async def end_idle_transaction(self) -> None:
        def end() -> None:
            assert self._pg is not None
            self._pg.execute(b"ROLLBACK")

        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(end)

    async def close(self) -> None:
        def close() -> None:
            if self._pg is not None:
                self._pg.close()
            if self._sqlite is not None:
                self._sqlite.close()

        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(close)

    async def job_times_ms(self, after_id: int = 0) -> tuple[list[float], list[float]]:
        """(enqueue->claim, due->claim) of every claimed job with an id above ``after_id``,
        in ms, on the database clock."""
        claim: list[float] = []
        due: list[float] = []
        after = after_id
        while True:
            rows = await self.fetch("bench_job_times", after_id=after, limit=20_000)
            if not rows:
                return claim, due
            for job_id, to_claim, late in rows:
                claim.append(float(to_claim))
                due.append(float(late))
                after = int(job_id)

    async def max_job_id(self) -> int:
        rows = await self.fetch("bench_max_job_id")
        return int(rows[0][0])

    async def completed(self) -> int:
        rows = await self.fetch("bench_count_completed")
        return int(rows[0][0])
