"""Stopping under load leaves nothing behind: no Trio task outlives the worker, no connection
thread outlives its store or dispatcher, every job ends in a committed state."""

from __future__ import annotations

import threading

import trio

from gochatd.model import JobFilter, JobStatus
from tests.support.harness import make_settings, running_worker
from tests.support.wait import wait_until


def _count_trio_tasks() -> int:
    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(child) for n in task.child_nurseries for child in n.child_tasks)

    return walk(trio.lowlevel.current_root_task())


def _connection_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("gochatd-")}


async def test_stop_under_load_leaks_nothing(pg_clean: str, redis_url: str) -> None:
    trio_before = _count_trio_tasks()
    threads_before = _connection_threads()
    settings = make_settings(pg_clean, redis_url, worker_concurrency=20,
                             worker_shutdown_grace_s=0.3)
    async with running_worker(settings) as worker:
        for i in range(200):
            await worker.client.enqueue("sys:sleep", {"seconds": 0.05 + (i % 5) * 0.2})

        async def busy() -> bool:
            return len(worker.jobs) >= 10

        await wait_until(busy, what="handlers in flight")
        names = {t.name for t in _connection_threads() - threads_before}
        assert any(name.startswith("gochatd-pg") for name in names)
        assert any(name.startswith("gochatd-redis-read") for name in names)
        # running_worker's exit requests the stop while handlers are in flight
    assert worker.counters["stale_finishes"] == 0
    assert _count_trio_tasks() == trio_before

    async def threads_ended() -> bool:
        return _connection_threads() <= threads_before

    await wait_until(threads_ended, what="the connection threads ended")

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
