"""worker_concurrency caps the handlers running at once, and a reload (SIGHUP) changes the
cap without a restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from gochatd.model import JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import (
    Tracker,
    make_registry,
    started_worker,
    wait_all_status,
    wait_for,
    write_config,
)
from tests.support.harness import make_settings

MODES = pytest.mark.parametrize("with_redis", [False, True], ids=["polling", "streams"])
JOBS = 10


@MODES
async def test_concurrency_caps_running_handlers(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    """Ten blocking jobs, three slots. The test releases one handler at a time, always
    once three are parked, so every slot change is a chance to over-claim."""
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking()))
    settings = make_settings(backend_url, redis_url if with_redis else "", worker_concurrency=3)
    async with started_worker(settings, registry=registry) as run:
        ids = [(await run.worker.client.enqueue("test:block", {"n": i})).id for i in range(JOBS)]
        for released in range(JOBS):
            await _parked(tracker, min(3, JOBS - released))
            assert tracker.active <= 3
            tracker.release_one()
        jobs = await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED)

    assert tracker.max_active == 3
    assert all(tracker.executions[i] == 1 for i in ids)
    assert all(j.attempts == 1 for j in jobs.values())


@MODES
async def test_reload_raises_concurrency(
    backend_url: str, redis_url: str, with_redis: bool, tmp_path: Path
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking()))
    settings = make_settings(backend_url, redis_url if with_redis else "", worker_concurrency=3)
    config = tmp_path / "gochatd.yaml"
    write_config(config, settings)
    reload_args = {"config_file": str(config), "env": {}}
    async with started_worker(settings, registry=registry, reload_args=reload_args) as run:
        ids = [(await run.worker.client.enqueue("test:block", {"n": i})).id for i in range(JOBS)]
        await _parked(tracker, 3)
        max_before = tracker.max_active

        write_config(config, settings, worker_concurrency=6)
        applied, _ = run.worker.reload()
        assert applied == ["worker.concurrency"]
        assert run.worker.settings.worker_concurrency == 6
        await _parked(tracker, 6)
        max_after = tracker.max_active

        tracker.release_all()
        await _parked(tracker, 4)  # the last four
        tracker.release_all()
        await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED)

    assert max_before == 3
    assert max_after == 6
    assert tracker.max_active == 6
    assert all(tracker.executions[i] == 1 for i in ids)


async def _parked(tracker: Tracker, count: int) -> None:
    await wait_for(lambda: len(tracker.blocked) == count, what=f"{count} handlers parked")
