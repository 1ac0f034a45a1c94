"""JobStore contract: finishing, dispatch bookkeeping, operators, notifications."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from gochatd.errors import InvalidTransition, JobNotFound
from gochatd.model import Finish, Job, JobStatus, Outcome
from gochatd.store import JobStore
from tests.contract.helpers import (
    CLOCK_SLACK_S,
    assert_edge,
    claim_one,
    enqueue,
    finish,
    raw_sql,
    refetch,
    second_store,
)
from tests.support.wait import wait_until

#: The tenant ``enqueue`` gives a job; a Finish and a Lease name the job's tenant.
T = "default"

# -- finish outcomes -------------------------------------------------------------------------


async def test_finish_completed(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    assert await store.finish_jobs([finish(claimed, Outcome.COMPLETED)]) == {job.id}
    row = await refetch(store, claimed.job)
    assert row.status is JobStatus.COMPLETED
    assert row.completed_at is not None and row.failed_at is None
    assert row.completed_at >= claimed.job.locked_at  # type: ignore[operator]
    assert row.attempts == 1 and row.fence == 1
    assert row.lease_expires_at is None
    # A second finish of the same lease is stale: the job is no longer running.
    for outcome in Outcome:
        assert await store.finish_jobs([finish(claimed, outcome)]) == set()
    assert await store.get_job(job.id) == row
    assert await store.claim_jobs([job.id], "w2", 30.0) == []
    assert await store.finish_jobs([]) == set()


async def test_finish_retry(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    applied = await store.finish_jobs(
        [finish(claimed, Outcome.RETRY, delay_s=60.0, error_class="Timeout", last_error="slow")]
    )
    assert applied == {job.id}
    row = await refetch(store, claimed.job)
    assert row.status is JobStatus.RETRYING
    assert row.attempts == 1
    assert (row.error_class, row.last_error) == ("Timeout", "slow")
    assert row.lease_expires_at is None and row.completed_at is None and row.failed_at is None
    delay = (row.scheduled_at - row.updated_at).total_seconds()
    assert abs(delay - 60.0) < 0.5
    due_in = await store.next_due_in_s(["default"], False)
    assert due_in is not None and 55.0 < due_in <= 60.0 + CLOCK_SLACK_S
    assert await store.claim_jobs([job.id], "w2", 30.0) == []
    assert await store.claim_due_jobs(["default"], 10, "w2", 30.0) == []


async def test_completion_clears_the_error_of_an_earlier_attempt(store: JobStore) -> None:
    """A job that failed (or lost its lease) and then completed shows no current error."""
    job = await enqueue(store)
    first = await claim_one(store, job, "w1", lease_s=0.05)
    # The first attempt's lease runs out: the reaper records lease_expired.
    await wait_until(lambda: _reaped(store), timeout_s=10, what="lease reaped")
    row = await refetch(store, first.job)
    assert (row.status, row.error_class) == (JobStatus.RETRYING, "lease_expired")
    second = await claim_one(store, row, "w2")
    await store.finish_jobs([finish(second, Outcome.RETRY, delay_s=0.0, error_class="E",
                                    last_error="boom")])
    assert (await refetch(store, second.job)).error_class == "E"
    third = await claim_one(store, await refetch(store, second.job), "w3")
    assert await store.finish_jobs([finish(third, Outcome.COMPLETED)]) == {job.id}
    done = await refetch(store, third.job)
    assert done.status is JobStatus.COMPLETED
    assert (done.error_class, done.last_error) == (None, None)
    assert done.attempts == 3


async def _reaped(store: JobStore) -> bool:
    return bool((await store.reap_expired_leases()).retried)


async def test_finish_retry_without_delay_is_due_now(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    await store.finish_jobs([finish(claimed, Outcome.RETRY, delay_s=0.0, error_class="E")])
    again = await claim_one(store, await refetch(store, claimed.job), "w2")
    assert (again.fence, again.job.attempts) == (2, 2)


async def test_finish_dead(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    applied = await store.finish_jobs(
        [finish(claimed, Outcome.DEAD, error_class="ValueError", last_error="bad input")]
    )
    assert applied == {job.id}
    row = await refetch(store, claimed.job)
    assert row.status is JobStatus.DEAD
    assert row.failed_at is not None and row.completed_at is None
    assert (row.error_class, row.last_error) == ("ValueError", "bad input")
    assert await store.claim_jobs([job.id], "w2", 30.0) == []


async def test_finish_interrupted_refunds_the_attempt(store: JobStore) -> None:
    job = await enqueue(store)
    first = await claim_one(store, job, "w1")
    await store.finish_jobs([finish(first, Outcome.RETRY, delay_s=0.0)])
    second = await claim_one(store, await refetch(store, first.job), "w2")
    assert second.job.attempts == 2
    applied = await store.finish_jobs(
        [finish(second, Outcome.INTERRUPTED, error_class="Shutdown", last_error="bye")]
    )
    assert applied == {job.id}
    row = await refetch(store, second.job)
    assert row.status is JobStatus.RETRYING
    assert row.attempts == 1
    due_in = await store.next_due_in_s(["default"], False)
    assert due_in is not None and due_in <= 0.0
    third = await claim_one(store, row, "w3")
    assert (third.fence, third.job.attempts) == (3, 2)


async def test_finish_cancelled(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    await store.cancel_job(job.id)
    applied = await store.finish_jobs(
        [finish(claimed, Outcome.CANCELLED, error_class="cancelled", last_error="operator")]
    )
    assert applied == {job.id}
    row = await refetch(store, claimed.job)
    assert row.status is JobStatus.CANCELLED
    assert row.cancel_requested is False
    assert row.error_class == "cancelled"
    assert await store.claim_jobs([job.id], "w2", 30.0) == []


async def test_batch_finish_applies_exactly_the_valid_rows(store: JobStore) -> None:
    jobs = [await enqueue(store, f"j{i}") for i in range(40)]
    claims = [await claim_one(store, job, "w1") for job in jobs[:36]]
    # Four jobs already finished, their finishes are repeated below.
    done = claims[32:]
    assert await store.finish_jobs([finish(c, Outcome.COMPLETED) for c in done]) == {
        c.id for c in done
    }
    outcomes = [Outcome.COMPLETED, Outcome.RETRY, Outcome.DEAD, Outcome.INTERRUPTED,
                Outcome.CANCELLED]
    valid = [
        finish(c, outcomes[i % len(outcomes)], delay_s=30.0, error_class="E", last_error=str(i))
        for i, c in enumerate(claims[:16])
    ]
    stale = (
        [Finish(c.id, c.lease_owner, c.fence + 1, Outcome.COMPLETED, T) for c in claims[16:20]]
        + [Finish(c.id, c.lease_owner, c.fence - 1, Outcome.DEAD, T) for c in claims[20:24]]
        + [Finish(c.id, "intruder", c.fence, Outcome.RETRY, T) for c in claims[24:28]]
        + [Finish(c.id, "", 0, Outcome.COMPLETED, T) for c in claims[28:32]]
        + [finish(c, Outcome.DEAD) for c in done]
        + [Finish(j.id, "w1", 0, Outcome.COMPLETED, T) for j in jobs[36:]]
        + [Finish(j.id, "w1", 1, Outcome.COMPLETED, T) for j in jobs[36:]]
        + [Finish(999_999, "w1", 1, Outcome.COMPLETED, T)]
    )
    before = {job.id: await store.get_job(job.id) for job in jobs}
    mixed = [x for pair in zip(valid, stale, strict=False) for x in pair] + stale[len(valid):]
    applied = await store.finish_jobs(mixed)
    assert applied == {f.job_id for f in valid}

    for f in valid:
        row = await store.get_job(f.job_id)
        prev = before[f.job_id]
        assert row is not None and prev is not None
        assert_edge(prev.status, row.status)
        assert row.status is f.status
        expected_attempts = 0 if f.outcome is Outcome.INTERRUPTED else 1
        assert row.attempts == expected_attempts
        if f.status is not JobStatus.COMPLETED:
            assert (row.error_class, row.last_error) == ("E", f.last_error)
    for job_id in {f.job_id for f in stale} - {999_999}:
        assert await store.get_job(job_id) == before[job_id]


# -- dispatch bookkeeping --------------------------------------------------------------------


async def test_dispatch_due_jobs_returns_each_job_once(store: JobStore) -> None:
    a = await enqueue(store, "a", queue="q1", tenant_id="t1")
    b = await enqueue(store, "b", queue="q2")
    other = await enqueue(store, "c", queue="q3")
    later = await enqueue(store, "d", queue="q1", delay_s=3600.0)
    pushed = await enqueue(store, "e", queue="q1", dispatch_now=True)
    assert pushed.dispatched_at is not None
    assert a.dispatched_at is None

    refs = await store.dispatch_due_jobs(["q1", "q2"], 100)
    assert sorted(r.job_id for r in refs) == [a.id, b.id]
    ref_a = next(r for r in refs if r.job_id == a.id)
    assert (ref_a.job_type, ref_a.queue, ref_a.tenant_id) == ("a", "q1", "t1")
    for job in (a, b):
        row = await refetch(store, job)
        assert row.dispatched_at is not None and row.status is JobStatus.QUEUED
    assert await store.dispatch_due_jobs(["q1", "q2"], 100) == []
    assert (await refetch(store, later)).dispatched_at is None
    assert (await refetch(store, other)).dispatched_at is None
    # The delayed one is the next undispatched job; the pushed one never shows up.
    due_in = await store.next_due_in_s(["q1", "q2"], True)
    assert due_in is not None and due_in > 3000.0
    assert await store.next_due_in_s(["q2"], True) is None
    assert [r.job_id for r in await store.dispatch_due_jobs(["q3"], 100)] == [other.id]


async def test_dispatch_due_jobs_respects_limit(store: JobStore) -> None:
    ids = [(await enqueue(store, f"j{i}")).id for i in range(7)]
    seen: list[int] = []
    for expected in (3, 3, 1, 0):
        refs = await store.dispatch_due_jobs(["default"], 3)
        assert len(refs) == expected
        seen.extend(r.job_id for r in refs)
    assert sorted(seen) == ids


async def test_retry_makes_a_job_dispatchable_again(store: JobStore) -> None:
    job = await enqueue(store)
    assert [r.job_id for r in await store.dispatch_due_jobs(["default"], 10)] == [job.id]
    claimed = await claim_one(store, job, "w1")
    await store.finish_jobs([finish(claimed, Outcome.RETRY, delay_s=0.0)])
    assert [r.job_id for r in await store.dispatch_due_jobs(["default"], 10)] == [job.id]
    assert await store.dispatch_due_jobs(["default"], 10) == []


async def test_redispatch_stale_jobs(store: JobStore) -> None:
    a = await enqueue(store, "a", queue="q1")
    b = await enqueue(store, "b", queue="q1")
    elsewhere = await enqueue(store, "c", queue="q2")
    never = await enqueue(store, "d", queue="q1")
    dispatched = await store.dispatch_due_jobs(["q1", "q2"], 100)
    assert len(dispatched) == 4
    claimed = await claim_one(store, never, "w1")  # running jobs are not redispatched
    assert await store.redispatch_stale_jobs({"q1": 100}, 3600.0) == []
    assert await store.redispatch_stale_jobs({"q1": 0}, 0.0) == []
    assert await store.redispatch_stale_jobs({}, 0.0) == []

    seen: list[int] = []

    async def stale() -> bool:
        refs = await store.redispatch_stale_jobs({"q1": 100}, 0.0)
        seen.extend(r.job_id for r in refs)
        return len(seen) >= 2

    await wait_until(stale, timeout_s=5.0, interval_s=0.01, what="stale dispatches")
    assert sorted(seen) == [a.id, b.id]
    assert elsewhere.id not in seen and claimed.id not in seen
    # Redispatch refreshes dispatched_at: nothing is stale by an hour now.
    assert await store.redispatch_stale_jobs({"q1": 100}, 3600.0) == []
    row = await store.get_job(a.id)
    assert row is not None and row.status is JobStatus.QUEUED


# -- operators -------------------------------------------------------------------------------


async def _dead_job(store: JobStore) -> Job:
    job = await enqueue(store, max_attempts=1)
    claimed = await claim_one(store, job, "w1")
    await store.finish_jobs([finish(claimed, Outcome.DEAD, error_class="E", last_error="x")])
    row = await refetch(store, claimed.job)
    assert row.status is JobStatus.DEAD
    return row


async def test_retry_job_requeues_dead_and_cancelled(store: JobStore) -> None:
    dead = await _dead_job(store)
    retried = await store.requeue_job(dead.id)
    assert_edge(dead.status, retried.status)
    assert retried.status is JobStatus.QUEUED
    assert retried.attempts == 0 and retried.failed_at is None
    assert retried.fence == dead.fence  # fences never go backwards
    assert await store.get_job(dead.id) == retried
    again = await claim_one(store, retried, "w2")
    assert (again.fence, again.job.attempts) == (dead.fence + 1, 1)

    cancelled = await store.cancel_job((await enqueue(store, "c")).id)
    assert cancelled.status is JobStatus.CANCELLED
    requeued = await store.requeue_job(cancelled.id)
    assert_edge(cancelled.status, requeued.status)
    assert (requeued.status, requeued.attempts) == (JobStatus.QUEUED, 0)
    assert requeued.cancel_requested is False
    assert [c.id for c in await store.claim_jobs([cancelled.id], "w3", 30.0)] == [cancelled.id]


async def test_retry_job_rejects_other_statuses(store: JobStore) -> None:
    queued = await enqueue(store, "q")
    running = await enqueue(store, "r")
    await claim_one(store, running, "w1")
    done = await enqueue(store, "d")
    await store.finish_jobs([finish(await claim_one(store, done, "w1"), Outcome.COMPLETED)])
    retrying = await enqueue(store, "rt")
    await store.finish_jobs(
        [finish(await claim_one(store, retrying, "w1"), Outcome.RETRY, delay_s=60.0)]
    )
    for job in (queued, running, done, retrying):
        before = await store.get_job(job.id)
        with pytest.raises(InvalidTransition):
            await store.requeue_job(job.id)
        assert await store.get_job(job.id) == before
    with pytest.raises(JobNotFound):
        await store.requeue_job(987_654)


async def test_cancel_waiting_jobs(store: JobStore) -> None:
    queued = await enqueue(store, "q")
    await store.dispatch_due_jobs(["default"], 10)
    cancelled = await store.cancel_job(queued.id)
    assert_edge(queued.status, cancelled.status)
    assert cancelled.status is JobStatus.CANCELLED
    assert await store.get_job(queued.id) == cancelled
    assert await store.claim_jobs([queued.id], "w1", 30.0) == []
    assert await store.claim_due_jobs(["default"], 10, "w1", 30.0) == []

    retrying = await enqueue(store, "r")
    claimed = await claim_one(store, retrying, "w1")
    await store.finish_jobs([finish(claimed, Outcome.RETRY, delay_s=0.0)])
    waiting = await refetch(store, claimed.job)
    assert waiting.status is JobStatus.RETRYING
    gone = await store.cancel_job(retrying.id)
    assert_edge(waiting.status, gone.status)
    assert gone.status is JobStatus.CANCELLED
    assert await store.claim_jobs([retrying.id], "w1", 30.0) == []


async def test_cancel_running_job_requests_cancellation(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    requested = await store.cancel_job(job.id)
    assert requested.status is JobStatus.RUNNING
    assert requested.cancel_requested is True
    assert (requested.fence, requested.locked_by) == (claimed.fence, "w1")
    # Asking twice is harmless: still running, still requested.
    twice = await store.cancel_job(job.id)
    assert (twice.status, twice.cancel_requested) == (JobStatus.RUNNING, True)
    # The runner still holds a valid lease and may finish.
    assert await store.finish_jobs([finish(claimed, Outcome.CANCELLED)]) == {job.id}
    row = await refetch(store, twice)
    assert row.status is JobStatus.CANCELLED


async def test_cancel_rejects_finished_jobs(store: JobStore) -> None:
    done = await enqueue(store, "d")
    await store.finish_jobs([finish(await claim_one(store, done, "w1"), Outcome.COMPLETED)])
    dead = await _dead_job(store)
    cancelled = await store.cancel_job((await enqueue(store, "c")).id)
    for job_id in (done.id, dead.id, cancelled.id):
        before = await store.get_job(job_id)
        with pytest.raises(InvalidTransition):
            await store.cancel_job(job_id)
        assert await store.get_job(job_id) == before
    with pytest.raises(JobNotFound):
        await store.cancel_job(987_654)


# -- notifications ---------------------------------------------------------------------------


async def test_wait_for_notification_times_out(store: JobStore) -> None:
    start = trio.current_time()
    assert await store.wait_for_notification(0.2) is False
    assert trio.current_time() - start >= 0.15


async def _woken_by(store: JobStore, insert: Callable[[], Awaitable[None]]) -> float:
    """Start a waiter, then run ``insert``; return how long the waiter took."""
    assert store.has_notifications
    # Subscribe first (LISTEN / data_version baseline); nothing has happened yet.
    assert await store.wait_for_notification(0.05) is False
    result: list[tuple[bool, float]] = []

    async def waiter() -> None:
        start = trio.current_time()
        woke = await store.wait_for_notification(2.0)
        result.append((woke, trio.current_time() - start))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await insert()
    [(woke, took)] = result
    assert woke is True, "no wake-up within 2 s"
    return took


async def test_foreign_insert_wakes_the_waiter(store: JobStore, backend_url: str) -> None:
    async def insert() -> None:
        await raw_sql(
            backend_url,
            "INSERT INTO background_jobs (job_type, queue, payload) VALUES (?, ?, ?)",
            ["foreign", "default", '{"a": 1}'],
        )

    took = await _woken_by(store, insert)
    assert took < 2.0


async def test_other_process_enqueue_wakes_the_waiter(store: JobStore, backend_url: str) -> None:
    async with second_store(backend_url) as other:

        async def insert() -> None:
            await enqueue(other, "from-elsewhere")

        took = await _woken_by(store, insert)
    assert took < 2.0


async def test_insert_between_open_and_first_wait_is_not_lost(
    store: JobStore, backend_url: str
) -> None:
    """Work committed after ``open()`` must wake the first waiter, as it wakes later ones.

    From the second call on, both stores report what happened since the previous call
    (LISTEN keeps queueing; the data_version baseline is kept), so the first call must
    report what happened since ``open()``; otherwise a daemon that polls, then waits,
    sleeps through an insert made in between.
    """
    await raw_sql(backend_url, "INSERT INTO background_jobs (job_type) VALUES (?)", ["early"])
    assert await store.wait_for_notification(0.3) is True
