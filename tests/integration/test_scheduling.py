"""Delayed jobs start on time (database clock), and new earlier work wakes a sleeping
scheduler or poller at once, whether enqueued through the client or INSERTed by someone
else."""

from __future__ import annotations

import pytest

from gochatd.model import JobStatus
from tests.integration.helpers import (
    insert_job,
    make_registry,
    p99,
    seconds,
    started_worker,
    wait_all_status,
    wait_for,
    wait_for_status,
)
from tests.support.harness import make_settings

COMBOS = pytest.mark.parametrize(
    ("backend_url", "with_redis"),
    [("postgres", True), ("postgres", False), ("sqlite", False), ("sqlite", True)],
    ids=["postgres-streams", "postgres-polling", "sqlite-polling", "sqlite-streams"],
    indirect=["backend_url"],
)


@COMBOS
async def test_delayed_jobs_start_on_time(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    """Lateness = locked_at - scheduled_at (both database clock), p99 <= 100 ms. The poll
    interval is long (2 s), so only sleeping until the next due time can meet it."""
    settings = make_settings(
        backend_url, redis_url if with_redis else "", worker_poll_interval_max_s=2.0
    )
    async with started_worker(settings, registry=make_registry()) as run:
        assert run.worker.mode.value == ("streams" if with_redis else "polling")
        ids = [
            (await run.worker.client.enqueue("sys:noop", {"n": i}, delay_s=0.5 + i * 0.025)).id
            for i in range(20)
        ]
        jobs = await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED, timeout_s=15)
        if with_redis:
            # They went through the scheduler's XADD, not the sweep.
            await wait_for(lambda: run.worker.counters["due_jobs_dispatched"] >= 20,
                           what="20 scheduled dispatches")
        counters = dict(run.worker.counters)

    lateness = [seconds(j.locked_at, j.scheduled_at) for j in jobs.values()]
    assert min(lateness) >= 0.0, "a delayed job started before it was due"
    assert p99(lateness) <= 0.1, sorted(lateness)
    assert all(j.attempts == 1 for j in jobs.values())
    assert counters.get("sweep_redispatched", 0) == 0


@pytest.mark.parametrize("producer", ["client", "foreign"])
@COMBOS
async def test_new_earlier_job_wakes_the_scheduler(
    backend_url: str, redis_url: str, with_redis: bool, producer: str
) -> None:
    """With a job due in 30 s pending, the scheduler (streams) / poller (polling, poll
    interval 5 s) sleeps long; a new job due in 0.3 s must still start within 1 s."""
    settings = make_settings(
        backend_url, redis_url if with_redis else "", worker_poll_interval_max_s=5.0
    )
    async with started_worker(settings, registry=make_registry()) as run:
        store, client = run.worker.store, run.worker.client

        async def add(delay_s: float) -> int:
            if producer == "client":
                return (await client.enqueue("sys:noop", {}, delay_s=delay_s)).id
            return await insert_job(backend_url, delay_s=delay_s)

        far = await add(30.0)
        # A canary: once it has run, the loop has seen the 30 s job and gone to sleep.
        canary = await add(0.2)
        await wait_for_status(store, canary, JobStatus.COMPLETED)
        near = await add(0.3)
        near_job = await wait_for_status(store, near, JobStatus.COMPLETED, timeout_s=10)
        far_job = await store.get_job(far)

    assert seconds(near_job.locked_at, near_job.created_at) < 1.0
    assert far_job is not None
    assert far_job.status is JobStatus.QUEUED and far_job.attempts == 0
