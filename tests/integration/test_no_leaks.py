"""Stopping under load leaves no task behind: no Trio task outlives the worker, no asyncio
task outlives the bridge's users, every job ends in a committed state."""

from __future__ import annotations

import asyncio

import trio
import trio_asyncio

from gochatd.model import JobFilter, JobStatus
from tests.support.harness import make_settings, running_worker
from tests.support.wait import wait_until


def _count_trio_tasks() -> int:
    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(child) for n in task.child_nurseries for child in n.child_tasks)

    return walk(trio.lowlevel.current_root_task())


async def test_stop_under_load_leaks_nothing(aio_loop: None, pg_clean: str, redis_url: str) -> None:
    loop = trio_asyncio.current_loop.get()
    trio_before = _count_trio_tasks()
    aio_before = len(asyncio.all_tasks(loop))
    settings = make_settings(pg_clean, redis_url, worker_concurrency=20,
                             worker_shutdown_grace_s=0.3)
    async with running_worker(settings) as worker:
        for i in range(200):
            await worker.client.enqueue("sys:sleep", {"seconds": 0.05 + (i % 5) * 0.2})

        async def busy() -> bool:
            return len(worker.active) >= 10

        await wait_until(busy, what="handlers in flight")
        # running_worker's exit requests the stop while handlers are in flight
    assert worker.counters["stale_rejections"] == 0
    assert _count_trio_tasks() == trio_before
    await trio.lowlevel.checkpoint()
    assert len(asyncio.all_tasks(loop)) == aio_before

    # every job is in a committed, non-running state: none lost, none left running
    from gochatd.store import open_store

    check = open_store(pg_clean)
    await check.open()
    try:
        counts = await check.count_jobs_by_status()
        jobs = await check.list_jobs(JobFilter(limit=1000))
    finally:
        await check.close()
    assert sum(counts.values()) == 200
    assert counts.get(JobStatus.RUNNING, 0) == 0
    interrupted = [j for j in jobs if j.error_class == "interrupted"]
    assert all(j.status == JobStatus.RETRYING and j.attempts == 0 for j in interrupted)
