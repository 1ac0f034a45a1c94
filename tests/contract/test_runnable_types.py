"""JobStore contract: ``store.runnable`` (daemon/worker/runnable.py). A daemon's claims take only
the job types it can run (its Python handlers, its HTTP routes' exact types and
``prefix:*`` prefixes): polling, stream-delivered ids, the capped claims, the scheduler's
dispatch and the sweep. A job of another type is left exactly as it was (status, fence,
attempts), for a daemon that has its handler. ``ANY_TYPE`` filters nothing."""

from __future__ import annotations

import pytest

from gochatd.model import JobStatus
from gochatd.store import JobStore
from gochatd.store.fleet import DaemonBeat
from gochatd.store.scope import ALL, TenantScope
from gochatd.store.sql_store import SqlJobStore
from gochatd.worker.runnable import ANY_TYPE, DaemonHandlers, RunnableTypes, without_handler
from tests.contract.helpers import enqueue

MINE = RunnableTypes.of(["app:mine", "sys:noop"], ["hook:*", "exact:http"])


async def _untouched(store: JobStore, job_id: int) -> None:
    row = await store.get_job(job_id)
    assert row is not None
    assert (row.status, row.fence, row.attempts) == (JobStatus.QUEUED, 0, 0)


async def _jobs(store: JobStore, **kwargs: object) -> dict[str, int]:
    """One job per type: runnable by MINE (an exact type, a prefix route's, an exact route's)
    and not (unknown; a type that only shares the prefix's text without its colon)."""
    types = ["app:mine", "hook:a:b", "exact:http", "app:other", "hookx", "exact:httpx"]
    return {t: (await enqueue(store, t, **kwargs)).id for t in types}


RUNNABLE = {"app:mine", "hook:a:b", "exact:http"}


@pytest.mark.parametrize("priority", [0, 5])
async def test_polling_claims_only_runnable_types(store: JobStore, priority: int) -> None:
    store.runnable = MINE
    jobs = await _jobs(store, priority=priority)
    claimed = await store.claim_due_jobs(["default"], 10, "w1", 30.0)
    assert {c.job.job_type for c in claimed} == RUNNABLE
    for job_type, job_id in jobs.items():
        if job_type not in RUNNABLE:
            await _untouched(store, job_id)
    assert await store.claim_due_jobs(["default"], 10, "w1", 30.0) == []
    # A daemon with the handlers takes the rest; no filter takes everything.
    store.runnable = RunnableTypes.of(["app:other"])
    assert [c.id for c in await store.claim_due_jobs(["default"], 10, "w2", 30.0)] == [
        jobs["app:other"]]
    store.runnable = ANY_TYPE
    rest = await store.claim_due_jobs(["default"], 10, "w3", 30.0)
    assert sorted(c.job.job_type for c in rest) == ["exact:httpx", "hookx"]


@pytest.mark.parametrize("priority", [0, 5])
async def test_stream_claims_only_runnable_types(store: JobStore, priority: int) -> None:
    """Delivered ids (both the priority-0 path and the mixed-priority one) and claims by id."""
    store.runnable = MINE
    jobs = await _jobs(store, priority=priority)
    claimed = await store.claim_delivered_jobs(
        {"default": list(jobs.values())}, "w1", 30.0)
    assert {c.job.job_type for c in claimed} == RUNNABLE
    assert await store.claim_jobs(list(jobs.values()), "w1", 30.0) == []
    for job_type, job_id in jobs.items():
        if job_type not in RUNNABLE:
            await _untouched(store, job_id)


async def test_capped_claims_only_runnable_types(store: JobStore) -> None:
    store.runnable = MINE
    store.tenant_limits = {"t": 10}
    store.queue_limits = {"default": 10}
    jobs = await _jobs(store, tenant_id="t")
    backlog = await store.claim_capped_backlog(["default"], 2, "w1", 30.0)
    assert {c.job.job_type for c in backlog} <= RUNNABLE and len(backlog) == 2
    polled = await store.claim_due_jobs(["default"], 10, "w1", 30.0)
    assert {c.job.job_type for c in backlog + polled} == RUNNABLE
    assert await store.claim_jobs(list(jobs.values()), "w1", 30.0) == []
    for job_type, job_id in jobs.items():
        if job_type not in RUNNABLE:
            await _untouched(store, job_id)


