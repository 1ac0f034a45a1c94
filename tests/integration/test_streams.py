"""Redis Streams dispatch: hostile entries, entries older than the consumer group, lost
XADDs healed by the sweep, and entries stranded in a dead consumer's PEL."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
import trio
from benchmarks.chaos.proxy import FaultProxy, Mode

from gochatd.client.client import Client
from gochatd.loops.schedule import SWEEP_TARGET, sweep_period_s
from gochatd.model import JobStatus
from gochatd.new_job import NewJob
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import (
    STREAM_GROUP,
    Tracker,
    insert_job,
    make_registry,
    migrate,
    now_sql,
    pending_count,
    redis_call,
    sql,
    started_worker,
    stream_key,
    wait_all_status,
    wait_for,
    wait_for_status,
)
from tests.support.harness import make_settings
from tests.support.wait import wait_until

MALFORMED: list[dict[Any, Any]] = [
    {"note": "no job id at all"},
    {"job_id": ""},
    {"job_id": "abc"},
    {"job_id": "12abc"},
    {"job_id": " 42"},
    {"job_id": "-7"},
    {"job_id": "0"},
    {"job_id": "3.5"},
    {"job_id": "9" * 40},
    {"job_id": "١٢٣"},  # digits, but not ASCII ones
    {"job_id": b"\xff\xfe\x00\x01"},
    {b"\x80\x81": b"\x00\xff", "queue": "default"},
]
#: Well-formed, but naming no job that exists (real jobs here have small ids).
NO_SUCH_JOB: list[dict[Any, Any]] = [
    {"job_id": "987654321"},
    {"job_id": "4" * 18},
    {"job_id": "900001", "job_type": "x" * 1_000_000, "blob": b"\x00\xff" * 50_000},
    {"job_id": "900002", **{f"f{i}": str(i) for i in range(40)}},
]


def _xadd_all(entries: list[dict[Any, Any]]) -> Callable[[redis.Redis], None]:
    def run(r: redis.Redis) -> None:
        for fields in entries:
            r.xadd(stream_key(), fields)

    return run


async def test_malformed_entries_are_acked_counted_and_survived(
    backend_url: str, redis_url: str
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting()))
    async with started_worker(make_settings(backend_url, redis_url), registry=registry) as run:
        before = [(await run.worker.client.enqueue("test:count", {"n": i})).id for i in range(5)]
        await redis_call(redis_url, _xadd_all(MALFORMED + NO_SUCH_JOB))
        after = [(await run.worker.client.enqueue("test:count", {"n": i})).id for i in range(5)]
        jobs = await wait_all_status(run.worker.store, before + after, JobStatus.COMPLETED)
        await wait_for(lambda: run.worker.counters["malformed_stream_entries"] == len(MALFORMED),
                       what="every malformed entry counted")
        # Duplicates of finished jobs are acked without running anything again.
        await redis_call(redis_url, _xadd_all([{"job_id": str(i)} for i in before]))

        async def nothing_pending() -> bool:
            return await pending_count(redis_url) == 0

        async def all_delivered() -> bool:
            def lag(r: redis.Redis) -> int:
                groups = r.xinfo_groups(stream_key())
                return int(next(g for g in groups if g["name"] == STREAM_GROUP.encode())["lag"])

            return await redis_call(redis_url, lag) == 0

        await wait_until(all_delivered, what="every entry delivered to the group")
        await wait_until(nothing_pending, what="every entry acked")
        assert run.worker.mode.value == "streams"
        last = await run.worker.client.enqueue("test:count", {"n": "last"})
        await wait_for_status(run.worker.store, last.id, JobStatus.COMPLETED)
        malformed = run.worker.counters["malformed_stream_entries"]

    assert malformed == len(MALFORMED)
    assert all(tracker.executions[i] == 1 for i in before + after + [last.id])
    assert len(tracker.executions) == len(before) + len(after) + 1
    assert all(j.attempts == 1 for j in jobs.values())


async def test_entries_added_before_the_group_exists_are_consumed(
    backend_url: str, redis_url: str
) -> None:
    await migrate(backend_url)
    async with Client(backend_url, redis_url) as client:
        ids = [(await client.enqueue("sys:noop", {"n": i})).id for i in range(5)]

    def groups(r: redis.Redis) -> list[Any]:
        return list(r.xinfo_groups(stream_key()))

    assert await redis_call(redis_url, groups) == []
    # The sweep (30 s) cannot be what runs them.
    settings = make_settings(backend_url, redis_url, worker_redis_sweep_interval_s=30.0)
    async with started_worker(settings, registry=make_registry()) as run:
        await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED, timeout_s=10)
        counters = dict(run.worker.counters)
        assert await pending_count(redis_url) == 0

    assert counters.get("sweep_redispatched", 0) == 0
    assert counters.get("due_jobs_dispatched", 0) == 0
    assert counters.get("jobs_claimed", 0) == 5


@pytest.mark.parametrize("how", ["xadd-fails", "foreign-row"])
async def test_lost_dispatch_is_healed_by_the_sweep(
    backend_url: str, redis_url: str, how: str
) -> None:
    """The row says 'dispatched' but no entry exists: only the sweep can find it."""
    settings = make_settings(backend_url, redis_url, worker_redis_sweep_interval_s=0.5)
    async with started_worker(settings, registry=make_registry()) as run:
        if how == "xadd-fails":
            # Redis answers the producer's open, then refuses every connection: the row is
            # marked dispatched and its XADD fails. (A producer that finds Redis down at
            # open leaves the job undispatched, for the sweep's other half.)
            proxy = FaultProxy()
            await trio.to_thread.run_sync(proxy.start)
            try:
                real = urlsplit(redis_url)
                port = await trio.to_thread.run_sync(proxy.add, "redis", "127.0.0.1", real.port)
                proxied = real._replace(netloc=f"127.0.0.1:{port}").geturl()
                async with Client(backend_url, proxied) as producer:
                    assert producer.dispatch_ok is True
                    await trio.to_thread.run_sync(proxy.set_mode, "redis", Mode.REFUSE)
                    job_id = (await producer.enqueue("sys:noop", {})).id
                    assert producer.dispatch_ok is False  # the XADD failed, the enqueue did not
            finally:
                await trio.to_thread.run_sync(proxy.stop)
        else:
            job_id = await insert_job(backend_url, dispatched=True)
        row = await run.worker.store.get_job(job_id)
        assert row is not None and row.dispatched_at is not None
        done = await wait_for_status(run.worker.store, job_id, JobStatus.COMPLETED, timeout_s=10)
        # Counted once the sweep pass over every queue is through.
        await wait_for(lambda: run.worker.counters["sweep_redispatched"] >= 1,
                       what="the sweep re-dispatched it")

    assert done.attempts == 1 and done.fence == 1


async def test_sweep_heals_a_lost_dispatch_within_one_interval(
    backend_url: str, redis_url: str
) -> None:
    """README: a lost XADD is re-dispatched within ``sweep_interval_s``. The sweep runs twice
    per interval and takes dispatches older than half of it, so the worst case (a row marked
    just after a pass) is one interval, not two."""
    interval_s = 20.0
    # The loop's own sweep is 10 s away; the passes below are called directly.
    settings = make_settings(backend_url, redis_url, worker_redis_sweep_interval_s=interval_s,
                             worker_queues={"default": 1, "idle": 1})
    async with started_worker(settings, registry=make_registry()) as run:
        assert run.worker.streams is not None
        young = await insert_job(backend_url, queue="idle", dispatched=True)
        old = await insert_job(backend_url, queue="idle", dispatched=True)
        # 0.4 and 0.6 of the interval ago: only the older one counts as lost yet.
        for job_id, age_s in ((young, 0.4 * interval_s), (old, 0.6 * interval_s)):
            await sql(backend_url, "UPDATE background_jobs SET dispatched_at = "
                      f"{now_sql(backend_url, -age_s)} WHERE id = %s", [job_id])
        assert run.worker.scheduler is not None
        assert await run.worker.scheduler.sweep(windowed=False) == 1
        await wait_for_status(run.worker.store, old, JobStatus.COMPLETED, timeout_s=10)
        left = await run.worker.store.get_job(young)
        assert left is not None and left.status is JobStatus.QUEUED, "not lost yet: left alone"
    assert sweep_period_s(interval_s) == interval_s / 2


async def test_entry_stranded_in_a_dead_consumers_pel_is_reclaimed(
    backend_url: str, redis_url: str
) -> None:
    await migrate(backend_url)
    # Dispatched as far as the database knows: neither the scheduler nor (for 30 s) the
    # sweep will touch it. The only way it can run is the stranded entry.
    job_id = await insert_job(backend_url, dispatched=True)

    def strand(r: redis.Redis) -> list[Any]:
        key = stream_key()
        r.xgroup_create(key, STREAM_GROUP, id="0", mkstream=True)
        r.xadd(key, {"job_id": str(job_id), "job_type": "sys:noop", "queue": "default",
                     "tenant_id": "default"})
        return list(r.xreadgroup(STREAM_GROUP, "ghost-worker", {key: ">"}, count=10))

    delivered = await redis_call(redis_url, strand)
    assert len(delivered) == 1 and len(delivered[0][1]) == 1
    assert await pending_count(redis_url) == 1

    # lease 1 s: entries idle for 1 s are reclaimed; the sweep is 30 s away.
    settings = make_settings(
        backend_url, redis_url, worker_lease_s=1.0, worker_redis_sweep_interval_s=30.0
    )
    async with started_worker(settings, registry=make_registry()) as run:
        done = await wait_for_status(run.worker.store, job_id, JobStatus.COMPLETED, timeout_s=10)
        counters = dict(run.worker.counters)

        def ghost_pending(r: redis.Redis) -> int:
            consumers = r.xinfo_consumers(stream_key(), STREAM_GROUP)
            return sum(int(c["pending"]) for c in consumers if c["name"] == b"ghost-worker")

        async def ghost_clear() -> bool:
            return await redis_call(redis_url, ghost_pending) == 0

        await wait_until(ghost_clear, what="the ghost's PEL emptied")
        assert await pending_count(redis_url) == 0

    assert counters.get("reclaimed_stream_entries", 0) >= 1
    assert counters.get("sweep_redispatched", 0) == 0
    assert done.attempts == 1 and done.fence == 1


async def test_jobs_whose_entries_were_trimmed_unread_are_swept_back(
    backend_url: str, redis_url: str
) -> None:
    """``MAXLEN`` trims entries nobody read (a backlog above ``stream_maxlen``): Redis's lag
    keeps counting them. The sweep must see an empty stream, not a full one, and re-dispatch
    their jobs; a pass that filled its room (1,000) is followed by another within
    ``REFILL_AGAIN_S``, not half an interval later (chaos ``overload`` at 10 minutes left
    80,083 jobs stranded for good behind an empty stream)."""
    interval_s = 20.0  # the loop's first pass comes 10 s after the start, the next 10 s later
    n = SWEEP_TARGET + 200
    await migrate(backend_url)
    key = stream_key()


    def group_that_has_read(r: redis.Redis) -> None:
        # A group that has read through an entry keeps an exact read counter: its lag is
        # then entries added less entries read, whatever the stream still holds.
        r.xgroup_create(key, STREAM_GROUP, id="0", mkstream=True)
        r.xadd(key, {"note": "read and acked before the test"})
        [[_, [(entry_id, _)]]] = r.xreadgroup(STREAM_GROUP, "earlier", {key: ">"}, count=1)
        r.xack(key, STREAM_GROUP, entry_id)

    await redis_call(redis_url, group_that_has_read)
    async with Client(backend_url, redis_url) as producer:
        results = await producer.enqueue_many([NewJob("sys:noop", {"n": i}) for i in range(n)])
    ids = [r.job.id for r in results]
    await sql(backend_url, "UPDATE background_jobs SET dispatched_at = "
              f"{now_sql(backend_url, -60.0)}")  # XADDed a minute ago: lost by now
    await redis_call(redis_url, lambda r: r.xtrim(key, maxlen=0, approximate=False))
    info = await redis_call(redis_url, lambda r: r.xinfo_groups(key))
    assert await redis_call(redis_url, lambda r: r.xlen(key)) == 0
    assert info[0]["lag"] is not None and int(info[0]["lag"]) >= n  # Redis still counts them
    settings = make_settings(backend_url, redis_url, worker_redis_sweep_interval_s=interval_s)
    async with started_worker(settings, registry=make_registry()) as run:
        started = trio.current_time()
        await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED,
                              timeout_s=sweep_period_s(interval_s) + 7.0)
        took_s = trio.current_time() - started
    assert took_s < 2 * sweep_period_s(interval_s), took_s
