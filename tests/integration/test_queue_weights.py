"""Queue weights: a weighted shuffle per read, so a heavy queue dominates but never starves
a light one; worker_strict_priority drains queues strictly by weight.

Both queues are filled before the worker starts (in streams mode the entries are XADDed
before the consumer group exists), so the order is the worker's choice alone. Start order
is read from the rows' locked_at (database clock)."""

from __future__ import annotations

from datetime import datetime

import pytest

from gochatd.client.client import Client
from gochatd.model import Job, JobStatus
from tests.integration.helpers import make_registry, migrate, started_worker, wait_all_status
from tests.support.harness import make_settings

PER_QUEUE = 200
WEIGHTS = {"high": 8, "low": 1}

COMBOS = pytest.mark.parametrize(
    ("backend_url", "with_redis"),
    [("postgres", False), ("postgres", True), ("sqlite", False)],
    ids=["postgres-polling", "postgres-streams", "sqlite-polling"],
    indirect=["backend_url"],
)


async def _fill_then_run(backend_url: str, redis: str, *, strict: bool) -> list[Job]:
    await migrate(backend_url)
    ids: list[int] = []
    async with Client(backend_url, redis or None) as client:
        # The light queue first, so plain FIFO across queues would favour it.
        for queue in ("low", "high"):
            for i in range(PER_QUEUE):
                ids.append((await client.enqueue("sys:noop", {"i": i}, queue=queue)).id)
    settings = make_settings(
        backend_url, redis, worker_concurrency=2, worker_queues=dict(WEIGHTS),
        worker_strict_priority=strict,
    )
    async with started_worker(settings, registry=make_registry()) as run:
        jobs = await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED, timeout_s=60)
        counters = dict(run.worker.counters)
    if redis:
        # Delivered by the streams (read from id 0), not re-dispatched by the database.
        assert counters.get("sweep_redispatched", 0) == 0
        assert counters.get("due_jobs_dispatched", 0) == 0
    assert all(j.attempts == 1 for j in jobs.values())
    # Claims in one instant (one transaction) are ordered by the claim itself: high first.
    return sorted(jobs.values(), key=lambda j: (_at(j), -WEIGHTS[j.queue], j.id))


def _at(job: Job) -> datetime:
    assert job.locked_at is not None
    return job.locked_at


@COMBOS
async def test_weighted_queues_do_not_starve_the_light_one(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    order = await _fill_then_run(backend_url, redis_url if with_redis else "", strict=False)
    last_high = max(_at(j) for j in order if j.queue == "high")
    early_lows = [j for j in order if j.queue == "low" and _at(j) < last_high]
    # Not starved: low jobs ran while high still had work...
    assert len(early_lows) >= 1
    # ...but high, at 8:1, got most of the early slots (expected ~89 of the first 100).
    assert sum(1 for j in order[:100] if j.queue == "high") >= 60


@COMBOS
async def test_strict_priority_drains_the_heavy_queue_first(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    order = await _fill_then_run(backend_url, redis_url if with_redis else "", strict=True)
    last_high = max(_at(j) for j in order if j.queue == "high")
    first_low = min(_at(j) for j in order if j.queue == "low")
    assert last_high <= first_low
    assert [j.queue for j in order[:PER_QUEUE]] == ["high"] * PER_QUEUE
