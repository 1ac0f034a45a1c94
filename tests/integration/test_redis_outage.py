"""Redis dies under a running worker: it falls back to polling the database, enqueues keep
working, and it returns to streams when Redis is back. No job lost, none run twice."""

from __future__ import annotations

import trio

from gochatd.model import JobStatus
from gochatd.registry import HandlerSpec
from tests.integration.helpers import (
    Tracker,
    all_jobs,
    make_registry,
    started_worker,
    wait_all_status,
    wait_for,
)
from tests.support.harness import make_settings
from tests.support.redis_server import RedisServer


async def test_worker_survives_a_redis_restart(
    backend_url: str, own_redis: RedisServer
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting(seconds=0.02)))
    settings = make_settings(backend_url, own_redis.url, worker_concurrency=4)
    async with started_worker(settings, registry=registry) as run:
        worker, client, store = run.worker, run.worker.client, run.worker.store
        assert worker.mode.value == "streams"

        async def enqueue(n: int, tag: str) -> list[int]:
            return [(await client.enqueue("test:count", {"b": tag, "n": i})).id for i in range(n)]

        before = await enqueue(10, "before")
        await wait_all_status(store, before, JobStatus.COMPLETED)

        # Some of these are in flight or still in the stream when Redis goes away.
        around = await enqueue(10, "around")
        await wait_for(lambda: tracker.active > 0, what="handlers in flight")
        own_redis.kill()
        during = await enqueue(10, "during")
        await wait_for(lambda: worker.mode.value == "polling", what="polling mode")
        fell_back = client.dispatch_ok
        during += await enqueue(10, "during-polling")
        await wait_all_status(store, around + during, JobStatus.COMPLETED, timeout_s=20)

        await trio.to_thread.run_sync(own_redis.start)
        await wait_for(lambda: worker.mode.value == "streams", timeout_s=15,
                       what="back to streams mode")
        restored = client.dispatch_ok
        after = await enqueue(10, "after")
        await wait_all_status(store, after, JobStatus.COMPLETED)
        jobs = await all_jobs(store)
        counters = dict(worker.counters)

    # The client stopped XADDing while Redis was down, and resumed with streams mode.
    assert fell_back is False
    assert restored is True
    every = before + around + during + after
    assert len(jobs) == len(every)
    assert all(j.status is JobStatus.COMPLETED for j in jobs)
    assert all(j.attempts == 1 and j.fence == 1 for j in jobs)
    assert sorted(tracker.executions) == sorted(every)
    assert set(tracker.executions.values()) == {1}
    assert counters.get("redis_errors", 0) >= 1


async def test_redis_at_maxmemory_the_worker_polls_and_loses_nothing(
    backend_url: str, own_redis: RedisServer
) -> None:
    # maxmemory with noeviction: reads (XREADGROUP, PING) still work, every XADD is refused
    # with OOM. The enqueue still commits (the sweep would re-dispatch), the worker stops
    # trusting its stream reads and polls, and returns to streams once memory is free.
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting(seconds=0.01)))
    settings = make_settings(backend_url, own_redis.url, worker_concurrency=4)
    async with started_worker(settings, registry=registry) as run:
        worker, client, store = run.worker, run.worker.client, run.worker.store
        assert worker.mode.value == "streams"
        own_redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
        own_redis.command("CONFIG", "SET", "maxmemory", "1")  # over it: writes refused
        full = [(await client.enqueue("test:count", {"n": i})).id for i in range(10)]
        await wait_for(lambda: worker.mode.value == "polling", timeout_s=15, what="polling mode")
        await wait_all_status(store, full, JobStatus.COMPLETED, timeout_s=20)
        refused = own_redis.command("INFO", "errorstats")

        own_redis.command("CONFIG", "SET", "maxmemory", "0")
        await wait_for(lambda: worker.mode.value == "streams", timeout_s=15,
                       what="back to streams mode")
        after = [(await client.enqueue("test:count", {"n": i})).id for i in range(10, 20)]
        await wait_all_status(store, after, JobStatus.COMPLETED)

    assert b"errorstat_OOM" in refused
    assert sorted(tracker.executions) == sorted(full + after)
    assert set(tracker.executions.values()) == {1}
