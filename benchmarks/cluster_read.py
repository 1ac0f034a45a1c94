"""The weighted read over several queues on a Redis Cluster, measured three ways
(``python -m benchmarks.cluster_read``; docs/redis-cluster.md has the figures):

- ``script_per_slot``: the fill script once per hash slot, in the weighted order, each call
  asking for what is still missing (what ``RedisStreams.read`` does);
- ``read_per_queue``: one plain XREADGROUP per queue, in the same order, same counts;
- ``pipelined_reads``: one XREADGROUP per queue with COUNT = count / queues, all in one
  cluster pipeline (one round trip per master; the weighted order is lost).

Two shapes: an idle read (every stream empty: what an idle worker repeats) and a drain of a
backlog spread over every queue (COUNT 100 per read). It starts its own 3-master cluster.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from redis.cluster import RedisCluster as ClusterClient

from benchmarks.chaos.redis_cluster import RedisCluster
from gochatd.dispatch.redis_client import LuaScript, slot_groups
from gochatd.dispatch.scripts import FILL_SCRIPT

QUEUES = ["high", "events", "default", "automation", "medium", "low", "search", "deferred",
          "scheduled_jobs", "purgable"]
GROUP, CONSUMER = "g", "c"
Read = Callable[[ClusterClient, list[str], int], int]
FILL = LuaScript(FILL_SCRIPT)


def script_per_slot(r: ClusterClient, keys: list[str], count: int) -> int:
    got = 0
    for group in slot_groups(keys, True):
        if got >= count:
            break
        got += len(FILL(r, group, [GROUP, CONSUMER, count - got]) or [])
    return got


def read_per_queue(r: ClusterClient, keys: list[str], count: int) -> int:
    got = 0
    for key in keys:
        if got >= count:
            break
        res: Any = r.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=count - got)
        got += sum(len(items) for _, items in res or [])
    return got


def pipelined_reads(r: ClusterClient, keys: list[str], count: int) -> int:
    with r.pipeline(transaction=False) as pipe:  # type: ignore[no-untyped-call]
        for key in keys:
            pipe.xreadgroup(GROUP, CONSUMER, {key: ">"}, count=max(1, count // len(keys)))
        results = pipe.execute()
    return sum(len(items) for res in results for _, items in res or [])


def _reset(r: ClusterClient, keys: list[str], per_queue: int) -> None:
    for key in keys:
        r.delete(key)
        r.xgroup_create(key, GROUP, id="0", mkstream=True)
        with r.pipeline(transaction=False) as pipe:  # type: ignore[no-untyped-call]
            for i in range(per_queue):
                pipe.xadd(key, {"job_id": str(i + 1)})
            pipe.execute()


def measure(r: ClusterClient, read: Read, keys: list[str]) -> dict[str, float]:
    _reset(r, keys, 0)
    idle = []
    for _ in range(500):
        t0 = time.perf_counter()
        read(r, keys, 100)
        idle.append((time.perf_counter() - t0) * 1e6)
    per_queue = 2000
    _reset(r, keys, per_queue)
    t0, total = time.perf_counter(), 0
    while total < per_queue * len(keys):
        total += read(r, keys, 100)
    drain = total / (time.perf_counter() - t0)
    return {"idle_read_p50_us": statistics.median(idle), "drain_entries_per_s": drain}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="gochatd-cluster-read-") as tmp:
        cluster = RedisCluster(Path(tmp))
        cluster.start()
        try:
            r = ClusterClient.from_url(cluster.url)
            keys = [f"bench:{q}" for q in QUEUES]
            masters = len({cluster.node_of(k).port for k in keys})
            print(f"{len(keys)} queues in {len(slot_groups(keys, True))} slots on {masters} "
                  "masters")
            for read in (script_per_slot, read_per_queue, pipelined_reads):
                best = max((measure(r, read, keys) for _ in range(3)),
                           key=lambda m: m["drain_entries_per_s"])
                print(f"{read.__name__:16} idle read p50 {best['idle_read_p50_us']:7.0f} us"
                      f"   drain {best['drain_entries_per_s']:9,.0f} entries/s")
            r.close()
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
