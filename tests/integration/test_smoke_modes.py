"""Every backend, with and without Redis: jobs enqueued through the client all complete."""

from __future__ import annotations

import pytest

from gochatd.model import JobFilter, JobStatus
from tests.support.harness import make_settings, running_worker
from tests.support.wait import wait_until


@pytest.mark.parametrize("with_redis", [False, True], ids=["polling", "streams"])
async def test_jobs_complete_in_every_mode(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    settings = make_settings(backend_url, redis_url if with_redis else "")
    async with running_worker(settings) as worker:
        assert worker.mode.value == ("streams" if with_redis else "polling")
        ids = [(await worker.client.enqueue("sys:noop", {"n": i})).id for i in range(50)]

        async def all_done() -> bool:
            jobs = await worker.store.list_jobs(JobFilter(status=JobStatus.COMPLETED, limit=1000))
            return {j.id for j in jobs} >= set(ids)

        await wait_until(all_done, what="50 jobs completed")
        jobs = await worker.store.list_jobs(JobFilter(limit=1000))
        assert all(j.attempts == 1 and j.fence == 1 for j in jobs)
