"""JobStore contract: the one order of due jobs within a queue (docs/priority.md).

Higher level first: a waiting job's priority plus one step per ``priority_aging_s`` seconds
it has been due, at most the top level (the highest priority among the queue's due jobs);
ties by due time, then id. The polling claim, the tenant-capped pick and the stream claim
(``claim_delivered_jobs``) all follow it (test_priority_order.py holds every path to the
plain-Python model)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gochatd.model import Job
from gochatd.store import JobStore
from tests.contract.helpers import enqueue


def _ago(seconds: float) -> datetime:
    return datetime.now(UTC) - timedelta(seconds=seconds)


async def _order(store: JobStore, queue: str = "default") -> list[int]:
    """Claim one job at a time until none is left: the claim order."""
    order: list[int] = []
    while got := await store.claim_due_jobs([queue], 1, "w1", 30.0):
        order.extend(c.id for c in got)
    return order


async def test_higher_priority_first_then_due_time_then_id(store: JobStore) -> None:
    store.priority_aging_s = 86400.0  # no job here waited anywhere near a step
    # A tie: by id. Both given the same time (a row due "now" keeps the database clock's
    # sub-microsecond digits on SQLite, which a datetime read back cannot repeat).
    tie_at = _ago(5)
    same_a = await enqueue(store, "same-a", priority=0, scheduled_at=tie_at)
    same_b = await enqueue(store, "same-b", priority=0, scheduled_at=tie_at)
    low = await enqueue(store, "low", priority=-7)
    top = await enqueue(store, "top", priority=1000)
    older = await enqueue(store, "older", priority=0, scheduled_at=_ago(30))
    mid = await enqueue(store, "mid", priority=3)
    await enqueue(store, "not-due", priority=1000, delay_s=3600.0)
    assert await _order(store) == [top.id, mid.id, older.id, same_a.id, same_b.id, low.id]


async def test_waiting_ages_a_job_past_higher_priorities(store: JobStore) -> None:
    store.priority_aging_s = 10.0
    # Waited 65 s at priority 0: six steps, level 6. Priority 5 due now: level 5.
    patient = await enqueue(store, "patient", priority=0, scheduled_at=_ago(65))
    fresh5 = await enqueue(store, "fresh-5", priority=5)
    # A negative priority waits longer: -2 due 75 s ago is at level 5.
    slow = await enqueue(store, "slow", priority=-2, scheduled_at=_ago(75))
    # Priority 10 due now: level 10, ahead of the patient one.
    fresh10 = await enqueue(store, "fresh-10", priority=10)
    got = await store.claim_due_jobs(["default"], 2, "w1", 30.0)
    assert {c.id for c in got} == {fresh10.id, patient.id}
    # The top level is now 5: both left are there, and go by age.
    assert await _order(store) == [slow.id, fresh5.id]


async def test_one_claim_takes_the_best_across_priorities(store: JobStore) -> None:
    store.priority_aging_s = 86400.0
    jobs: dict[int, list[Job]] = {}
    for priority in (2, -1, 0, 9):
        jobs[priority] = [await enqueue(store, f"p{priority}-{i}", priority=priority)
                          for i in range(3)]
    got = await store.claim_due_jobs(["default"], 5, "w1", 30.0)
    want = {j.id for j in jobs[9] + jobs[2][:2]}
    assert {c.id for c in got} == want
    assert await _order(store) == [j.id for p in (2, 0, -1) for j in jobs[p]][2:]


async def test_tenant_capped_claims_follow_the_same_order(store: JobStore) -> None:
    store.priority_aging_s = 10.0
    store.tenant_limits = {"capped": 2}
    try:
        patient = await enqueue(store, "patient", tenant_id="capped", scheduled_at=_ago(60))
        fresh = await enqueue(store, "fresh", tenant_id="capped", priority=5)
        top = await enqueue(store, "top", tenant_id="capped", priority=10)
        got = await store.claim_due_jobs(["default"], 10, "w1", 30.0)
        # Two of three (the cap): the two ranked first.
        assert {c.id for c in got} == {top.id, patient.id}
        assert fresh.id not in {c.id for c in got}
    finally:
        store.tenant_limits = {}


async def test_stream_claim_takes_the_named_ids_when_every_job_has_priority_0(
    store: JobStore,
) -> None:
    older = await enqueue(store, "older", scheduled_at=_ago(30), dispatch_now=True)
    named = await enqueue(store, "named", dispatch_now=True)
    got = await store.claim_delivered_jobs({"default": [named.id]}, "w1", 30.0)
    # Stream order is the rule's order here: the entry's own job, by primary key.
    assert [c.id for c in got] == [named.id]
    assert [c.id for c in await store.claim_delivered_jobs(
        {"default": [older.id]}, "w1", 30.0)] == [older.id]


async def test_stream_claim_takes_the_best_jobs_of_a_queue_with_priorities(
    store: JobStore,
) -> None:
    store.priority_aging_s = 86400.0
    backlog = [await enqueue(store, f"b{i}", dispatch_now=True) for i in range(3)]
    urgent = await enqueue(store, "urgent", priority=5, dispatch_now=True)
    other = await enqueue(store, "other", queue="other", dispatch_now=True)
    got = await store.claim_delivered_jobs(
        {"default": [backlog[0].id, backlog[1].id], "other": [other.id]}, "w1", 30.0)
    # One job per entry; in "default" the urgent one goes first, whatever was named.
    assert {c.id for c in got} == {urgent.id, backlog[0].id, other.id}
    assert await _order(store) == [backlog[1].id, backlog[2].id]


async def test_an_entry_whose_job_is_gone_claims_the_next_job_of_its_queue(
    store: JobStore,
) -> None:
    first = await enqueue(store, "first", dispatch_now=True)
    second = await enqueue(store, "second", dispatch_now=True)
    third = await enqueue(store, "third", dispatch_now=True)
    [taken] = await store.claim_delivered_jobs({"default": [first.id]}, "w1", 30.0)
    assert taken.id == first.id
    # first's entry read again (a duplicate), and one that names nothing claimable here:
    got = await store.claim_delivered_jobs({"default": [first.id, None]}, "w2", 30.0)
    assert {c.id for c in got} == {second.id, third.id}
    assert await store.claim_delivered_jobs({"default": [None], "other": [None]},
                                            "w3", 30.0) == []


async def test_a_stream_claim_takes_only_jobs_that_were_given_an_entry(store: JobStore) -> None:
    """Entries and jobs stay one to one: an entry spent on a job that has no entry of its own
    (not dispatched yet: the scheduler is about to XADD it) would leave the entry's own job
    waiting for the sweep."""
    store.priority_aging_s = 86400.0
    named = await enqueue(store, "named", dispatch_now=True)
    undispatched = await enqueue(store, "undispatched", priority=5)  # ranks first
    dispatched = await enqueue(store, "dispatched", priority=3, dispatch_now=True)
    got = await store.claim_delivered_jobs({"default": [named.id]}, "w1", 30.0)
    assert [c.id for c in got] == [dispatched.id], "the best job that has an entry"
    got = await store.claim_delivered_jobs({"default": [dispatched.id]}, "w1", 30.0)
    assert [c.id for c in got] == [named.id]
    assert await store.claim_delivered_jobs({"default": [None]}, "w1", 30.0) == []
    assert await _order(store) == [undispatched.id], "left for its own entry (or a poller)"
