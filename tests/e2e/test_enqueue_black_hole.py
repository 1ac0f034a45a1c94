"""``gochatd enqueue`` while Redis answers nothing (a partition: connections are accepted,
no byte comes back). The job is committed and printed, and the command does not wait out
the Redis pool's 5 s socket timeout: its URL check gives up after ``HERE_TIMEOUT_S``, and
the enqueue then leaves the job to the sweep instead of trying an XADD. It took 7.3 s
before (5 s for the check's connection, 1 s for the XADD, the rest start-up)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from benchmarks.chaos.proxy import FaultProxy, Mode

from gochatd.dispatch.redis_streams import HERE_TIMEOUT_S
from tests.support.daemon_process import assert_clean, run_cli
from tests.support.e2e_jobs import query
from tests.support.redis_server import RedisServer

#: The Redis pool's socket timeout, which the command must not wait out.
POOL_TIMEOUT_S = 5.0


@pytest.fixture
def black_hole(shared_redis: RedisServer) -> Iterator[str]:
    """A Redis URL whose connections are accepted and never answered."""
    proxy = FaultProxy()
    proxy.start()
    try:
        port = proxy.add("redis", "127.0.0.1", shared_redis.port)
        proxy.set_mode("redis", Mode.BLACKHOLE)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proxy.stop()


def test_an_enqueue_commits_and_returns_while_redis_answers_nothing(
    pg_jobs: str, black_hole: str,
) -> None:
    assert 2 * HERE_TIMEOUT_S < POOL_TIMEOUT_S
    started = time.monotonic()
    result = run_cli(["enqueue", "sys:noop", "--payload", '{"n": 1}', "--queue", "default",
                      "--max-attempts", "3"],
                     {"GOCHAT_DATABASE_URL": pg_jobs, "GOCHAT_REDIS_URL": black_hole})
    took_s = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)
    assert query(pg_jobs, "SELECT status, dispatched_at FROM background_jobs WHERE id = %s",
                 [job["id"]]) == [("queued", None)]  # not marked dispatched: the sweep's
    assert "redis_unavailable" in result.stderr
    assert took_s < POOL_TIMEOUT_S, f"gochatd enqueue took {took_s:.1f} s"
    assert_clean(result.stderr, "stderr")
