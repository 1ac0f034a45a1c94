"""A redis-server process owned by a test: started on a free port, killable, restartable.

The chaos runner's server is the one implementation; tests only choose where it lives."""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.chaos.redis_server import RedisServer as _RedisServer
from benchmarks.chaos.redis_server import free_port

__all__ = ["RedisServer", "free_port"]


class RedisServer(_RedisServer):
    def __init__(self, binary: str, port: int | None = None) -> None:
        super().__init__(Path(tempfile.mkdtemp(prefix="gochatd-redis-")), port or free_port(),
                         binary)
