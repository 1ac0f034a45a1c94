"""A real 3-master Redis Cluster on loopback (``redis_cluster: true``): the stream commands and
scripts one slot at a time, a weighted read across slots, the gateway's rate limit, and a
worker that drains queues on every master, falls back to polling when one master dies and
comes back when the cluster heals, with every job run once."""

from __future__ import annotations

from typing import Any

import trio
from redis.cluster import RedisCluster as ClusterClient

from gochatd.client.client import Client
from gochatd.dispatch.redis_client import break_socket, close_client, connect, slot_of
from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.gateway.ratelimit import RateLimiter
from gochatd.model import DispatchRef, JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import (
    Tracker,
    all_jobs,
    make_registry,
    started_worker,
    wait_all_status,
    wait_for,
)
from tests.support.harness import make_settings
from tests.support.redis_cluster import RedisCluster

#: Queues whose streams sit on all three masters (checked by ``_spread``).
QUEUES = ["default", "high", "events", "low", "search"]


def _spread(cluster: RedisCluster, queues: list[str]) -> dict[str, int]:
    """queue -> port of the master that holds its stream."""
    return {q: cluster.node_of(f"gochat:jobs:{q}").port for q in queues}


async def _cluster_call(url: str, fn: Any) -> Any:
    def run() -> Any:
        client = ClusterClient.from_url(url)
        try:
            return fn(client)
        finally:
            close_client(client)

    return await trio.to_thread.run_sync(run)


async def test_weighted_read_publish_and_ack_across_slots(redis_cluster: RedisCluster) -> None:
    queues = ["high", "default", "events"]
    assert len(set(_spread(redis_cluster, queues).values())) == 3  # three masters
    streams = RedisStreams(redis_cluster.url, prefix="gochat:jobs", group="g", consumer="c",
                           maxlen=1000, block_s=1.0, cluster=True)
    await streams.open()
    try:
        await streams.ensure_groups(queues)
        refs = [DispatchRef(100 * i + n, "t:x", q, "default")
                for i, q in enumerate(queues) for n in range(1, 6)]
        await streams.publish(refs)  # one script call per slot
        # The weighted order fills from the first queue first, then the next slot's.
        first = await streams.read(queues, 7, 1.0)
        assert [streams.queue_of(e.stream) for e in first] == ["high"] * 5 + ["default"] * 2
        assert await streams.backlog("default") == 5  # 3 waiting + 2 pending
        await streams.hand_back(first[5:])  # a transaction per slot
        await streams.ack(first[:5])
        rest = await streams.read(queues, 100, 1.0)
        assert sorted(e.parse().job_id for e in rest if e.parse()) == [  # type: ignore[union-attr]
            *range(101, 106), *range(201, 206)]
        await streams.ack(rest)
        # Nothing left anywhere: a read blocks on one slot only briefly, then returns.
        started = trio.current_time()
        assert await streams.read(queues, 10, 1.0, fill_first=False) == []
        assert trio.current_time() - started < 0.9
        assert await streams.trim(queues) >= 15
        assert await streams.autoclaim(queues, 0.0, 10) == []
    finally:
        await streams.close()


async def test_gateway_rate_limit_on_the_cluster(redis_cluster: RedisCluster) -> None:
    limiter = RateLimiter(redis_cluster.url, cluster=True)
    await limiter.open()
    try:
        # One job per 100 s: the bucket's key lives ~200 s, long past the checks below.
        assert (await limiter.take("tenant-a", 0.01, 2, 2)).admitted
        refused = await limiter.take("tenant-a", 0.01, 2, 1)
        assert not refused.admitted and refused.retry_after_s > 50
        assert limiter.mode == "redis"
        key = "gochat:gateway:rate:tenant-a"
        assert await _cluster_call(redis_cluster.url, lambda r: r.exists(key)) == 1
    finally:
        await limiter.close()


async def test_worker_drains_queues_on_every_master(
    backend_url: str, redis_cluster: RedisCluster
) -> None:
    assert len(set(_spread(redis_cluster, QUEUES).values())) == 3
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting(seconds=0.0)))
    settings = make_settings(backend_url, redis_cluster.url, redis_cluster=True,
                             worker_concurrency=8, worker_queues={q: 1 for q in QUEUES})
    async with started_worker(settings, registry=registry) as run:
        worker, store = run.worker, run.worker.store
        assert worker.mode.value == "streams"
        ids = [(await worker.client.enqueue("test:count", {"n": i}, queue=QUEUES[i % 5])).id
               for i in range(30)]
        # A producer of its own: gochatd.Client XADDs to the cluster after its commit.
        async with Client(backend_url, redis_cluster.url, redis_cluster=True) as client:
            ids += [(await client.enqueue("test:count", {"m": i}, queue=QUEUES[i % 5])).id
                    for i in range(30)]
            assert client.dispatch_ok
        await wait_all_status(store, ids, JobStatus.COMPLETED, timeout_s=30)
        jobs = await all_jobs(store)
        assert worker.mode.value == "streams"
    assert all(j.attempts == 1 and j.fence == 1 for j in jobs)
    assert set(tracker.executions.values()) == {1} and sorted(tracker.executions) == sorted(ids)
    # They came through the streams: the group read every entry on every master.
    read = await _cluster_call(redis_cluster.url, lambda r: {
        q: sum(int(g.get("entries-read") or 0) for g in r.xinfo_groups(f"gochat:jobs:{q}"))
        for q in QUEUES})
    assert read == dict.fromkeys(QUEUES, 12)


