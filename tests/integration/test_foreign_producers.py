"""Jobs INSERTed by another process (the Go API), with no XADD and no client, start within
a second: woken by LISTEN/NOTIFY (PostgreSQL) or data_version (SQLite), not by polling."""

from __future__ import annotations

import pytest

from gochatd.model import JobStatus
from tests.integration.helpers import (
    insert_job,
    make_registry,
    seconds,
    started_worker,
    wait_for,
    wait_for_status,
)
from tests.support.harness import make_settings


@pytest.mark.parametrize(
    ("backend_url", "with_redis"),
    [("postgres", True), ("postgres", False), ("sqlite", False), ("sqlite", True)],
    ids=["postgres-streams", "postgres-polling", "sqlite-polling", "sqlite-streams"],
    indirect=["backend_url"],
)
async def test_foreign_insert_starts_within_a_second(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    # A job due in 30 s keeps the poller's sleep at the 5 s poll interval and the
    # scheduler's until the 30 s sweep: only a notification can start the inserts in time.
    settings = make_settings(
        backend_url, redis_url if with_redis else "", worker_poll_interval_max_s=5.0
    )
    async with started_worker(settings, registry=make_registry()) as run:
        store = run.worker.store
        far = await insert_job(backend_url, delay_s=30.0)
        canary = await insert_job(backend_url)
        await wait_for_status(store, canary, JobStatus.COMPLETED)

        latencies = []
        for _ in range(3):
            job_id = await insert_job(backend_url, payload='{"from": "go-api"}')
            job = await wait_for_status(store, job_id, JobStatus.COMPLETED, timeout_s=10)
            latencies.append(seconds(job.locked_at, job.created_at))
            assert job.attempts == 1 and job.payload == {"from": "go-api"}
        far_job = await store.get_job(far)
        if with_redis:
            # Each went through the scheduler's XADD (canary + 3), none through the sweep.
            await wait_for(lambda: run.worker.counters["due_jobs_dispatched"] >= 4,
                           what="4 scheduled dispatches")
        counters = dict(run.worker.counters)

    assert max(latencies) < 1.0, latencies
    assert far_job is not None and far_job.status is JobStatus.QUEUED
    assert counters.get("sweep_redispatched", 0) == 0
