"""``gochatd.SyncClient``: threads of a synchronous app share one client, an asyncio app and
a Trio app enqueue beside them, and one worker fleet runs every job once. The client's
validation, idempotency and errors are the async ``Client``'s."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest
import trio

import gochatd
from gochatd.errors import (
    IdempotencyConflict,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    ResourceClosed,
    StoreUnavailable,
)
from gochatd.model import JobFilter, JobStatus
from gochatd.store.lender import Lender
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import (
    Tracker,
    is_postgres,
    make_registry,
    migrate,
    redis_call,
    started_worker,
    wait_all_status,
)
from tests.support.harness import make_settings

THREADS = 4
PER_THREAD = 25


def _in_threads(count: int, work: Callable[[int], list[int]]) -> list[int]:
    """Run ``work(i)`` on ``count`` threads released together; every id they return."""
    barrier = threading.Barrier(count)
    results: list[list[int]] = [[] for _ in range(count)]
    errors: list[BaseException] = []

    def main(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = work(i)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=main, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    return [job_id for ids in results for job_id in ids]


def _sync_app(url: str, redis_url: str) -> list[int]:
    """A threaded web app: 4 threads, one shared client, at most 2 connections."""
    with gochatd.SyncClient(url, redis_url, pool_size=2) as client:

        def work(i: int) -> list[int]:
            ids = [client.enqueue("test:count", {"t": i, "n": n}).id for n in range(PER_THREAD)]
            # The same key from every thread: one job, every thread gets it back.
            ids.append(client.enqueue("test:count", {"shared": 1}, idempotency_key="shared").id)
            return ids

        ids = _in_threads(THREADS, work)
        batch = client.enqueue_many([gochatd.NewJob("test:count", {"b": n}) for n in range(10)])
        return ids + [r.job.id for r in batch]


async def _asyncio_app(url: str, redis_url: str) -> list[int]:
    async with gochatd.Client(url, redis_url) as client:
        jobs = await asyncio.gather(*(client.enqueue("test:count", {"a": n}) for n in range(30)))
        return [j.id for j in jobs]


async def _trio_app(url: str, redis_url: str) -> list[int]:
    async with gochatd.Client(url, redis_url) as client:
        return [(await client.enqueue("test:count", {"trio": n})).id for n in range(30)]


async def test_threads_asyncio_and_trio_apps_feed_one_fleet(
    backend_url: str, redis_url: str
) -> None:
    if not is_postgres(backend_url):
        await migrate(backend_url)
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting()))
    settings = make_settings(backend_url, redis_url, worker_concurrency=20)
    async with started_worker(settings, registry=registry) as run:
        async with trio.open_nursery() as nursery:
            got: dict[str, list[int]] = {}

            async def produce(name: str, fn: Callable[[], Any]) -> None:
                got[name] = await trio.to_thread.run_sync(fn)

            nursery.start_soon(produce, "sync", lambda: _sync_app(backend_url, redis_url))
            nursery.start_soon(produce, "asyncio",
                               lambda: asyncio.run(_asyncio_app(backend_url, redis_url)))
            got["trio"] = await _trio_app(backend_url, redis_url)
        ids = set(got["sync"]) | set(got["asyncio"]) | set(got["trio"])
        assert len(got["sync"]) == THREADS * (PER_THREAD + 1) + 10
        assert len(set(got["sync"])) == THREADS * PER_THREAD + 1 + 10  # one shared job
        assert len(ids) == THREADS * PER_THREAD + 1 + 10 + 60
        await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED, timeout_s=60)
    assert sorted(tracker.executions) == sorted(ids)
    assert set(tracker.executions.values()) == {1}
    # Every job went through a stream: the clients XADDed after commit.
    entries = await redis_call(redis_url, lambda r: sum(
        int(r.xlen(key)) for key in r.scan_iter("gochat:jobs:*")))
    assert entries >= len(ids)


def _operations(url: str) -> dict[str, Any]:
    with gochatd.SyncClient(url) as client:
        first = client.enqueue("test:count", {"n": 1}, idempotency_key="k")
        again = client.enqueue("test:count", {"n": 1}, idempotency_key="k")
        with pytest.raises(IdempotencyConflict) as conflict:
            client.enqueue("test:count", {"n": 2}, idempotency_key="k")
        with pytest.raises(InvalidJob, match=r"^payload: "):
            client.enqueue("test:count", [1])  # type: ignore[arg-type]
        with pytest.raises(InvalidJob, match=r"^requests\[1\]\.queue: "):
            client.enqueue_many([gochatd.NewJob("test:count", {}),
                                 gochatd.NewJob("test:count", {}, queue="bad queue")])
        replay = client.enqueue_many(
            [gochatd.NewJob("test:count", {"n": 1}, idempotency_key="k")])
        cancelled = client.cancel(first.id)
        with pytest.raises(InvalidTransition):
            client.cancel(first.id)
        retried = client.retry(first.id)
        with pytest.raises(JobNotFound):
            client.cancel(10**9)
        listed = client.list_jobs(JobFilter(status=JobStatus.QUEUED))
        fetched = client.get_job(first.id)
        missing = client.get_job(10**9)
        with pytest.raises(InvalidJob):
            client.list_jobs(JobFilter(queue="bad queue"))
    with pytest.raises(ResourceClosed, match="SyncClient is closed"):
        client.enqueue("test:count", {})
    with pytest.raises(ResourceClosed, match="SyncClient is closed"):
        client.get_job(first.id)
    return {
        "same": again.id == first.id, "conflict": conflict.value.existing_id == first.id,
        "replay": (replay[0].created, replay[0].job.id) == (False, first.id),
        "cancelled": cancelled.status, "retried": retried.status,
        "listed": [j.id for j in listed], "fetched": fetched is not None and fetched.id,
        "missing": missing, "first": first.id,
    }


async def test_sync_client_operations_and_errors(backend_url: str) -> None:
    if not is_postgres(backend_url):
        await migrate(backend_url)
    got = await trio.to_thread.run_sync(_operations, backend_url)
    assert got["same"] and got["conflict"] and got["replay"]
    assert got["cancelled"] is JobStatus.CANCELLED and got["retried"] is JobStatus.QUEUED
    assert got["listed"] == [got["first"]] and got["fetched"] == got["first"]
    assert got["missing"] is None


def test_sync_client_used_before_open_or_reopened_is_refused(sqlite_url: str) -> None:
    client = gochatd.SyncClient(sqlite_url)
    with pytest.raises(ResourceClosed, match="before calling it"):
        client.get_job(1)
    client.close()
    with pytest.raises(ResourceClosed, match="SyncClient is closed"):
        client.open()


def test_sync_client_reports_an_unreachable_database() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://root@127.0.0.1:{port}/test?connect_timeout=2"
    with (pytest.raises(StoreUnavailable, match=r"^cannot connect to PostgreSQL at 127\.0\.0\.1"),
          gochatd.SyncClient(url)):
        pass


def test_sync_client_keeps_a_failed_redis_off_the_enqueue(pg_clean: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with gochatd.SyncClient(pg_clean, f"redis://127.0.0.1:{port}/0") as client:
        job = client.enqueue("test:count", {"n": 1})
        assert client.dispatch_ok is False, "the XADD failed: the sweep dispatches it"
        assert client.get_job(job.id) is not None


def test_lender_lends_at_most_size_connections_to_many_threads() -> None:
    opened: list[object] = []
    closed: list[object] = []
    state = {"lent": 0, "most": 0}
    guard = threading.Lock()

    def open_conn() -> object:
        conn = object()
        with guard:
            opened.append(conn)
        return conn

    lender: Lender[object] = Lender("test", 2, open_conn, closed.append, lambda conn: True)

    def unit(conn: object) -> None:
        with guard:
            state["lent"] += 1
            state["most"] = max(state["most"], state["lent"])
        with guard:
            state["lent"] -= 1

    def many(i: int) -> list[int]:
        for _ in range(200):
            lender.run(unit)
        return []

    _in_threads(8, many)
    assert state["most"] <= 2 and len(opened) <= 2
    # Two threads do hold a connection each at the same time (else the barrier breaks).
    both = threading.Barrier(2, timeout=30)
    _in_threads(2, lambda i: [lender.run(lambda conn: both.wait())])
    assert len(opened) == 2
    lender.close()
    assert sorted(map(id, closed)) == sorted(map(id, opened))
    with pytest.raises(ResourceClosed):
        lender.run(unit)
