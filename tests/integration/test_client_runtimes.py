"""The client outside Trio: ``async with gochatd.Client(...)`` inside ``asyncio.run()``
enqueues jobs a Trio daemon runs, and a failing database or Redis surfaces as gochatd's own
errors (``StoreUnavailable``), never as ``trio.TrioInternalError``."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
import trio

import gochatd
from gochatd.errors import IdempotencyConflict, StoreUnavailable
from gochatd.model import JobFilter, JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import (
    Tracker,
    is_postgres,
    make_registry,
    migrate,
    redis_call,
    sql,
    started_worker,
    wait_all_status,
)
from tests.support.harness import make_settings
from tests.support.pgbouncer import PgBouncer


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _produce(url: str, redis_url: str) -> dict[str, Any]:
    """asyncio side: what a FastAPI or aiohttp app would do."""
    async with gochatd.Client(url, redis_url) as client:
        first = await client.enqueue("test:count", {"n": 0}, idempotency_key="k0")
        again = await client.enqueue("test:count", {"n": 0}, idempotency_key="k0")
        try:
            await client.enqueue("test:count", {"n": 99}, idempotency_key="k0")
            conflict = None
        except IdempotencyConflict as exc:
            conflict = exc.existing_id
        # Concurrent producers on one loop share the client.
        gathered = await asyncio.gather(
            *(client.enqueue("test:count", {"n": n}) for n in range(1, 41))
        )
        batch = await client.enqueue_many(
            [gochatd.NewJob("test:count", {"n": n}) for n in range(41, 60)]
        )
        delayed = await client.enqueue("test:count", {"n": -1}, delay_s=3600)
        cancelled = await client.cancel(delayed.id)
        listed = await client.list_jobs(JobFilter(status=JobStatus.CANCELLED))
        # Cancellation by the asyncio side leaves the client usable.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0):
                await client.get_job(first.id)
        fetched = await client.get_job(first.id)
        return {
            "ids": [first.id] + [j.id for j in gathered] + [r.job.id for r in batch],
            "same": again.id == first.id, "conflict": conflict,
            "cancelled": cancelled.status, "listed": [j.id for j in listed],
            "delayed": delayed.id, "fetched": fetched is not None and fetched.id == first.id,
        }


async def test_asyncio_producer_feeds_a_trio_daemon(backend_url: str, redis_url: str) -> None:
    if not is_postgres(backend_url):
        await migrate(backend_url)
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting()))
    settings = make_settings(backend_url, redis_url, worker_concurrency=20)
    async with started_worker(settings, registry=registry) as run:
        got = await trio.to_thread.run_sync(asyncio.run, _produce(backend_url, redis_url))
        await wait_all_status(run.worker.store, got["ids"], JobStatus.COMPLETED)
    assert got["same"] and got["conflict"] == got["ids"][0] and got["fetched"]
    assert got["cancelled"] is JobStatus.CANCELLED and got["listed"] == [got["delayed"]]
    assert sorted(tracker.executions) == sorted(got["ids"])
    assert set(tracker.executions.values()) == {1}
    # Every due job went through the stream: the asyncio client did the XADDs.
    entries = await redis_call(redis_url, lambda r: sum(
        int(r.xlen(key)) for key in r.scan_iter("gochat:jobs:*")))
    assert entries >= len(got["ids"])


def test_asyncio_client_reports_an_unreachable_database_as_store_unavailable() -> None:
    url = f"postgresql://root@127.0.0.1:{_closed_port()}/test?connect_timeout=2"

    async def main() -> None:
        async with gochatd.Client(url):
            pass

    with pytest.raises(StoreUnavailable, match=r"cannot connect to PostgreSQL at 127\.0\.0\.1:\d+: "
                       "connection refused"):
        asyncio.run(main())


def test_asyncio_client_survives_a_terminated_backend(pg_clean: str) -> None:
    """A backend killed under the client while idle: the pool sees the dead connection
    before it lends it (store/pg_threads.py) and the next call works on a new one."""

    async def main() -> tuple[str, int]:
        async with gochatd.Client(pg_clean) as client:
            await client.enqueue("test:count", {"n": 1})
            await asyncio.to_thread(_terminate_others, pg_clean)
            outcome = "ok"
            try:
                await client.enqueue("test:count", {"n": 2})
            except StoreUnavailable:
                outcome = "unavailable"
            job = await client.enqueue("test:count", {"n": 3})
            return outcome, job.id

    outcome, last_id = asyncio.run(main())
    assert outcome == "ok"
    assert last_id > 0


def _terminate_others(url: str) -> None:
    """Terminate every other backend of this database and wait until they are gone
    (pg_terminate_backend only signals them)."""
    import time

    import psycopg

    others = (" FROM pg_stat_activity WHERE datname = current_database()"
              " AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
    with psycopg.connect(url, autocommit=True) as conn:
        killed = [r[0] for r in conn.execute("SELECT pid" + others).fetchall()]
        assert killed, "the client has connections"
        conn.execute("SELECT pg_terminate_backend(pid)" + others)
        deadline = time.monotonic() + 10
        while conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                           [killed]).fetchone() != (0,):
            assert time.monotonic() < deadline, "terminated backends did not go away"
            time.sleep(0.01)


async def test_trio_client_reports_an_unreachable_redis_and_still_enqueues(
    pg_clean: str,
) -> None:
    redis_url = f"redis://127.0.0.1:{_closed_port()}/0"
    async with gochatd.Client(pg_clean, redis_url) as client:
        job = await client.enqueue("test:count", {"n": 1})
        assert client.dispatch_ok is False, "the XADD failed: the sweep dispatches it"
    rows = await sql(pg_clean, "SELECT status FROM background_jobs WHERE id = %s", [job.id])
    assert rows == [("queued",)]


async def _through_the_pooler(url: str, redis_url: str) -> list[int]:
    async with gochatd.Client(url, redis_url) as client:
        ids = [(await client.enqueue("test:count", {"n": n})).id for n in range(60)]
        ids += [r.job.id for r in await client.enqueue_many(
            [gochatd.NewJob("test:count", {"n": n}) for n in range(60, 80)])]
        for job_id in ids[:5]:
            job = await client.get_job(job_id)
            assert job is not None and job.id == job_id
        return ids


async def test_both_runtimes_enqueue_through_pgbouncer_in_transaction_mode(
    pgbouncer: PgBouncer, pg_clean: str, redis_url: str
) -> None:
    """A Trio and an asyncio producer behind PgBouncer (pool_mode = transaction, where a
    prepared statement is not where the next transaction runs); a Trio daemon connected
    directly runs every job once."""
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting()))
    settings = make_settings(pg_clean, redis_url, worker_concurrency=20)
    async with started_worker(settings, registry=registry) as run:
        ids = await _through_the_pooler(pgbouncer.url, redis_url)
        ids += await trio.to_thread.run_sync(
            asyncio.run, _through_the_pooler(pgbouncer.url, redis_url))
        await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED)
    assert len(set(ids)) == 160
    assert sorted(tracker.executions) == sorted(ids)
    assert set(tracker.executions.values()) == {1}
