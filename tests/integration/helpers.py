"""Helpers for the worker integration tests.

- ``make_registry``: a private handler registry (the built-in ``sys:*`` specs plus the
  test's own), so tests never touch the process-wide ``REGISTRY``.
- ``started_worker``: runs a ``Worker`` in the test's Trio run and reports ``run()``'s exit
  code; unlike ``running_worker`` it accepts ``reload_args`` and lets a test stop the worker
  itself.
- ``sql``/``insert_job``: raw SQL on a second connection, the way a foreign producer (the
  Go API) or another worker would touch the table.
- ``redis_call``: a plain synchronous redis-py client, run on a thread, for XADD/XPENDING
  from "outside" the daemon.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import redis
import trio
import yaml

from gochatd.config.settings import FIELDS, Settings
from gochatd.context import JobContext
from gochatd.model import Job, JobFilter, JobStatus
from gochatd.store import JobStore, open_store
from gochatd.store.queries import SQLITE_NOW
from gochatd.store.sqlite import SqliteStore
from gochatd.worker.registry import REGISTRY, Handler, HandlerSpec, Registry
from gochatd.worker.service import Worker
from tests.support.wait import wait_until

T = TypeVar("T")

SYS_TYPES = ("sys:noop", "sys:sleep", "sys:fail")
STREAM_GROUP = "gochat-workers"


def stream_key(queue: str = "default") -> str:
    return f"gochat:jobs:{queue}"


# -- registries ----------------------------------------------------------------------------


def make_registry(*specs: HandlerSpec) -> Registry:
    """A registry holding the built-in ``sys:*`` handlers plus ``specs``."""
    registry = Registry()
    for job_type in SYS_TYPES:
        spec = REGISTRY.get(job_type)
        assert spec is not None, job_type
        registry.add(spec)
    for spec in specs:
        registry.add(spec)
    return registry


@dataclass(eq=False)
class Tracker:
    """Counts executions per job and how many handlers run at once.

    ``blocking`` handlers park until ``release_one``/``release_all`` (or forever);
    ``interrupted`` lists the job ids whose handler did not run to its end (cancelled)."""

    executions: Counter[int] = field(default_factory=Counter)
    attempts: list[tuple[int, int]] = field(default_factory=list)  # (job_id, attempt)
    active: int = 0
    max_active: int = 0
    blocked: dict[int, trio.Event] = field(default_factory=dict)
    interrupted: list[int] = field(default_factory=list)
    completed: list[int] = field(default_factory=list)

    def _enter(self, ctx: JobContext) -> None:
        self.executions[ctx.job_id] += 1
        self.attempts.append((ctx.job_id, ctx.attempt))
        self.active += 1
        self.max_active = max(self.max_active, self.active)

    def _leave(self, ctx: JobContext, *, ran_to_end: bool) -> None:
        self.active -= 1
        (self.completed if ran_to_end else self.interrupted).append(ctx.job_id)

    def counting(self, seconds: float = 0.0) -> Handler:
        """Counts, optionally sleeps ``seconds``, returns."""

        async def handler(ctx: JobContext) -> None:
            self._enter(ctx)
            ran_to_end = False
            try:
                if seconds:
                    await trio.sleep(seconds)
                else:
                    await trio.lowlevel.checkpoint()
                ran_to_end = True
            finally:
                self._leave(ctx, ran_to_end=ran_to_end)

        return handler

    def blocking(self) -> Handler:
        """Parks until the test releases this job (``release_one``/``release_all``)."""

        async def handler(ctx: JobContext) -> None:
            self._enter(ctx)
            gate = trio.Event()
            self.blocked[ctx.job_id] = gate
            ran_to_end = False
            try:
                await gate.wait()
                ran_to_end = True
            finally:
                self.blocked.pop(ctx.job_id, None)
                self._leave(ctx, ran_to_end=ran_to_end)

        return handler

    def release_one(self) -> int:
        job_id = min(self.blocked)
        self.blocked.pop(job_id).set()
        return job_id

    def release_all(self) -> None:
        for job_id in list(self.blocked):
            self.blocked.pop(job_id).set()


# -- running a worker ----------------------------------------------------------------------


@dataclass(eq=False)
class WorkerRun:
    worker: Worker
    exit_code: int | None = None
    done: trio.Event = field(default_factory=trio.Event)

    async def stop(self, timeout_s: float = 30.0) -> int:
        """Graceful stop (once; a second request_stop would force) and wait for run()."""
        if not self.worker.lifecycle.stopping:
            self.worker.request_stop()
        with trio.fail_after(timeout_s):
            await self.done.wait()
        assert self.exit_code is not None
        return self.exit_code


@asynccontextmanager
async def started_worker(
    settings: Settings,
    *,
    registry: Registry,
    reload_args: dict[str, Any] | None = None,
    migrate: bool = True,
) -> AsyncIterator[WorkerRun]:
    run = WorkerRun(Worker(settings, registry=registry, migrate=migrate, reload_args=reload_args))

    async def _run() -> None:
        try:
            run.exit_code = await run.worker.run()
        finally:
            run.done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_run)
        with trio.fail_after(15):
            await run.worker.lifecycle.ready.wait()
        try:
            yield run
        finally:
            await run.stop()


def write_config(path: Path, settings: Settings, **changes: Any) -> None:
    """Write every reloadable key of ``settings`` (with ``changes``) as a YAML config."""
    fresh = settings.with_changes(**changes)
    doc: dict[str, Any] = {}
    for spec in FIELDS:
        if not spec.reloadable:
            continue
        node = doc
        *parents, leaf = spec.key.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        value = getattr(fresh, spec.attr)
        if spec.key == "worker.queue_rates":  # QueueRate values, written as 10/s
            value = {queue: str(rate) for queue, rate in value.items()}
        node[leaf] = value
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")


# -- the database from outside ---------------------------------------------------------------


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def now_sql(url: str, plus_s: float = 0.0) -> str:
    """The database clock (+ ``plus_s``) as an SQL expression of the column type."""
    if is_postgres(url):
        return f"(now() + make_interval(secs => {float(plus_s)!r}))"
    return f"({SQLITE_NOW} + {float(plus_s)!r})"


def _sql_sync(url: str, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    if is_postgres(url):
        with psycopg.connect(url, autocommit=True) as pg:
            cur = pg.execute(query.encode(), params)
            return list(cur.fetchall()) if cur.description else []
    lite = sqlite3.connect(SqliteStore.from_url(url).path, timeout=30.0, isolation_level=None)
    try:
        return list(lite.execute(query.replace("%s", "?"), tuple(params)).fetchall())
    finally:
        lite.close()


async def sql(url: str, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """One autocommit statement on a fresh connection (``%s`` placeholders)."""
    return await trio.to_thread.run_sync(_sql_sync, url, query, list(params))


async def insert_job(
    url: str,
    job_type: str = "sys:noop",
    *,
    queue: str = "default",
    payload: str = "{}",
    delay_s: float = 0.0,
    dispatched: bool = False,
) -> int:
    """A plain INSERT, as a foreign producer writes it: no XADD, no client."""
    cast = "::jsonb" if is_postgres(url) else ""
    dispatched_at = now_sql(url) if dispatched else "NULL"
    rows = await sql(
        url,
        "INSERT INTO background_jobs (job_type, queue, payload, scheduled_at, dispatched_at) "
        f"VALUES (%s, %s, %s{cast}, {now_sql(url, delay_s)}, {dispatched_at}) RETURNING id",
        (job_type, queue, payload),
    )
    return int(rows[0][0])


async def migrate(url: str) -> None:
    store = open_store(url)
    await store.open()
    try:
        await store.migrate()
    finally:
        await store.close()


@asynccontextmanager
async def opened_store(url: str) -> AsyncIterator[JobStore]:
    store = open_store(url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def wait_for_status(
    store: JobStore, job_id: int, *statuses: JobStatus, timeout_s: float = 10.0
) -> Job:
    async def probe() -> Job | None:
        job = await store.get_job(job_id)
        return job if job is not None and job.status in statuses else None

    job = await wait_until(
        probe, timeout_s=timeout_s, what=f"job {job_id} in {[s.value for s in statuses]}"
    )
    assert job is not None
    return job


async def all_jobs(store: JobStore) -> list[Job]:
    jobs: list[Job] = []
    after: int | None = None
    while True:
        page = await store.list_jobs(JobFilter(limit=1000, after_id=after))
        if not page:
            return jobs
        jobs.extend(page)
        after = page[-1].id


async def wait_all_status(
    store: JobStore, ids: Iterable[int], status: JobStatus, timeout_s: float = 20.0
) -> dict[int, Job]:
    wanted = set(ids)

    async def probe() -> dict[int, Job] | None:
        jobs = {j.id: j for j in await all_jobs(store) if j.id in wanted}
        done = sum(1 for j in jobs.values() if j.status is status)
        return jobs if done == len(wanted) else None

    jobs = await wait_until(
        probe, timeout_s=timeout_s, interval_s=0.05,
        what=f"{len(wanted)} jobs {status.value}",
    )
    assert jobs is not None
    return jobs


def seconds(later: datetime | None, earlier: datetime | None) -> float:
    assert later is not None and earlier is not None
    return (later - earlier).total_seconds()


def p99(values: Sequence[float]) -> float:
    """Nearest-rank 99th percentile."""
    ordered = sorted(values)
    rank = max(1, -(-99 * len(ordered) // 100))
    return ordered[rank - 1]


# -- Redis from outside ----------------------------------------------------------------------


async def redis_call(url: str, fn: Callable[[redis.Redis], T]) -> T:
    def run() -> T:
        client = redis.Redis.from_url(url, socket_timeout=5.0)
        try:
            return fn(client)
        finally:
            client.close()

    return await trio.to_thread.run_sync(run)


async def pending_count(url: str, queue: str = "default") -> int:
    def pending(r: redis.Redis) -> int:
        return int(r.xpending(stream_key(queue), STREAM_GROUP)["pending"])

    return await redis_call(url, pending)


async def wait_for(
    predicate: Callable[[], object], *, timeout_s: float = 10.0, what: str = "condition"
) -> None:
    """``wait_until`` for an in-process (synchronous) condition."""

    async def probe() -> bool:
        return bool(predicate())

    await wait_until(probe, timeout_s=timeout_s, what=what)
