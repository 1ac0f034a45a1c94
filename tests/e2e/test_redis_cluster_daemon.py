"""A ``gochatd serve`` process on a 3-master Redis Cluster (``GOCHAT_REDIS_CLUSTER=true``):
it drains queues spread over every master, falls back to polling the database when a master
is killed mid-run, returns to streams when the cluster heals, and every job completes once,
under its first fence."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from tests.support.daemon_process import DaemonFactory, child_env, poll_until
from tests.support.e2e_jobs import executions, jobs, status_counts
from tests.support.redis_cluster import RedisCluster

HANDLERS = "tests.support.recording_handlers"
QUEUES = ["default", "high", "events", "low", "search"]


def _env(pg_url: str, cluster: RedisCluster) -> dict[str, str]:
    return {
        "GOCHAT_DATABASE_URL": pg_url,
        "GOCHAT_REDIS_URL": cluster.url,
        "GOCHAT_REDIS_CLUSTER": "true",
        "GOCHAT_HANDLERS": HANDLERS,
        "GOCHAT_LOG_FORMAT": "json",
        "GOCHAT_WORKER_QUEUES": ",".join(QUEUES),
        "GOCHAT_WORKER_CONCURRENCY": "8",
        "GOCHAT_WORKER_LEASE_S": "5",
        "GOCHAT_WORKER_REDIS_BLOCK_TIMEOUT_S": "0.2",
        "GOCHAT_WORKER_REDIS_SWEEP_INTERVAL_S": "1",
        "GOCHAT_WORKER_POLL_INTERVAL_MAX_S": "0.2",
    }


#: A producer process of its own (as in production): gochatd.Client on the cluster, XADD
#: after commit; prints the new ids.
PRODUCER = """
import json, sys, trio
from gochatd.client.client import Client

async def main(url, seed, n, tag, queues):
    async with Client(url, seed, redis_cluster=True) as client:
        return [(await client.enqueue("test:record", {"seconds": 0.02, "t": tag, "n": i},
                                      queue=queues[i % len(queues)])).id for i in range(n)]

print(json.dumps(trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4],
                          sys.argv[5].split(","))))
"""


def _enqueue(pg_url: str, cluster: RedisCluster, n: int, tag: str) -> list[int]:
    """``n`` jobs over the queues, through a cluster client in a producer process."""
    done = subprocess.run(
        [sys.executable, "-c", PRODUCER, pg_url, cluster.url, str(n), tag, ",".join(QUEUES)],
        capture_output=True, text=True, timeout=120, check=False, env=child_env(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    return [int(i) for i in json.loads(done.stdout)]


def _modes(events: list[dict[str, Any]]) -> list[str]:
    return [str(e.get("mode")) for e in events]


@pytest.mark.slow
def test_daemon_on_the_cluster_survives_a_master_kill(
    pg_jobs: str, redis_cluster: RedisCluster, daemons: DaemonFactory
) -> None:
    daemon = daemons.start("cluster", env=_env(pg_jobs, redis_cluster), mode="streams")
    ids = _enqueue(pg_jobs, redis_cluster, 50, "before")
    poll_until(lambda: status_counts(pg_jobs)["completed"] == 50, timeout_s=60,
               what="the first jobs drained through the cluster")
    assert _modes(daemon.events("dispatch_mode")) == ["streams"]  # never polled

    ids += _enqueue(pg_jobs, redis_cluster, 50, "around")
    victim = redis_cluster.node_of("gochat:jobs:default")
    redis_cluster.kill(victim)
    ids += _enqueue(pg_jobs, redis_cluster, 50, "during")
    daemon.wait_for_event("dispatch_mode", lambda e: e.get("mode") == "polling", timeout_s=30)
    poll_until(lambda: status_counts(pg_jobs)["completed"] == 150, timeout_s=90,
               what="every job completed while a master was down")

    redis_cluster.restart(victim)
    poll_until(lambda: _modes(daemon.events("dispatch_mode"))[-1] == "streams", timeout_s=30,
               what="back on streams after the cluster healed")
    ids += _enqueue(pg_jobs, redis_cluster, 50, "after")
    poll_until(lambda: status_counts(pg_jobs)["completed"] == 200, timeout_s=60,
               what="the jobs after the heal")
    assert daemon.stop() == 0
    daemon.assert_clean_output()

    rows = jobs(pg_jobs)
    assert sorted(rows) == sorted(ids)
    assert {(r.status, r.attempts, r.fence) for r in rows.values()} == {("completed", 1, 1)}
    runs = executions(pg_jobs)
    assert Counter(e.job_id for e in runs) == Counter(ids)  # once each
    assert {e.fence for e in runs} == {1} and all(e.ended_at is not None for e in runs)
