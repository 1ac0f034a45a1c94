"""A mixed fleet on one database: a worker reading Redis Streams next to one polling the
database. Both claim from the same rows; every job still runs exactly once."""

from __future__ import annotations

from gochatd.model import JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import Tracker, make_registry, started_worker, wait_all_status
from tests.support.harness import make_settings

JOBS = 200


async def test_streams_and_polling_workers_share_the_work_exactly_once(
    backend_url: str, redis_url: str
) -> None:
    tracker = Tracker()
    # Each handler outlasts the producer's enqueue interval, so neither worker can keep up
    # alone: the polling worker (woken by NOTIFY at commit, before the XADD) would otherwise
    # win every race while it has a free slot, and the test would not show both claim paths.
    registry = make_registry(HandlerSpec("test:count", tracker.counting(seconds=0.03)))
    with_streams = make_settings(backend_url, redis_url, worker_concurrency=4)
    polling = make_settings(backend_url, "", worker_concurrency=4)
    async with started_worker(with_streams, registry=registry) as a, started_worker(
        polling, registry=registry
    ) as b:
        assert a.worker.mode.value == "streams" and b.worker.mode.value == "polling"
        ids: list[int] = []
        for i in range(JOBS):
            # Half XADDed by the streams worker's client, half only written (and notified).
            client = a.worker.client if i % 2 else b.worker.client
            ids.append((await client.enqueue("test:count", {"n": i})).id)
        jobs = await wait_all_status(a.worker.store, ids, JobStatus.COMPLETED, timeout_s=60)
        owners = {a.worker.worker_id, b.worker.worker_id}

    assert sorted(tracker.executions) == sorted(ids)
    assert set(tracker.executions.values()) == {1}
    assert all(j.fence == 1 and j.attempts == 1 for j in jobs.values())
    assert {j.locked_by for j in jobs.values()} == owners  # both took part
