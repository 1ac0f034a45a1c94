"""worker.queue_limits across two workers on one database: the number of running jobs of a
capped queue, sampled from the database and counted in the handlers, never passes the cap
and reaches it (the queue is not starved), while another queue runs unhindered; in streams
mode the refused entries start as slots free, not at the sweep (30 s away here). A reload
(SIGHUP) changes the cap without a restart."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import trio

from gochatd.config.settings import Settings
from gochatd.model import JobStatus
from gochatd.store import JobStore
from gochatd.worker.registry import HandlerSpec, Registry
from gochatd.worker.service import Worker
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
CAPPED = "reports"


def _settings(backend_url: str, redis_url: str, worker: str, **changes: object) -> Settings:
    values: dict[str, object] = {
        "worker_id": worker, "worker_concurrency": 6, "worker_queues": {CAPPED: 1, "default": 1},
        "worker_queue_limits": {CAPPED: 2}, "worker_redis_sweep_interval_s": 30.0,
        "worker_poll_interval_max_s": 0.1}
    return make_settings(backend_url, redis_url, **{**values, **changes})


def _registry(reports: Tracker, others: Tracker) -> Registry:
    return make_registry(HandlerSpec("test:report", reports.counting(0.15), queue=CAPPED),
                         HandlerSpec("test:other", others.counting(0.15)))


async def _running_in(store: JobStore, queue: str) -> int:
    return sum(s.running for s in await store.queue_stats() if s.queue == queue)


@MODES
async def test_two_workers_hold_the_queue_limit(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    reports, others = Tracker(), Tracker()
    registry = _registry(reports, others)
    redis = redis_url if with_redis else ""
    samples: list[int] = []
    async with AsyncExitStack() as stack:
        runs = [await stack.enter_async_context(started_worker(
            _settings(backend_url, redis, f"w{n}"), registry=registry)) for n in (1, 2)]
        client = runs[0].worker.client
        ids = [(await client.enqueue("test:report", {"n": n})).id for n in range(12)]
        ids += [(await runs[1].worker.client.enqueue("test:other", {"n": n})).id
                for n in range(8)]
        done = trio.Event()

        async def sample() -> None:
            while not done.is_set():
                samples.append(await _running_in(runs[1].worker.store, CAPPED))
                await trio.sleep(0.01)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sample)
            await wait_all_status(runs[0].worker.store, ids, JobStatus.COMPLETED,
                                  timeout_s=20.0)
            done.set()

    assert max(samples) == 2, samples  # never above the cap, and the cap was reached
    assert reports.max_active == 2
    assert others.max_active > 2  # the other queue is not held to it
    assert sorted(reports.executions.values()) == [1] * 12


async def test_reload_changes_the_queue_limit(
    pg_clean: str, redis_url: str, tmp_path: Path
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking(), queue=CAPPED))
    settings = _settings(pg_clean, redis_url, "w1", worker_queue_limits={CAPPED: 1})
    config = tmp_path / "gochatd.yaml"
    write_config(config, settings)
    reload_args = {"config_file": str(config), "env": {}}
    async with started_worker(settings, registry=registry, reload_args=reload_args) as run:
        worker: Worker = run.worker
        # The queue named: tests/support/recording_handlers.py also declares test:block (in
        # `default`), and a suite that imported it would send these to an uncapped queue.
        ids = [(await worker.client.enqueue("test:block", {"n": n}, queue=CAPPED)).id
               for n in range(5)]
        await wait_for(lambda: tracker.active == 1, what="one report running")
        with trio.move_on_after(0.5):  # a free slot's worth of polls: still one
            await wait_for(lambda: tracker.active > 1, timeout_s=1.0, what="a second report")
        assert tracker.max_active == 1

        write_config(config, settings, worker_queue_limits={CAPPED: 3})
        applied, _ = worker.reload()  # (the file holds only the reloadable keys)
        assert applied == ["worker.queue_limits"]
        assert worker.store.queue_limits == {CAPPED: 3}
        await wait_for(lambda: tracker.active == 3, what="three reports running")
        tracker.release_all()
        await wait_for(lambda: tracker.active == 2, what="the last two")
        tracker.release_all()
        await wait_all_status(worker.store, ids, JobStatus.COMPLETED)
    assert tracker.max_active == 3
