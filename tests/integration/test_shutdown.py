"""Graceful stop: no new claims, in-flight handlers get the grace period, the rest are
interrupted back to 'retrying' with the attempt refunded; run() returns 0."""

from __future__ import annotations

import pytest
import trio

from gochatd.context import JobContext
from gochatd.model import JobStatus
from gochatd.worker.registry import HandlerSpec
from gochatd.worker.service import Worker
from tests.integration.helpers import (
    Tracker,
    all_jobs,
    make_registry,
    opened_store,
    started_worker,
    wait_all_status,
    wait_for,
    wait_for_status,
)
from tests.support.harness import make_settings

MODES = pytest.mark.parametrize("with_redis", [False, True], ids=["polling", "streams"])
GRACE_S = 0.5


@MODES
async def test_stop_interrupts_blocked_handlers_and_lets_quick_ones_finish(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    tracker = Tracker()
    gate = trio.Event()
    finished_while_stopping: list[bool] = []
    holder: list[Worker] = []

    async def blocks_first_time(ctx: JobContext) -> None:
        tracker.executions[ctx.job_id] += 1
        if ctx.fence == 1:
            await trio.sleep_forever()

    async def waits_for_gate(ctx: JobContext) -> None:
        tracker.executions[ctx.job_id] += 1
        await gate.wait()
        finished_while_stopping.append(holder[0].lifecycle.stopping)

    registry = make_registry(
        HandlerSpec("test:block", blocks_first_time), HandlerSpec("test:gated", waits_for_gate)
    )
    settings = make_settings(
        backend_url, redis_url if with_redis else "",
        worker_concurrency=2, worker_shutdown_grace_s=GRACE_S,
    )
    async with started_worker(settings, registry=registry) as run:
        holder.append(run.worker)
        client, store = run.worker.client, run.worker.store
        blocked = await client.enqueue("test:block", {})
        gated = await client.enqueue("test:gated", {})
        await wait_for_status(store, blocked.id, JobStatus.RUNNING)
        await wait_for_status(store, gated.id, JobStatus.RUNNING)
        await wait_for(lambda: len(tracker.executions) == 2, what="both handlers started")
        # Both slots are busy: these stay queued, and must not be claimed once stopping.
        waiting = [(await client.enqueue("sys:noop", {"n": i})).id for i in range(3)]

        stop_started = trio.current_time()
        run.worker.request_stop()
        gate.set()
        exit_code = await run.stop()
        stop_took = trio.current_time() - stop_started

    assert exit_code == 0
    assert finished_while_stopping == [True]
    assert GRACE_S <= stop_took < GRACE_S + 3.0

    async with opened_store(backend_url) as store:
        counts = await store.count_jobs_by_status()
        interrupted = await store.get_job(blocked.id)
        done = await store.get_job(gated.id)
        untouched = [await store.get_job(i) for i in waiting]

    assert JobStatus.RUNNING not in counts
    assert interrupted is not None and done is not None
    assert interrupted.status is JobStatus.RETRYING
    assert interrupted.attempts == 0  # refunded
    assert interrupted.fence == 1
    assert interrupted.error_class == "interrupted"
    assert interrupted.last_error == "interrupted by worker shutdown"
    assert interrupted.lease_expires_at is None
    assert done.status is JobStatus.COMPLETED and done.attempts == 1
    for job in untouched:
        assert job is not None and job.status is JobStatus.QUEUED and job.attempts == 0

    # The interrupted job is simply run again by the next worker, as attempt 1.
    async with started_worker(settings, registry=registry) as again:
        rerun = await wait_for_status(again.worker.store, blocked.id, JobStatus.COMPLETED)
        await wait_all_status(again.worker.store, waiting, JobStatus.COMPLETED)
    assert rerun.attempts == 1
    assert rerun.fence == 2
    assert tracker.executions[blocked.id] == 2


@MODES
async def test_idle_worker_stops_promptly(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    settings = make_settings(backend_url, redis_url if with_redis else "")
    async with started_worker(settings, registry=make_registry()) as run:
        job = await run.worker.client.enqueue("sys:noop", {})
        await wait_for_status(run.worker.store, job.id, JobStatus.COMPLETED)
        started = trio.current_time()
        exit_code = await run.stop()
        took = trio.current_time() - started
        assert run.worker.mode.value == "stopped"

    async with opened_store(backend_url) as store:
        jobs = await all_jobs(store)

    assert exit_code == 0
    # Bounded by the 0.2 s BLOCK of the shielded stream read, not by the 5 s grace.
    assert took < 2.0
    assert [j.status for j in jobs] == [JobStatus.COMPLETED]
