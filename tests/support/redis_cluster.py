"""A Redis Cluster owned by a test: three masters on free loopback ports, a master killable
and restartable. The chaos runner's cluster is the one implementation."""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.chaos.redis_cluster import ClusterNode
from benchmarks.chaos.redis_cluster import RedisCluster as _RedisCluster

__all__ = ["ClusterNode", "RedisCluster"]


class RedisCluster(_RedisCluster):
    def __init__(self, binary: str) -> None:
        super().__init__(Path(tempfile.mkdtemp(prefix="gochatd-redis-cluster-")), binary)
