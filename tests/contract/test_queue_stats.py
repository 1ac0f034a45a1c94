"""JobStore contract: ``queue_stats`` counts each job once, in its status (the dashboard's
queue table and ``gochatd_queue_depth`` add up to the jobs there are)."""

from __future__ import annotations

from gochatd.model import Outcome
from gochatd.store import JobStore
from tests.contract.helpers import claim_one, enqueue, finish


async def test_queue_stats_count_each_job_once(store: JobStore) -> None:
    await enqueue(store, "due")
    await enqueue(store, "later", delay_s=3600.0)
    running = await enqueue(store, "running")
    retrying = await enqueue(store, "retrying")
    dead = await enqueue(store, "dead")
    for job, outcome in ((retrying, Outcome.RETRY), (dead, Outcome.DEAD)):
        claimed = await claim_one(store, job, "w1")
        assert await store.finish_jobs([finish(claimed, outcome, delay_s=3600.0)]) == {job.id}
    await claim_one(store, running, "w1")

    [stats] = await store.queue_stats()
    got = (stats.queued, stats.delayed, stats.running, stats.retrying, stats.dead)
    # The retrying job waits an hour for its next attempt: under retrying, not also delayed.
    assert got == (1, 1, 1, 1, 1)
    assert sum(got) == 5
