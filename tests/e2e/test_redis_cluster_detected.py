"""A Redis Cluster node given as ``redis_url`` without ``redis_cluster`` (a real 3-master
cluster): every entry point says so in one line when it opens, before anything is written;
and a client that XADDs to it anyway (its streams given ready-made, so nothing checked them)
still returns the committed job once, logs the (redacted) failure, and leaves the job to
the sweep."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import structlog
import trio

import gochatd
from gochatd.dispatch.redis_streams import RedisStreams
from gochatd.errors import ConfigError
from tests.badinput.support import one_line_error, run_gochatd
from tests.support.redis_cluster import RedisCluster

WORDS = "is a Redis Cluster node; set redis_cluster: true"


def _job_count(pg_url: str) -> int:
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT count(*) FROM background_jobs").fetchone()
    assert row is not None
    return int(row[0])


async def test_every_entry_point_refuses_a_cluster_node_without_redis_cluster(
    pg_clean: str, redis_cluster: RedisCluster
) -> None:
    seed = redis_cluster.url
    with pytest.raises(ConfigError, match=f"^redis_url: redis://127.0.0.1:\\d+/?0? {WORDS}"):
        async with gochatd.Client(pg_clean, seed) as client:
            await client.enqueue("sys:noop")

    def sync_client() -> None:
        with gochatd.SyncClient(pg_clean, seed) as client:
            client.enqueue("sys:noop")

    with pytest.raises(ConfigError, match=WORDS):
        await trio.to_thread.run_sync(sync_client)
    env = {"GOCHAT_DATABASE_URL": pg_clean, "GOCHAT_REDIS_URL": seed}
    for args in (["enqueue", "sys:noop"], []):  # the CLI's client, and the daemon itself
        result = await trio.to_thread.run_sync(lambda a=args: run_gochatd(a, env))
        problem = one_line_error(result.returncode, result.stdout, result.stderr, WORDS)
        assert problem is None, problem
    assert _job_count(pg_clean) == 0  # nothing was written on the way
    # With redis_cluster=True the same seed works.
    async with gochatd.Client(pg_clean, seed, redis_cluster=True) as client:
        job = await client.enqueue("sys:noop")
    assert job.dispatched_at is not None


async def test_an_xadd_error_after_the_commit_never_fails_the_enqueue(
    pg_clean: str, redis_cluster: RedisCluster
) -> None:
    """A plain client on a cluster node answers MOVED for most stream keys: the enqueue
    still returns its committed row (a retry by the producer would make a second job)."""
    streams = RedisStreams(redis_cluster.url,
                           prefix="gochat:jobs:", group="gochat-workers", consumer="client",
                           maxlen=1000, block_s=1.0)
    await streams.open()
    captured: list[dict[str, Any]] = []
    try:
        with structlog.testing.capture_logs() as captured:
            async with gochatd.Client(pg_clean, streams=streams) as client:
                jobs = [await client.enqueue("sys:noop", {"n": n}, queue=q)
                        for n, q in enumerate(["default", "high", "events", "low", "search"])]
                batch = await client.enqueue_many(
                    [gochatd.NewJob("sys:noop", {"m": n}, queue="high") for n in range(3)])
    finally:
        await streams.close()
    assert len({j.id for j in jobs}) == 5 and all(r.created for r in batch)
    assert _job_count(pg_clean) == 8  # each once
    failed = [e for e in captured if e["event"] == "xadd_failed"]
    assert failed, captured  # at least the keys on other masters answered MOVED
    assert "MOVED" in str(failed[0]["error"]), failed
    with psycopg.connect(pg_clean) as conn:  # left to the sweep: waiting, not lost
        statuses = {r[0] for r in conn.execute("SELECT status FROM background_jobs")}
    assert statuses == {"queued"}
