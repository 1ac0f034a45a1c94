"""The heartbeat: an operator's cancel stops a running handler, and a lease taken by someone
else (fence moved on) stops it too, with nothing written by the old owner."""

from __future__ import annotations

import pytest
import trio

from gochatd.model import JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import (
    Tracker,
    make_registry,
    now_sql,
    pending_count,
    sql,
    started_worker,
    wait_for,
    wait_for_status,
)
from tests.support.harness import make_settings

MODES = pytest.mark.parametrize("with_redis", [False, True], ids=["polling", "streams"])


@MODES
async def test_cancel_stops_a_running_job(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking()))
    # lease 0.6 s: the heartbeat runs every 0.2 s.
    settings = make_settings(backend_url, redis_url if with_redis else "", worker_lease_s=0.6)
    async with started_worker(settings, registry=registry) as run:
        store = run.worker.store
        job = await run.worker.client.enqueue("test:block", {})
        await wait_for(lambda: job.id in tracker.blocked, what="handler running")
        requested = await run.worker.client.cancel(job.id)
        assert requested.status is JobStatus.RUNNING and requested.cancel_requested
        asked_at = trio.current_time()
        cancelled = await wait_for_status(store, job.id, JobStatus.CANCELLED, timeout_s=5)
        took = trio.current_time() - asked_at
        await wait_for(lambda: not len(run.worker.jobs), what="runner gone")
        # The worker goes on with other work.
        after = await run.worker.client.enqueue("sys:noop", {})
        await wait_for_status(store, after.id, JobStatus.COMPLETED)

    assert tracker.interrupted == [job.id]
    assert tracker.completed == []
    assert tracker.executions[job.id] == 1
    assert cancelled.error_class == "cancelled"
    assert cancelled.last_error == "cancelled by operator"
    assert cancelled.cancel_requested is False
    assert cancelled.attempts == 1 and cancelled.fence == 1
    assert took < 2.0


@MODES
async def test_lost_lease_cancels_the_handler_and_writes_nothing(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking()))
    settings = make_settings(backend_url, redis_url if with_redis else "", worker_lease_s=0.6)
    async with started_worker(settings, registry=registry) as run:
        store = run.worker.store
        job = await run.worker.client.enqueue("test:block", {})
        await wait_for(lambda: job.id in tracker.blocked, what="handler running")
        running = await wait_for_status(store, job.id, JobStatus.RUNNING)
        assert running.fence == 1
        # Someone else now holds the lease: a newer fence, a lease far in the future
        # (so the reaper leaves the row alone).
        await sql(
            backend_url,
            "UPDATE background_jobs SET fence = fence + 1, "
            f"lease_expires_at = {now_sql(backend_url, 60)} WHERE id = %s",
            (job.id,),
        )
        await wait_for(lambda: job.id in tracker.interrupted, timeout_s=5,
                       what="the heartbeat cancelled the handler")
        await wait_for(lambda: not len(run.worker.jobs), what="runner gone")
        # Let the finisher flush anything it was given, then read the row.
        marker = await run.worker.client.enqueue("sys:noop", {})
        await wait_for_status(store, marker.id, JobStatus.COMPLETED)
        await wait_for(lambda: run.worker.counters["finished_completed"] == 1,
                       what="the marker's finish counted")
        row = await store.get_job(job.id)
        counters = dict(run.worker.counters)
        if with_redis:
            # The entry is acked: nothing will deliver the job to this worker again.
            assert await pending_count(redis_url) == 0

    assert tracker.completed == []
    assert row is not None
    assert row.status is JobStatus.RUNNING
    assert row.fence == 2
    assert row.locked_by == running.locked_by
    assert row.error_class is None and row.last_error is None
    assert row.completed_at is None and row.failed_at is None
    assert row.attempts == 1
    # Nothing was even attempted: a lost lease produces no finish at all.
    assert counters.get("stale_finishes", 0) == 0
    assert counters.get("finished_completed", 0) == 1  # the marker only


@MODES
async def test_finish_after_the_lease_was_taken_is_rejected(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    """The handler returns before any heartbeat notices (lease 30 s: heartbeat every 10 s):
    the fenced finish matches no row and is counted as a stale rejection."""
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking()))
    settings = make_settings(backend_url, redis_url if with_redis else "", worker_lease_s=30.0)
    async with started_worker(settings, registry=registry) as run:
        store = run.worker.store
        job = await run.worker.client.enqueue("test:block", {})
        await wait_for(lambda: job.id in tracker.blocked, what="handler running")
        await sql(backend_url, "UPDATE background_jobs SET fence = fence + 1 WHERE id = %s",
                  (job.id,))
        tracker.release_all()
        await wait_for(lambda: run.worker.counters["stale_finishes"] == 1, timeout_s=5,
                       what="a stale rejection")
        row = await store.get_job(job.id)
        counters = dict(run.worker.counters)

    assert tracker.completed == [job.id]
    assert row is not None
    assert row.status is JobStatus.RUNNING
    assert row.fence == 2
    assert row.completed_at is None
    assert counters.get("finished_completed", 0) == 0
