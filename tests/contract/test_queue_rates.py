"""JobStore contract: ``claim_rate_limited`` (worker.queue_rates) claims at most what the
queue's current window has left, counted in the database on every backend; concurrent
claimers (other connections, as other daemons would be) never take more than the rate
together; a job held back stays queued with no attempt charged; a delayed job is not
claimed early; with a queue cap set too, a claimed job fits both. Hour-long windows, so
that no window ends during a test (unless it runs across the top of an hour)."""

from __future__ import annotations

import trio

from gochatd.config.rates import QueueRate
from gochatd.model import ClaimedJob, JobStatus, Outcome
from gochatd.store import JobStore
from tests.contract.helpers import enqueue, finish, second_store

LIMITED = "provider"
PER_HOUR = 3600


async def test_a_claim_takes_what_the_window_has_left(store: JobStore) -> None:
    jobs = [await enqueue(store, queue=LIMITED) for _ in range(5)]
    other = await enqueue(store)
    rate = QueueRate(3, PER_HOUR)
    got = await store.claim_rate_limited(LIMITED, rate, 10, "w1", 30.0)
    assert [c.id for c in got.claimed] == [j.id for j in jobs[:3]]  # the oldest first
    assert got.full
    assert 0 < got.window_left_s <= PER_HOUR
    again = await store.claim_rate_limited(LIMITED, rate, 10, "w2", 30.0)
    assert (again.claimed, again.full) == ([], True)
    for job in jobs[3:]:  # held back: untouched, no attempt charged
        row = await store.get_job(job.id)
        assert row is not None
        assert (row.status, row.fence, row.attempts) == (JobStatus.QUEUED, 0, 0)
    # Other queues are not limited by it.
    assert [c.id for c in await store.claim_due_jobs(["default"], 10, "w1", 30.0)] == [other.id]


async def test_a_claim_below_the_rate_leaves_the_rest_of_the_window(store: JobStore) -> None:
    due = [await enqueue(store, queue=LIMITED) for _ in range(2)]
    delayed = await enqueue(store, queue=LIMITED, delay_s=3600)
    rate = QueueRate(5, PER_HOUR)
    got = await store.claim_rate_limited(LIMITED, rate, 1, "w1", 30.0)
    assert ([c.id for c in got.claimed], got.full) == ([due[0].id], False)
    rest = await store.claim_rate_limited(LIMITED, rate, 10, "w1", 30.0)
    assert ([c.id for c in rest.claimed], rest.full) == ([due[1].id], False)  # not the delayed
    row = await store.get_job(delayed.id)
    assert row is not None and row.status is JobStatus.QUEUED
    more = [await enqueue(store, queue=LIMITED) for _ in range(4)]
    last = await store.claim_rate_limited(LIMITED, rate, 10, "w1", 30.0)
    assert [c.id for c in last.claimed] == [j.id for j in more[:3]]  # 5 in the window
    assert last.full


async def test_concurrent_claimers_share_one_window(store: JobStore, backend_url: str) -> None:
    jobs = [await enqueue(store, queue=LIMITED) for _ in range(30)]
    rate = QueueRate(7, PER_HOUR)
    got: list[ClaimedJob] = []
    async with second_store(backend_url) as other_a, second_store(backend_url) as other_b:
        claimers = [store, other_a, other_b]

        async def claim(s: JobStore, n: int) -> None:
            got.extend((await s.claim_rate_limited(LIMITED, rate, 4, f"w{n}", 30.0)).claimed)

        async with trio.open_nursery() as nursery:
            for n in range(9):
                nursery.start_soon(claim, claimers[n % 3], n)
    assert len(got) == 7
    assert len({c.id for c in got}) == 7
    assert {c.id for c in got} == {j.id for j in jobs[:7]}


async def test_a_new_period_starts_a_fresh_window(store: JobStore) -> None:
    jobs = [await enqueue(store, queue=LIMITED) for _ in range(5)]
    first = await store.claim_rate_limited(LIMITED, QueueRate(2, PER_HOUR), 10, "w1", 30.0)
    assert len(first.claimed) == 2
    # A reload to 2 per minute: the minute's window has seen none of them.
    second = await store.claim_rate_limited(LIMITED, QueueRate(2, 60), 10, "w1", 30.0)
    assert [c.id for c in second.claimed] == [j.id for j in jobs[2:4]]
    assert 0 < second.window_left_s <= 60


async def test_a_queue_cap_and_a_rate_both_hold(store: JobStore) -> None:
    store.queue_limits = {LIMITED: 1}
    jobs = [await enqueue(store, queue=LIMITED) for _ in range(4)]
    rate = QueueRate(2, PER_HOUR)
    first = await store.claim_rate_limited(LIMITED, rate, 10, "w1", 30.0)
    assert [c.id for c in first.claimed] == [jobs[0].id]  # the cap: one running
    assert not first.full
    assert (await store.claim_rate_limited(LIMITED, rate, 10, "w1", 30.0)).claimed == []
    done = first.claimed[0]
    assert await store.finish_jobs([finish(done, Outcome.COMPLETED)]) == {done.id}
    second = await store.claim_rate_limited(LIMITED, rate, 10, "w1", 30.0)
    assert [c.id for c in second.claimed] == [jobs[1].id]
    assert second.full  # two started in the window: the rate
    finished = second.claimed[0]
    assert await store.finish_jobs([finish(finished, Outcome.COMPLETED)]) == {finished.id}
    assert (await store.claim_rate_limited(LIMITED, rate, 10, "w1", 30.0)).claimed == []