async def test_dispatch_sweep_and_next_due_only_runnable_types(store: JobStore) -> None:
    """The scheduler never XADDs, nor waits for, a job this daemon cannot run."""
    store.runnable = MINE
    other = await enqueue(store, "app:other")
    assert await store.dispatch_due_jobs(["default"], 10) == []
    assert await store.next_due_in_s(["default"], undispatched_only=True) is None
    assert await store.next_due_in_s(["default"], undispatched_only=False) is None
    mine = await enqueue(store, "app:mine")
    assert [r.job_id for r in await store.dispatch_due_jobs(["default"], 10)] == [mine.id]
    # The sweep: both dispatched now; only the runnable one is dispatched again.
    dispatched = await enqueue(store, "app:other", dispatch_now=True)
    assert dispatched.dispatched_at is not None
    assert [r.job_id for r in await store.redispatch_stale_jobs({"default": 10}, -1.0)] == [
        mine.id]
    store.runnable = ANY_TYPE
    assert [r.job_id for r in await store.dispatch_due_jobs(["default"], 10)] == [other.id]
    assert {r.job_id for r in await store.redispatch_stale_jobs({"default": 10}, -1.0)} == {
        mine.id, other.id, dispatched.id}


async def test_scoped_claims_filter_types_too(store: JobStore) -> None:
    """The scoped twins (a store during a live move) carry the same filter, and a new scope
    keeps the store's handler set (and a new set keeps the scope)."""
    if not isinstance(store, SqlJobStore):
        return  # the routed store sets scopes itself
    store.runnable = MINE
    store.tenant_scope = TenantScope.all_except(["moved"])
    mine = await enqueue(store, "app:mine")
    other = await enqueue(store, "app:other")
    moved = await enqueue(store, "app:mine", tenant_id="moved")
    store.runnable = MINE
    assert [c.id for c in await store.claim_due_jobs(["default"], 10, "w1", 30.0)] == [mine.id]
    assert await store.claim_jobs([other.id, moved.id], "w1", 30.0) == []
    await _untouched(store, other.id)
    store.tenant_scope = ALL
    await _untouched(store, moved.id)
    assert store.runnable == MINE


async def test_fleet_rows_carry_each_daemons_handlers(store: JobStore) -> None:
    """Written by a store whose claims are filtered (the daemon's own), read back whole; a
    row without a set (an older release) reads as None."""
    store.runnable = MINE
    mine = DaemonHandlers(MINE, frozenset({"default", "low"}))
    await store.upsert_daemon(DaemonBeat("d1", "h", 1, "streams", "v", 4, 0, False, False,
                                         mine.to_json()))
    await store.upsert_daemon(DaemonBeat("d2", "h", 2, "polling", "v", 4, 0, False, False))
    rows = {r.beat.id: r for r in await store.list_daemons()}
    assert rows["d1"].handlers == mine and rows["d2"].handlers is None
    other = DaemonHandlers(RunnableTypes.of(["app:mine"]), frozenset({"low"}))
    assert other.lacks_some_of(mine) and not mine.lacks_some_of(other)
    assert not DaemonHandlers(RunnableTypes(), frozenset({"elsewhere"})).lacks_some_of(mine)


async def test_waiting_jobs_without_a_handler(store: JobStore) -> None:
    """Due waiting jobs per (type, queue); those no live daemon's set runs are reported."""
    for job_type, queue in [("app:mine", "default"), ("app:other", "default"),
                            ("app:other", "default"), ("app:mine", "nobody")]:
        await enqueue(store, job_type, queue=queue)
    await enqueue(store, "app:other", delay_s=3600)  # not due: not waiting yet
    waiting = {(w.job_type, w.queue): w.jobs for w in await store.waiting_job_types()}
    assert waiting == {("app:mine", "default"): 1, ("app:other", "default"): 2,
                       ("app:mine", "nobody"): 1}
    live = [DaemonHandlers(MINE, frozenset({"default"}))]
    stuck = without_handler(await store.waiting_job_types(), live)
    assert [(w.job_type, w.queue, w.jobs) for w in stuck] == [
        ("app:other", "default", 2), ("app:mine", "nobody", 1)]
    assert without_handler(await store.waiting_job_types(), [*live, None]) == []