async def test_master_killed_mid_run_then_healed(
    backend_url: str, redis_cluster: RedisCluster
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting(seconds=0.02)))
    settings = make_settings(backend_url, redis_cluster.url, redis_cluster=True,
                             worker_concurrency=4, worker_queues={q: 1 for q in QUEUES},
                             worker_redis_sweep_interval_s=0.5)
    victim = redis_cluster.node_of("gochat:jobs:default")
    async with started_worker(settings, registry=registry) as run:
        worker, client, store = run.worker, run.worker.client, run.worker.store

        async def enqueue(n: int, tag: str) -> list[int]:
            return [(await client.enqueue("test:count", {"t": tag, "n": i},
                                          queue=QUEUES[i % 5])).id for i in range(n)]

        ids = await enqueue(40, "around")
        await wait_for(lambda: tracker.active > 0, what="handlers in flight")
        redis_cluster.kill(victim)
        ids += await enqueue(20, "during")
        await wait_for(lambda: worker.mode.value == "polling", timeout_s=20, what="polling")
        ids += await enqueue(20, "while-polling")
        await wait_all_status(store, ids, JobStatus.COMPLETED, timeout_s=120)

        await trio.to_thread.run_sync(redis_cluster.restart, victim)
        await wait_for(lambda: worker.mode.value == "streams", timeout_s=30,
                       what="back to streams once the cluster healed")
        ids += await enqueue(20, "after")
        await wait_all_status(store, ids, JobStatus.COMPLETED, timeout_s=30)
        jobs = await all_jobs(store)
        counters = dict(worker.counters)
    assert len(jobs) == len(ids) == 100
    assert all(j.status is JobStatus.COMPLETED for j in jobs)
    # Each job ran once, under its first and only fence.
    assert all(j.attempts == 1 and j.fence == 1 for j in jobs)
    assert set(tracker.executions.values()) == {1} and sorted(tracker.executions) == sorted(ids)
    assert counters.get("redis_errors", 0) >= 1
    assert slot_of("gochat:jobs:default") != slot_of("gochat:jobs:high")


async def test_a_blocked_cluster_read_is_interrupted(redis_cluster: RedisCluster) -> None:
    """``break_socket`` (the Handoff's interrupt) ends a read blocked on a master at once."""
    client = connect(redis_cluster.url, cluster=True, socket_timeout_s=30.0, client_name="t")
    key = "gochat:jobs:default"
    client.xgroup_create(key, "g", id="0", mkstream=True)
    outcome: list[BaseException | None] = []

    def blocked_read() -> None:
        try:
            # The master's own client, as on_slot runs it (on_slot would try once more).
            master = client.get_redis_connection(client.get_node_from_key(key))
            master.xreadgroup("g", "c", {key: ">"}, block=20_000)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, blocked_read)
            await wait_for(lambda: any(
                getattr(getattr(n.redis_connection, "connection_pool", None),
                        "_in_use_connections", None) for n in client.get_nodes()),
                what="the read in flight")
            started = trio.current_time()
            break_socket(client)
        assert trio.current_time() - started < 10
        assert outcome and outcome[0] is not None  # it failed, it did not wait 20 s
    finally:
        close_client(client)


async def test_a_hash_tagged_prefix_reads_every_queue_in_one_slot(
    redis_cluster: RedisCluster,
) -> None:
    """``stream_prefix: "{gochat}:jobs"`` puts every queue in one slot: one fill script for
    all and a blocking read that wakes for an entry in any queue, as on one server."""
    queues = ["high", "default", "low"]
    streams = RedisStreams(redis_cluster.url, prefix="{gochat}:jobs", group="g",
                           consumer="c", maxlen=1000, block_s=5.0, cluster=True)
    assert len({slot_of(streams.key(q)) for q in queues}) == 1
    await streams.open()
    try:
        await streams.ensure_groups(queues)
        got: list[Any] = []

        async def blocked_read() -> None:
            got.extend(await streams.read(queues, 10, 5.0, fill_first=False))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(blocked_read)
            node = redis_cluster.node_of(streams.key("low"))
            await wait_for(lambda: b"blocked_clients:1" in node.command("INFO", "clients"),
                           what="the read blocked on the master")  # an XADD must wake it
            started = trio.current_time()
            await streams.publish([DispatchRef(7, "t:x", "low", "default")])
        assert trio.current_time() - started < 4.0  # woken, not timed out at 5 s
        assert [(streams.queue_of(e.stream), e.fields["job_id"]) for e in got] == [("low", "7")]
    finally:
        await streams.close()
