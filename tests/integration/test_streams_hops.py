"""Thread hops of one job at a time in streams mode (issue 22 item 2; the "hops" lines of
``gochatd bench --scenario budget``): the XACK rides the finish's hop to the store's
connection thread, after the commit, so the worker hands the Redis pool no unit per job."""

from __future__ import annotations

from collections.abc import Sequence

import trio

from gochatd.dispatch.entries import StreamEntry
from gochatd.errors import DispatchUnavailable
from gochatd.io.handoff import HANDED
from gochatd.model import JobStatus, Outcome
from gochatd.store import JobStore
from gochatd.worker.finisher import Finisher
from gochatd.worker.registry import HandlerSpec
from tests.contract.helpers import claim_one, enqueue, finish
from tests.integration.helpers import (
    Tracker,
    make_registry,
    pending_count,
    started_worker,
    wait_all_status,
    wait_for,
)
from tests.support.harness import make_settings

JOBS = 20


async def test_a_streams_job_hands_no_unit_to_the_redis_pool(
    pg_clean: str, redis_url: str
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting()))
    # A long BLOCK: the idle reads do not blur the per-job counts.
    settings = make_settings(pg_clean, redis_url, worker_redis_block_timeout_s=5.0)
    async with started_worker(settings, registry=registry) as run:
        client = run.worker.client
        await client.enqueue("test:count", {"n": -1})  # connections open, groups exist
        await wait_for(lambda: len(tracker.completed) == 1, what="the warm-up job")
        await wait_for(lambda: not run.worker.pool.jobs, what="its finish")
        before = HANDED.copy()
        ids = []
        for n in range(JOBS):
            ids.append((await client.enqueue("test:count", {"n": n})).id)
            await wait_for(lambda n=n: len(tracker.completed) == n + 2, what="the job ran")
            await wait_for(lambda: not run.worker.pool.jobs, what="its finish committed")
        redis_hops = HANDED["gochatd-redis"] - before["gochatd-redis"]
        read_hops = HANDED["gochatd-redis-read"] - before["gochatd-redis-read"]
        await wait_all_status(run.worker.store, ids, JobStatus.COMPLETED)

        assert await pending_count(redis_url) == 0  # acked in the finish's hop
    # Before: one XACK unit per job (>= JOBS). Left: the odd reclaim or sweep.
    assert redis_hops <= 3, f"{redis_hops} units to gochatd-redis for {JOBS} jobs"
    assert JOBS <= read_hops <= JOBS + 3


class FailingAcks:
    """A ``RedisStreams`` whose XACK on the store's thread fails (Redis went away); the
    acker's XACKs are recorded."""

    def __init__(self) -> None:
        self.here: list[list[str]] = []
        self.acked: list[list[str]] = []

    def ack_here(self, entries: Sequence[StreamEntry]) -> None:
        self.here.append([e.entry_id for e in entries])
        raise DispatchUnavailable("redis unavailable: ConnectionError")

    async def ack(self, entries: Sequence[StreamEntry]) -> None:
        self.acked.append([e.entry_id for e in entries])


async def test_a_failed_xack_after_the_commit_keeps_the_finish(store: JobStore) -> None:
    jobs = [await enqueue(store, "t:acks", payload={"n": n}) for n in range(2)]
    claims = [await claim_one(store, job, "w1") for job in jobs]
    streams = FailingAcks()
    finisher = Finisher(store, lambda: streams, lambda batch: None)  # type: ignore[arg-type,return-value]
    entries = [StreamEntry("gochat:jobs:default", f"{n}-0", {}) for n in range(2)]
    async with trio.open_nursery() as nursery:
        await nursery.start(finisher.run)
        for claimed, entry in zip(claims, entries, strict=True):  # one batch each
            assert await finisher.submit(finish(claimed, Outcome.COMPLETED), entry)
        finisher.send_channel.close()

    states = await store.get_job_states([j.id for j in jobs])
    assert {s for _, s in states.values()} == {JobStatus.COMPLETED}  # both finishes stand
    # The first XACK ran on the store's thread after the commit and failed; for a while
    # after that the acker sends them (after the commit too).
    assert streams.here == [["0-0"]]
    assert streams.acked == [["1-0"]]
