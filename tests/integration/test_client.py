"""The public client (gochatd.Client): batches dispatched through Redis and run, validation
that refuses a whole batch, idempotency conflicts, XADD failures, get_job and cancel."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
import trio

import gochatd
from gochatd.client.client import MAX_BATCH
from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.errors import (
    ConfigError,
    DispatchUnavailable,
    IdempotencyConflict,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
)
from gochatd.model import DispatchRef, JobFilter, JobStatus
from gochatd.store import open_store
from gochatd.store.presence import NoDatabase
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
    wait_for,
    wait_for_status,
)
from tests.support.harness import make_settings
from tests.support.redis_server import RedisServer


async def _rows(url: str) -> int:
    return int((await sql(url, "SELECT count(*) FROM background_jobs"))[0][0])


async def test_enqueue_many_is_dispatched_by_the_client_and_runs(
    backend_url: str, redis_url: str
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting()))
    settings = make_settings(backend_url, redis_url, worker_concurrency=20)
    async with started_worker(settings, registry=registry) as run:
        async with gochatd.Client(backend_url, redis_url) as client:
            results = await client.enqueue_many(
                [gochatd.NewJob("test:count", {"n": n}) for n in range(150)]
                + [{"job_type": "test:count", "payload": {"n": n}, "queue": "high"}
                   for n in range(150, 200)]
            )
        ids = [r.job.id for r in results]
        assert all(r.created and r.job.dispatched_at is not None for r in results)
        assert [r.job.payload["n"] for r in results] == list(range(200))
        await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED)
        counters = dict(run.worker.counters)
    assert sorted(tracker.executions) == sorted(ids)
    assert set(tracker.executions.values()) == {1}
    # Every entry came from the client's one XADD call: nothing was left for the scheduler
    # or the sweep to dispatch.
    assert counters.get("due_jobs_dispatched", 0) == 0
    assert counters.get("sweep_redispatched", 0) == 0


async def test_client_opens_its_own_bridge_and_manages_jobs(backend_url: str) -> None:
    if not is_postgres(backend_url):
        await migrate(backend_url)
    # No trio-asyncio loop is running here: the client opens one for its lifetime.
    async with gochatd.Client(backend_url) as client:
        job = await client.enqueue("report:build", {"n": 1}, tenant_id="acme", delay_s=3600)
        assert job.dispatched_at is None, "no Redis: workers are woken by the database"
        batch = await client.enqueue_many([
            {"job_type": "report:build", "payload": {"n": 2}, "idempotency_key": "r2"},
            gochatd.NewJob("report:build", {"n": 3}, scheduled_at=datetime(2020, 1, 1, tzinfo=UTC)),
        ])
        assert await client.get_job(job.id) == job
        assert await client.get_job(10**12) is None
        cancelled = await client.cancel(batch[0].job.id)
        assert cancelled.status is JobStatus.CANCELLED
        assert (await client.retry(cancelled.id)).status is JobStatus.QUEUED
        listed = await client.list_jobs(JobFilter(tenant_id="acme"))
        assert [j.id for j in listed] == [job.id]
        with pytest.raises(JobNotFound):
            await client.cancel(10**12)
        assert await client.enqueue_many([]) == []
    assert await _rows(backend_url) == 3


async def test_cancel_of_a_finished_job_is_refused(backend_url: str) -> None:
    registry = make_registry()
    async with (
        started_worker(make_settings(backend_url), registry=registry) as run,
        gochatd.Client(backend_url) as client,
    ):
        [done] = await client.enqueue_many([gochatd.NewJob("sys:noop")])
        await wait_for_status(run.worker.store, done.job.id, JobStatus.COMPLETED)
        with pytest.raises(InvalidTransition):
            await client.cancel(done.job.id)


BAD_BATCHES: list[tuple[Any, str]] = [
    ([{"job_type": "ok"}, {"job_type": "ok", "queue": "no spaces"}], "requests[1].queue: "),
    ([{"job_type": "ok"}, {"job_type": "ok", "colour": "red"}], "requests[1]: unknown field 'colour'"),
    ([{"payload": {}}], "requests[0].job_type: required"),
    ([gochatd.NewJob("ok", [1, 2])], "requests[0].payload: expected a JSON object"),  # type: ignore[arg-type]
    ([gochatd.NewJob("ok"), gochatd.NewJob("ok", {"x": float("nan")})],
     "requests[1].payload: not JSON-serialisable"),
    ([gochatd.NewJob("ok"), gochatd.NewJob("ok"),
      gochatd.NewJob("ok", delay_s=1, scheduled_at=datetime(2030, 1, 1, tzinfo=UTC))],
     "requests[2]: give either scheduled_at or delay_s"),
    ([gochatd.NewJob("ok", max_attempts=0)], "requests[0].max_attempts: "),
    ([gochatd.NewJob("ok"), "sys:noop"], "requests[1]: expected a gochatd.NewJob or a mapping"),
    ({"job_type": "ok"}, "requests: expected a list"),
    ([gochatd.NewJob("ok")] * (MAX_BATCH + 1), f"over the limit of {MAX_BATCH}"),
]


@pytest.mark.parametrize(("items", "message"), BAD_BATCHES)
async def test_one_bad_item_refuses_the_whole_batch(
    pg_clean: str, items: Sequence[Any], message: str
) -> None:
    async with gochatd.Client(pg_clean) as client:
        await client.enqueue("sys:noop")
        with pytest.raises(InvalidJob) as info:
            await client.enqueue_many(items)
    assert message in str(info.value)
    assert await _rows(pg_clean) == 1, "nothing of the batch was written"


async def test_idempotency_conflict_fails_the_batch_unless_reported_per_item(
    backend_url: str
) -> None:
    if not is_postgres(backend_url):
        await migrate(backend_url)
    async with gochatd.Client(backend_url) as client:
        held = await client.enqueue("mail:send", {"to": "a"}, idempotency_key="mail-1")
        clash = [gochatd.NewJob("mail:send", {"to": "b"}),
                 gochatd.NewJob("mail:send", {"to": "z"}, idempotency_key="mail-1")]
        with pytest.raises(IdempotencyConflict) as info:
            await client.enqueue_many(clash)
        assert (info.value.index, info.value.existing_id) == (1, held.id)
        assert await _rows(backend_url) == 1
        results = await client.enqueue_many(clash, raise_on_conflict=False)
        assert [(r.created, r.conflict) for r in results] == [(True, False), (False, True)]
        assert results[1].job == held
        same = await client.enqueue_many([gochatd.NewJob("mail:send", {"to": "a"},
                                                         idempotency_key="mail-1")])
        assert (same[0].created, same[0].job.id) == (False, held.id)
    assert await _rows(backend_url) == 2


async def test_xadd_failure_never_fails_enqueue_many_and_the_sweep_heals(
    backend_url: str, own_redis: RedisServer
) -> None:
    if not is_postgres(backend_url):
        await migrate(backend_url)
    async with gochatd.Client(backend_url, own_redis.url) as client:
        await client.enqueue_many([gochatd.NewJob("sys:noop")])  # connected and working
        own_redis.kill()
        lost = await client.enqueue_many([gochatd.NewJob("sys:noop", {"n": n}) for n in range(20)])
        # Rows marked dispatched whose XADD failed: only the sweep can find them.
        assert all(r.created and r.job.dispatched_at is not None for r in lost)
        assert client.dispatch_ok is False
        # While Redis is known to be down the client leaves dispatch to the daemons.
        later = await client.enqueue_many([gochatd.NewJob("sys:noop", {"n": n}) for n in range(5)])
        assert all(r.job.dispatched_at is None for r in later)
    await trio.to_thread.run_sync(own_redis.start)
    settings = make_settings(backend_url, own_redis.url, worker_redis_sweep_interval_s=0.2)
    async with started_worker(settings, registry=make_registry()) as run:
        ids = [r.job.id for r in lost + later]
        await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED)
        await wait_for(lambda: run.worker.counters["sweep_redispatched"] >= len(lost),
                       what="the lost entries re-dispatched by the sweep")


async def test_client_without_database_url_is_refused() -> None:
    with pytest.raises(ConfigError, match="database_url"):
        gochatd.Client()
    client = gochatd.Client("sqlite:///unused.db")
    with pytest.raises(RuntimeError, match="async with"):
        await client.get_job(1)


async def test_publish_keeps_every_field_and_survives_a_broken_stream(
    redis_url: str
) -> None:
    streams = RedisStreams(redis_url, prefix="gochat:jobs", group="gochat-workers",
                           consumer="test", maxlen=1000, block_s=0.1)
    await streams.open()
    try:
        refs = [DispatchRef(2**53 + 1, "t:a", "high", "tenant ✓ 😀 \"quoted\""),
                DispatchRef(7, "t:b", "low", "acme"), DispatchRef(8, "t:c", "high", "acme")]
        await streams.publish(refs)
        await redis_call(redis_url, lambda r: r.set("gochat:jobs:broken", "not a stream"))
        with pytest.raises(DispatchUnavailable):
            await streams.publish([DispatchRef(9, "t:d", "broken", "acme"),
                                   DispatchRef(10, "t:e", "low", "acme")])
    finally:
        await streams.close()

    def entries(queue: str) -> Callable[[redis.Redis], list[dict[str, str]]]:
        def read(r: redis.Redis) -> list[dict[str, str]]:
            return [{k.decode(): v.decode() for k, v in fields.items()}
                    for _, fields in r.xrange(f"gochat:jobs:{queue}")]
        return read

    assert await redis_call(redis_url, entries("high")) == [
        {"job_id": str(2**53 + 1), "job_type": "t:a", "queue": "high",
         "tenant_id": "tenant ✓ 😀 \"quoted\""},
        {"job_id": "8", "job_type": "t:c", "queue": "high", "tenant_id": "acme"},
    ]
    # The entry after the broken one was still added, as in a pipeline.
    assert [e["job_id"] for e in await redis_call(redis_url, entries("low"))] == ["7", "10"]


async def test_a_client_on_a_missing_sqlite_file_is_refused_and_creates_nothing(
    tmp_path: Path,
) -> None:
    """A typo in the path must not leave an empty database no daemon looks at."""
    missing = tmp_path / "typo.db"
    with pytest.raises(NoDatabase, match=f"no gochatd database at {missing}; run 'gochatd db"):
        async with gochatd.Client(f"sqlite:///{missing}"):
            pass
    with pytest.raises(NoDatabase, match="no gochatd database at"):
        await trio.to_thread.run_sync(lambda: gochatd.SyncClient(f"sqlite:///{missing}").open())
    assert not missing.exists()


@pytest.fixture
def schemaless_url(backend_url: str, tmp_path: Path) -> Iterator[str]:
    """A database of the backend's dialect that exists but holds no gochatd schema."""
    if not is_postgres(backend_url):
        path = tmp_path / "empty.db"
        sqlite3.connect(path).close()
        assert path.is_file()
        yield f"sqlite:///{path}"
        return
    name = f"gochatd_noschema_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(backend_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{backend_url.rpartition('/')[0]}/{name}"
    finally:
        with psycopg.connect(backend_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_both_clients_on_a_database_without_the_schema_say_db_upgrade(
    schemaless_url: str,
) -> None:
    """Client and SyncClient, SQLite and PostgreSQL: the same error class and words when they
    open (not a driver's UndefinedTable at the first enqueue), and nothing is created."""
    fix = "run 'gochatd db upgrade'"
    with pytest.raises(NoDatabase, match=f"^no gochatd (database at|schema in) .*; {fix}") as one:
        async with gochatd.Client(schemaless_url) as client:
            await client.enqueue("t:never", {})

    def sync_open() -> None:
        with gochatd.SyncClient(schemaless_url) as client:
            client.enqueue("t:never", {})

    with pytest.raises(NoDatabase, match=f"^no gochatd (database at|schema in) .*; {fix}") as two:
        await trio.to_thread.run_sync(sync_open)
    assert str(one.value) == str(two.value)
    assert "password" not in str(one.value)
    store = open_store(schemaless_url)
    await store.open()
    try:
        assert await store.schema_version() == 0  # still nothing there
    finally:
        await store.close()
