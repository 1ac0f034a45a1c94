"""JobStore contract: claims, leases, fences and the lease reaper."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import trio

from gochatd.model import ClaimedJob, Finish, JobStatus, Lease, LeaseState, Outcome
from gochatd.store import JobStore
from tests.contract.helpers import (
    claim_one,
    enqueue,
    finish,
    refetch,
    second_store,
)
from tests.support.wait import wait_until

#: The tenant ``enqueue`` gives a job; a Finish and a Lease name the job's tenant.
T = "default"

SHORT_LEASE_S = 0.3

# -- claims ----------------------------------------------------------------------------------


async def test_claim_jobs_returns_only_claimable_due_ids(store: JobStore) -> None:
    ready = await enqueue(store, "a")
    later = await enqueue(store, "b", delay_s=3600.0)
    done = await enqueue(store, "c")
    cancelled = await enqueue(store, "d")
    done_claim = await claim_one(store, done, "w0")
    assert await store.finish_jobs([finish(done_claim, Outcome.COMPLETED)]) == {done.id}
    await store.cancel_job(cancelled.id)

    claimed = await store.claim_jobs(
        [ready.id, later.id, done.id, cancelled.id, 999_999], "w1", 30.0
    )
    assert [c.id for c in claimed] == [ready.id]
    assert (await refetch(store, later)).status is JobStatus.QUEUED
    assert (await store.get_job(done.id)).status is JobStatus.COMPLETED  # type: ignore[union-attr]
    assert await store.claim_jobs([], "w1", 30.0) == []


async def test_claim_sets_lease_fence_and_attempts(store: JobStore) -> None:
    job = await enqueue(store)
    [claimed] = await store.claim_jobs([job.id], "worker-1", 30.0)
    assert claimed.lease_owner == "worker-1"
    assert claimed.fence == 1 == claimed.job.fence
    got = await refetch(store, job)
    assert got == claimed.job
    assert got.status is JobStatus.RUNNING
    assert (got.attempts, got.fence, got.locked_by) == (1, 1, "worker-1")
    assert got.locked_at is not None and got.lease_expires_at is not None
    lease = (got.lease_expires_at - got.locked_at).total_seconds()
    assert abs(lease - 30.0) < 0.05
    # A second claim of the same id, by anyone, gets nothing and changes nothing.
    assert await store.claim_jobs([job.id], "worker-2", 30.0) == []
    assert await store.claim_jobs([job.id], "worker-1", 30.0) == []
    assert await store.claim_due_jobs(["default"], 10, "worker-2", 30.0) == []
    assert await store.get_job(job.id) == got


async def test_reclaim_after_retry_increments_fence_and_attempts(store: JobStore) -> None:
    job = await enqueue(store)
    first = await claim_one(store, job, "w1")
    assert await store.finish_jobs([finish(first, Outcome.RETRY, delay_s=0.0)]) == {job.id}
    retrying = await refetch(store, first.job)
    assert retrying.status is JobStatus.RETRYING
    second = await claim_one(store, retrying, "w2")
    assert (second.fence, second.job.attempts, second.job.locked_by) == (2, 2, "w2")


async def test_claim_due_jobs_order_limit_priority(store: JobStore) -> None:
    b1 = await enqueue(store, "b1", queue="b")
    b2 = await enqueue(store, "b2", queue="b")
    a_low = await enqueue(store, "a-low", queue="a", priority=0)
    a_high = await enqueue(store, "a-high", queue="a", priority=5)
    a_mid = await enqueue(store, "a-mid", queue="a", priority=1)
    # Same priority as a_high but scheduled earlier: it goes first.
    a_high_old = await enqueue(
        store, "a-high-old", queue="a", priority=5,
        scheduled_at=datetime.now(UTC) - timedelta(minutes=5),
    )
    await enqueue(store, "a-later", queue="a", priority=100, delay_s=3600.0)
    await enqueue(store, "c", queue="c", priority=100)

    async def take(queues: list[str], limit: int) -> set[int]:
        got = await store.claim_due_jobs(queues, limit, "w1", 30.0)
        assert len(got) <= limit
        for c in got:
            assert c.job.status is JobStatus.RUNNING and c.lease_owner == "w1"
            assert c.fence == 1
        return {c.id for c in got}

    # Queue order: "b" fills first, then the best of "a".
    assert await take(["b", "a"], 3) == {b1.id, b2.id, a_high_old.id}
    assert await take(["a"], 1) == {a_high.id}
    assert await take(["a"], 1) == {a_mid.id}
    assert await take(["a", "b"], 5) == {a_low.id}
    # Only the not-yet-due job is left in "a"; "c" was never asked for.
    assert await take(["a", "b"], 5) == set()
    assert await take(["c"], 0) == set()
    assert await take([], 5) == set()
    assert len(await take(["c"], 5)) == 1


async def test_claim_due_jobs_takes_retrying_jobs(store: JobStore) -> None:
    job = await enqueue(store)
    first = await claim_one(store, job, "w1")
    await store.finish_jobs([finish(first, Outcome.RETRY, delay_s=0.0)])
    [again] = await store.claim_due_jobs(["default"], 5, "w2", 30.0)
    assert (again.id, again.fence, again.job.attempts) == (job.id, 2, 2)


# -- the fencing race ------------------------------------------------------------------------


async def _race(a: JobStore, b: JobStore, job_id: int) -> dict[str, list[ClaimedJob]]:
    results: dict[str, list[ClaimedJob]] = {}

    async def claim(store: JobStore, owner: str) -> None:
        results[owner] = await store.claim_jobs([job_id], owner, 30.0)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(claim, a, "owner-a")
        nursery.start_soon(claim, b, "owner-b")
    return results


async def test_concurrent_claims_have_exactly_one_winner(
    store: JobStore, backend_url: str
) -> None:
    async with second_store(backend_url) as a, second_store(backend_url) as b:
        for _ in range(8):
            job = await enqueue(store)
            results = await _race(a, b, job.id)
            winners = [owner for owner, got in results.items() if got]
            assert len(winners) == 1, results
            [winner] = winners
            loser = "owner-b" if winner == "owner-a" else "owner-a"
            [claimed] = results[winner]
            assert claimed.fence == 1 and claimed.job.attempts == 1
            row = await refetch(store, job)
            assert row.locked_by == winner and row.status is JobStatus.RUNNING

            loser_store = b if loser == "owner-b" else a
            stale = [
                Finish(job.id, loser, fence, outcome, T, error_class="x", last_error="stale")
                for fence in (0, 1, 2)
                for outcome in (Outcome.COMPLETED, Outcome.RETRY, Outcome.DEAD)
            ]
            for one in stale:
                assert await loser_store.finish_jobs([one]) == set()
            assert await loser_store.finish_jobs(stale) == set()
            assert await loser_store.extend_leases([Lease(job.id, 1, T)], loser, 60.0) == []
            assert await store.get_job(job.id) == row

            winner_store = a if winner == "owner-a" else b
            applied = await winner_store.finish_jobs([finish(claimed, Outcome.COMPLETED)])
            assert applied == {job.id}
            assert (await refetch(store, row)).status is JobStatus.COMPLETED


async def test_concurrent_polling_claims_are_disjoint(store: JobStore, backend_url: str) -> None:
    ids = {(await enqueue(store, f"j{i}")).id for i in range(30)}
    got: dict[str, set[int]] = {}

    async def claim(s: JobStore, owner: str) -> None:
        claimed = await s.claim_due_jobs(["default"], 30, owner, 30.0)
        got[owner] = {c.id for c in claimed}
        assert all(c.fence == 1 for c in claimed)

    async with (
        second_store(backend_url) as a,
        second_store(backend_url) as b,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(claim, a, "a")
        nursery.start_soon(claim, b, "b")
        nursery.start_soon(claim, store, "c")
    assert got["a"].isdisjoint(got["b"])
    assert got["a"].isdisjoint(got["c"]) and got["b"].isdisjoint(got["c"])
    assert got["a"] | got["b"] | got["c"] == ids
    for owner, owned in got.items():
        for job_id in owned:
            job = await store.get_job(job_id)
            assert job is not None and (job.locked_by, job.fence) == (owner, 1)


# -- stale leases and the reaper -------------------------------------------------------------


async def _reap_until(store: JobStore, job_id: int, *, dead: bool = False) -> None:
    async def reaped() -> bool:
        result = await store.reap_expired_leases()
        return job_id in (result.dead if dead else [r.job_id for r in result.retried])

    await wait_until(reaped, timeout_s=5.0, interval_s=0.05, what=f"lease of {job_id} reaped")


async def test_stale_lease_is_reaped_and_fenced_out(store: JobStore) -> None:
    job = await enqueue(store, "lease:test", queue="q1", tenant_id="t1")
    old = await claim_one(store, job, "old-owner", lease_s=SHORT_LEASE_S)
    # While the lease is live, the reaper leaves it alone.
    live = await enqueue(store, "live")
    live_claim = await claim_one(store, live, "other", lease_s=60.0)

    reaped_ids: list[int] = []

    async def reaped() -> bool:
        res = await store.reap_expired_leases()
        assert live.id not in res.dead and live.id not in [r.job_id for r in res.retried]
        reaped_ids.extend(r.job_id for r in res.retried if r.job_id == job.id)
        for ref in res.retried:
            if ref.job_id == job.id:
                assert (ref.job_type, ref.queue, ref.tenant_id) == ("lease:test", "q1", "t1")
        return bool(reaped_ids)

    await wait_until(reaped, timeout_s=5.0, interval_s=0.05, what="expired lease reaped")
    assert reaped_ids == [job.id]

    reaped_row = await refetch(store, old.job)
    assert reaped_row.status is JobStatus.RETRYING
    assert reaped_row.error_class == "lease_expired"
    assert reaped_row.last_error
    assert reaped_row.attempts == 1 and reaped_row.fence == 1
    assert reaped_row.lease_expires_at is None and reaped_row.dispatched_at is None
    # Reaping is done once: a second pass finds nothing for this job.
    again = await store.reap_expired_leases()
    assert job.id not in [r.job_id for r in again.retried] and job.id not in again.dead
    # The old owner's heartbeat is refused.
    assert await store.extend_leases([Lease(job.id, old.fence, "t1")], "old-owner", 60.0) == []

    new = await claim_one(store, reaped_row, "new-owner")
    assert new.fence == old.fence + 1
    assert new.job.attempts == 2
    running = await refetch(store, reaped_row)

    for outcome in (Outcome.COMPLETED, Outcome.RETRY, Outcome.DEAD, Outcome.INTERRUPTED):
        assert await store.finish_jobs([finish(old, outcome, last_error="late")]) == set()
    # Guessing the new fence does not help the old owner either.
    assert await store.finish_jobs([Finish(job.id, "old-owner", new.fence, Outcome.DEAD, "t1")]) == set()
    assert await store.extend_leases([Lease(job.id, old.fence, "t1")], "old-owner", 60.0) == []
    assert await store.extend_leases([Lease(job.id, new.fence, "t1")], "old-owner", 60.0) == []
    assert await store.get_job(job.id) == running

    assert await store.finish_jobs([finish(new, Outcome.COMPLETED)]) == {job.id}
    done = await refetch(store, running)
    assert done.status is JobStatus.COMPLETED and done.completed_at is not None
    assert await store.get_job(live.id) == live_claim.job


async def test_reaper_kills_jobs_out_of_attempts(store: JobStore) -> None:
    job = await enqueue(store, max_attempts=1)
    claimed = await claim_one(store, job, "w1", lease_s=SHORT_LEASE_S)
    await _reap_until(store, job.id, dead=True)
    row = await refetch(store, claimed.job)
    assert row.status is JobStatus.DEAD
    assert row.failed_at is not None
    assert row.error_class == "lease_expired"
    assert await store.claim_jobs([job.id], "w2", 30.0) == []
    assert await store.finish_jobs([finish(claimed, Outcome.COMPLETED)]) == set()


async def test_reaper_cancels_jobs_with_cancel_requested(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1", lease_s=SHORT_LEASE_S)
    requested = await store.cancel_job(job.id)
    assert (requested.status, requested.cancel_requested) == (JobStatus.RUNNING, True)

    async def reaped() -> bool:
        result = await store.reap_expired_leases()
        assert job.id not in [r.job_id for r in result.retried]
        return job.id in result.dead

    await wait_until(reaped, timeout_s=5.0, interval_s=0.05, what="cancel-requested lease reaped")
    row = await refetch(store, claimed.job)
    assert row.status is JobStatus.CANCELLED
    assert row.failed_at is None
    assert await store.claim_jobs([job.id], "w2", 30.0) == []


async def test_reaper_respects_limit(store: JobStore) -> None:
    jobs = [await enqueue(store, f"j{i}") for i in range(3)]
    for job in jobs:
        await claim_one(store, job, "w1", lease_s=SHORT_LEASE_S)
    seen: list[int] = []

    async def all_reaped() -> bool:
        result = await store.reap_expired_leases(limit=1)
        assert len(result.retried) + len(result.dead) <= 1
        seen.extend(r.job_id for r in result.retried)
        return len(seen) == 3

    await wait_until(all_reaped, timeout_s=5.0, interval_s=0.02, what="three leases reaped")
    assert sorted(seen) == [j.id for j in jobs]


# -- heartbeats ------------------------------------------------------------------------------


async def test_extend_leases(store: JobStore) -> None:
    one, two, other = [await enqueue(store, f"j{i}") for i in range(3)]
    c1 = await claim_one(store, one, "w1", lease_s=5.0)
    c2 = await claim_one(store, two, "w1", lease_s=5.0)
    c3 = await claim_one(store, other, "w2", lease_s=5.0)
    await store.cancel_job(two.id)

    states = await store.extend_leases(
        [Lease(one.id, c1.fence, T), Lease(two.id, c2.fence, T)], "w1", 120.0
    )
    assert sorted(states, key=lambda s: s.job_id) == [
        LeaseState(one.id, False), LeaseState(two.id, True)
    ]
    for claimed in (c1, c2):
        row = await refetch(store, claimed.job)
        assert row.status is JobStatus.RUNNING and row.fence == claimed.fence
        assert row.lease_expires_at is not None and claimed.job.lease_expires_at is not None
        assert row.lease_expires_at - claimed.job.lease_expires_at > timedelta(seconds=100)

    before = await store.get_job(other.id)
    assert await store.extend_leases([Lease(other.id, c3.fence + 1, T)], "w2", 120.0) == []
    assert await store.extend_leases([Lease(other.id, c3.fence - 1, T)], "w2", 120.0) == []
    assert await store.extend_leases([Lease(other.id, c3.fence, T)], "w1", 120.0) == []
    assert await store.extend_leases([Lease(999_999, 1, T)], "w2", 120.0) == []
    assert await store.extend_leases([], "w2", 120.0) == []
    assert await store.get_job(other.id) == before
    mixed = await store.extend_leases(
        [Lease(other.id, c3.fence, T), Lease(one.id, c1.fence, T)], "w2", 120.0
    )
    assert mixed == [LeaseState(other.id, False)]


async def test_extend_after_finish_is_refused(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    await store.finish_jobs([finish(claimed, Outcome.COMPLETED)])
    assert await store.extend_leases([Lease(job.id, claimed.fence, T)], "w1", 60.0) == []


async def test_same_owner_reclaim_fences_out_its_old_lease(store: JobStore) -> None:
    job = await enqueue(store)
    old = await claim_one(store, job, "w1", lease_s=SHORT_LEASE_S)
    await _reap_until(store, job.id)
    new = await claim_one(store, await refetch(store, old.job), "w1")
    assert new.fence == old.fence + 1
    running = await store.get_job(job.id)
    assert await store.finish_jobs([finish(old, Outcome.COMPLETED)]) == set()
    assert await store.extend_leases([Lease(job.id, old.fence, T)], "w1", 60.0) == []
    assert await store.get_job(job.id) == running
    # Both finishes in one batch: only the current fence applies.
    applied = await store.finish_jobs(
        [finish(old, Outcome.DEAD), finish(new, Outcome.COMPLETED)]
    )
    assert applied == {job.id}
    assert (await refetch(store, new.job)).status is JobStatus.COMPLETED


async def test_heartbeat_keeps_a_short_lease_alive(store: JobStore) -> None:
    kept = await enqueue(store, "kept")
    lost = await enqueue(store, "lost")
    kept_claim = await claim_one(store, kept, "w1", lease_s=SHORT_LEASE_S)
    await claim_one(store, lost, "w1", lease_s=SHORT_LEASE_S)
    states = await store.extend_leases([Lease(kept.id, kept_claim.fence, T)], "w1", 60.0)
    assert states == [LeaseState(kept.id, False)]

    async def lost_reaped() -> bool:
        result = await store.reap_expired_leases()
        assert kept.id not in [r.job_id for r in result.retried] and kept.id not in result.dead
        return lost.id in [r.job_id for r in result.retried]

    await wait_until(lost_reaped, timeout_s=5.0, interval_s=0.05, what="unextended lease reaped")
    row = await refetch(store, kept_claim.job)
    assert (row.status, row.fence, row.locked_by) == (JobStatus.RUNNING, 1, "w1")
    assert await store.finish_jobs([finish(kept_claim, Outcome.COMPLETED)]) == {kept.id}
