"""worker.queue_rates across two workers on one database, in polling and streams mode and
with Redis stopped mid-run: the jobs of a rate-limited queue that start (their attempts'
started_at, the database clock) never number more than the rate in any window of its
period, and each runs once with one attempt (a job held back is not charged one). A reload
changes the rate without a restart."""

from __future__ import annotations

import math
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import trio

from gochatd.config.rates import QueueRate
from gochatd.config.settings import Settings
from gochatd.model import JobStatus
from gochatd.store import JobStore
from gochatd.worker.registry import HandlerSpec, Registry
from tests.integration.helpers import (
    Tracker,
    make_registry,
    started_worker,
    wait_all_status,
    wait_for,
    write_config,
)
from tests.support.harness import make_settings
from tests.support.redis_server import RedisServer

MODES = pytest.mark.parametrize("with_redis", [False, True], ids=["polling", "streams"])
LIMITED = "provider"


def _settings(backend_url: str, redis_url: str, worker: str, rate: int = 4,
              **changes: object) -> Settings:
    values: dict[str, object] = {
        "worker_id": worker, "worker_concurrency": 8,
        "worker_queues": {LIMITED: 1, "default": 1},
        "worker_queue_rates": {LIMITED: QueueRate(rate, 1)},
        "worker_redis_sweep_interval_s": 30.0}
    return make_settings(backend_url, redis_url, **{**values, **changes})


def _registry(limited: Tracker, others: Tracker) -> Registry:
    return make_registry(HandlerSpec("test:call", limited.counting(0.01), queue=LIMITED),
                         HandlerSpec("test:other", others.counting(0.01)))


async def _starts_per_window(store: JobStore, ids: list[int], period_s: int) -> Counter[int]:
    """Started attempts per epoch-aligned window, from the database's attempt rows."""
    windows: Counter[int] = Counter()
    for job_id in ids:
        attempts = await store.list_job_attempts(job_id)
        assert len(attempts) == 1, (job_id, attempts)  # held back: no attempt charged
        started = attempts[0].started_at
        assert started is not None
        windows[math.floor(started.timestamp() / period_s)] += 1
    return windows


@MODES
async def test_two_workers_hold_the_rate(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    limited, others = Tracker(), Tracker()
    registry = _registry(limited, others)
    redis = redis_url if with_redis else ""
    async with AsyncExitStack() as stack:
        runs = [await stack.enter_async_context(started_worker(
            _settings(backend_url, redis, f"w{n}"), registry=registry)) for n in (1, 2)]
        client = runs[0].worker.client
        ids = [job.job.id for job in await client.enqueue_many(
            [{"job_type": "test:call", "payload": {"n": n}} for n in range(14)])]
        other_ids = [(await runs[1].worker.client.enqueue("test:other", {"n": n})).id
                     for n in range(10)]
        store = runs[0].worker.store
        await wait_all_status(store, other_ids, JobStatus.COMPLETED, timeout_s=20.0)
        await wait_all_status(store, ids, JobStatus.COMPLETED, timeout_s=30.0)
        windows = await _starts_per_window(store, ids, 1)

    assert max(windows.values()) == 4, windows  # never above the rate, and it was reached
    assert sorted(limited.executions.values()) == [1] * 14
    assert sorted(others.executions.values()) == [1] * 10


async def test_the_rate_holds_with_redis_stopped(
    pg_clean: str, own_redis: RedisServer
) -> None:
    limited, others = Tracker(), Tracker()
    registry = _registry(limited, others)
    async with AsyncExitStack() as stack:
        runs = [await stack.enter_async_context(started_worker(
            _settings(pg_clean, own_redis.url, f"w{n}"), registry=registry)) for n in (1, 2)]
        worker, client = runs[0].worker, runs[0].worker.client
        assert worker.mode.value == "streams"
        ids = [job.job.id for job in await client.enqueue_many(
            [{"job_type": "test:call", "payload": {"n": n}} for n in range(20)])]
        await wait_for(lambda: sum(limited.executions.values()) >= 4, what="first starts")
        own_redis.kill()
        await wait_for(lambda: all(r.worker.mode.value == "polling" for r in runs),
                       what="both workers polling")
        polled = len(limited.executions)
        assert polled < 20  # some jobs were left to the fallback
        ids += [(await client.enqueue("test:call", {"late": n})).id for n in range(4)]
        await wait_all_status(worker.store, ids, JobStatus.COMPLETED, timeout_s=30.0)
        windows = await _starts_per_window(worker.store, ids, 1)

    assert max(windows.values()) <= 4, windows
    assert sorted(limited.executions.values()) == [1] * 24


async def test_reload_changes_the_rate(
    backend_url: str, tmp_path: Path
) -> None:
    limited, others = Tracker(), Tracker()
    registry = _registry(limited, others)
    settings = _settings(backend_url, "", "w1", rate=2)
    config = tmp_path / "gochatd.yaml"
    write_config(config, settings)
    reload_args = {"config_file": str(config), "env": {}}
    async with started_worker(settings, registry=registry, reload_args=reload_args) as run:
        worker, client = run.worker, run.worker.client
        first = [(await client.enqueue("test:call", {"n": n})).id for n in range(6)]
        await wait_all_status(worker.store, first, JobStatus.COMPLETED, timeout_s=20.0)
        before = await _starts_per_window(worker.store, first, 1)

        write_config(config, settings, worker_queue_rates={LIMITED: QueueRate(5, 1)})
        applied, _ = worker.reload()
        assert applied == ["worker.queue_rates"]
        second = [(await client.enqueue("test:call", {"m": n})).id for n in range(15)]
        await wait_all_status(worker.store, second, JobStatus.COMPLETED, timeout_s=20.0)
        after = await _starts_per_window(worker.store, second, 1)

    assert max(before.values()) == 2, before
    assert max(after.values()) == 5, after
    await trio.lowlevel.checkpoint()
