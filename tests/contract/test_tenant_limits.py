"""JobStore contract: tenants.<id>.max_running caps both claim paths, on every backend, and
concurrent claimers (other connections, as other daemons would be) never exceed it. Also:
idempotent replays compare payloads the same way on both backends."""

from __future__ import annotations

import trio

from gochatd.errors import IdempotencyConflict
from gochatd.model import EnqueueRequest, JobStatus, Outcome
from gochatd.store import JobStore
from tests.contract.helpers import enqueue, finish, second_store

LIMITED = "limited"
FREE = "free"


async def _running(store: JobStore) -> dict[str, int]:
    return await store.running_by_tenant()


async def test_polling_claims_respect_max_running(store: JobStore) -> None:
    store.tenant_limits = {LIMITED: 2}
    limited = [await enqueue(store, tenant_id=LIMITED) for _ in range(5)]
    free = [await enqueue(store, tenant_id=FREE) for _ in range(3)]
    claimed = await store.claim_due_jobs(["default"], 10, "w1", 30.0)
    assert sorted(c.id for c in claimed) == sorted([j.id for j in limited[:2]] + [j.id for j in free])
    assert await _running(store) == {LIMITED: 2, FREE: 3}
    assert await store.claim_due_jobs(["default"], 10, "w1", 30.0) == []
    # A slot frees: exactly one more of the limited tenant, the oldest waiting.
    done = next(c for c in claimed if c.job.tenant_id == LIMITED)
    assert await store.finish_jobs([finish(done, Outcome.COMPLETED)]) == {done.id}
    again = await store.claim_due_jobs(["default"], 10, "w1", 30.0)
    assert [c.id for c in again] == [limited[2].id]
    # Without limits the plain claim takes the rest.
    store.tenant_limits = {}
    rest = await store.claim_due_jobs(["default"], 10, "w1", 30.0)
    assert sorted(c.id for c in rest) == [j.id for j in limited[3:]]


async def test_stream_claims_respect_max_running(store: JobStore) -> None:
    store.tenant_limits = {LIMITED: 2}
    limited = [await enqueue(store, tenant_id=LIMITED, priority=p) for p in range(4)]
    free = await enqueue(store, tenant_id=FREE)
    ids = [j.id for j in limited] + [free.id]
    claimed = await store.claim_jobs(ids, "w1", 30.0)
    # The highest priorities win the tenant's two slots; the rest stay queued, untouched.
    assert sorted(c.id for c in claimed) == sorted([limited[3].id, limited[2].id, free.id])
    for job in limited[:2]:
        row = await store.get_job(job.id)
        assert row is not None
        assert (row.status, row.fence, row.attempts) == (JobStatus.QUEUED, 0, 0)
    assert await store.claim_jobs(ids, "w2", 30.0) == []


async def test_concurrent_claimers_never_exceed_max_running(
    store: JobStore, backend_url: str
) -> None:
    store.tenant_limits = {LIMITED: 3}
    jobs = [await enqueue(store, tenant_id=LIMITED) for _ in range(40)]
    ids = [j.id for j in jobs]
    async with second_store(backend_url) as other_a, second_store(backend_url) as other_b:
        claimers = [store, other_a, other_b]
        for s in claimers:
            s.tenant_limits = {LIMITED: 3}
        got: list[int] = []

        async def claim(s: JobStore, n: int) -> None:
            if n % 2:  # disjoint deliveries: only the tenant lock keeps the count exact
                mine = ids[n * 3:n * 3 + 3]
                got.extend(c.id for c in await s.claim_jobs(mine, f"w{n}", 30.0))
            else:
                got.extend(c.id for c in await s.claim_due_jobs(["default"], 5, f"w{n}", 30.0))

        async with trio.open_nursery() as nursery:
            for n in range(12):
                nursery.start_soon(claim, claimers[n % 3], n)
    assert len(got) == len(set(got)) == 3
    assert await _running(store) == {LIMITED: 3}


async def test_replays_compare_payloads_like_jsonb(store: JobStore) -> None:
    first = EnqueueRequest(job_type="t:x", payload={"a": 1, "b": [1.5, {"c": True}], "d": 1e20},
                           tenant_id="t", idempotency_key="k")
    created = await store.enqueue(first)
    assert created.created
    same = [
        {"b": [1.5, {"c": True}], "a": 1, "d": 1e20},        # key order
        {"a": 1.0, "b": [1.5, {"c": True}], "d": 10**20},    # numbers by value
    ]
    for payload in same:
        again = await store.enqueue(EnqueueRequest(job_type="t:x", payload=payload,
                                                   tenant_id="t", idempotency_key="k"))
        assert (again.created, again.job.id) == (False, created.job.id)
    different = [
        {"a": True, "b": [1.5, {"c": True}], "d": 1e20},     # true is not 1
        {"a": 1, "b": [{"c": True}, 1.5], "d": 1e20},        # array order matters
        {"a": 1, "b": [1.5, {"c": 1}], "d": 1e20},
        {"a": 1, "b": [1.5, {"c": True}]},
    ]
    for payload in different:
        try:
            await store.enqueue(EnqueueRequest(job_type="t:x", payload=payload,
                                               tenant_id="t", idempotency_key="k"))
        except IdempotencyConflict as exc:
            assert exc.existing_id == created.job.id
        else:
            raise AssertionError(f"{payload} replayed as the same job")


async def test_batch_replays_compare_payloads_like_jsonb(store: JobStore) -> None:
    first = EnqueueRequest(job_type="t:x", payload={"a": 1, "b": {"c": 2.5}}, tenant_id="t",
                           idempotency_key="kb")
    [created] = await store.enqueue_many([first])
    assert created.created
    replays = await store.enqueue_many([
        EnqueueRequest(job_type="t:x", payload={"b": {"c": 2.5}, "a": 1.0}, tenant_id="t",
                       idempotency_key="kb"),
        EnqueueRequest(job_type="t:x", payload={"a": True, "b": {"c": 2.5}}, tenant_id="t",
                       idempotency_key="kb"),
    ], raise_on_conflict=False)
    assert [(r.created, r.conflict, r.job.id) for r in replays] == [
        (False, False, created.job.id), (False, True, created.job.id)]


async def test_tenant_backlog_claims_only_capped_tenants(store: JobStore) -> None:
    store.tenant_limits = {LIMITED: 2}
    limited = [await enqueue(store, tenant_id=LIMITED) for _ in range(3)]
    await enqueue(store, tenant_id=FREE)
    await enqueue(store, tenant_id=LIMITED, queue="other")
    claimed = await store.claim_capped_backlog(["default"], 10, "w1", 30.0)
    # Only the capped tenant's jobs, in the asked queues, up to its cap.
    assert sorted(c.id for c in claimed) == [j.id for j in limited[:2]]
    assert await store.claim_capped_backlog(["default"], 10, "w1", 30.0) == []
    store.tenant_limits = {}
    assert await store.claim_capped_backlog(["default"], 10, "w1", 30.0) == []
