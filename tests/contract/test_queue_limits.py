"""JobStore contract: worker.queue_limits (``store.queue_limits``) caps how many jobs of a
queue run at once, in both claim paths and the capped backlog, on every backend; concurrent
claimers (other connections, as other daemons would be) never exceed it; and with tenant
caps set too, a claimed job fits both (a job its tenant refuses takes no queue slot)."""

from __future__ import annotations

import trio

from gochatd.model import ClaimedJob, JobStatus, Outcome
from gochatd.store import JobStore
from gochatd.store.scope import TenantScope
from tests.contract.helpers import enqueue, finish, second_store
from tests.contract.test_tenant_scope import _sql

CAPPED = "reports"


async def _running(store: JobStore) -> dict[str, int]:
    return {s.queue: s.running for s in await store.queue_stats() if s.running}


async def test_polling_claims_respect_the_queue_limit(store: JobStore) -> None:
    store.queue_limits = {CAPPED: 2}
    reports = [await enqueue(store, queue=CAPPED) for _ in range(5)]
    default = [await enqueue(store) for _ in range(3)]
    # The capped queue comes first and yields only its free slots: the rest of the limit
    # goes to the next queue rather than to reports jobs the claim would refuse.
    claimed = await store.claim_due_jobs([CAPPED, "default"], 5, "w1", 30.0)
    assert sorted(c.id for c in claimed) == sorted(
        [j.id for j in reports[:2]] + [j.id for j in default])
    assert await _running(store) == {CAPPED: 2, "default": 3}
    assert await store.claim_due_jobs([CAPPED, "default"], 10, "w1", 30.0) == []
    # A slot frees: exactly one more, the oldest waiting.
    done = next(c for c in claimed if c.job.queue == CAPPED)
    assert await store.finish_jobs([finish(done, Outcome.COMPLETED)]) == {done.id}
    again = await store.claim_due_jobs([CAPPED], 10, "w1", 30.0)
    assert [c.id for c in again] == [reports[2].id]
    # Without limits the plain claim takes the rest.
    store.queue_limits = {}
    rest = await store.claim_due_jobs([CAPPED], 10, "w1", 30.0)
    assert sorted(c.id for c in rest) == [j.id for j in reports[3:]]


async def test_stream_claims_respect_the_queue_limit(store: JobStore) -> None:
    store.queue_limits = {CAPPED: 2}
    reports = [await enqueue(store, queue=CAPPED, priority=p) for p in range(4)]
    other = await enqueue(store)
    delivered = {CAPPED: [j.id for j in reports], "default": [other.id]}
    claimed = await store.claim_delivered_jobs(delivered, "w1", 30.0)
    # The highest priorities win the queue's two slots; the rest stay queued, untouched.
    assert sorted(c.id for c in claimed) == sorted([reports[3].id, reports[2].id, other.id])
    for job in reports[:2]:
        row = await store.get_job(job.id)
        assert row is not None
        assert (row.status, row.fence, row.attempts) == (JobStatus.QUEUED, 0, 0)
    assert await store.claim_jobs([j.id for j in reports], "w2", 30.0) == []
    assert await _running(store) == {CAPPED: 2, "default": 1}


async def test_a_job_must_fit_its_tenant_cap_and_its_queue_cap(store: JobStore) -> None:
    store.queue_limits = {CAPPED: 3}
    store.tenant_limits = {"a": 1}
    a_reports = [await enqueue(store, queue=CAPPED, tenant_id="a") for _ in range(3)]
    b_reports = [await enqueue(store, queue=CAPPED, tenant_id="b") for _ in range(3)]
    a_default = [await enqueue(store, tenant_id="a") for _ in range(2)]
    ids = [j.id for j in a_reports + b_reports + a_default]
    claimed = await store.claim_jobs(ids, "w1", 30.0)
    # Tenant a: one job in all (its oldest). reports: three, and a's refused jobs take
    # none of them, so b's first two fill the queue.
    assert sorted(c.id for c in claimed) == sorted(
        [a_reports[0].id, b_reports[0].id, b_reports[1].id])
    assert await _running(store) == {CAPPED: 3}
    assert await store.running_by_tenant() == {"a": 1, "b": 2}
    # Polling: the queue is full and tenant a too: nothing of either.
    assert await store.claim_due_jobs([CAPPED, "default"], 10, "w1", 30.0) == []
    # b's job finishes: a queue slot, but tenant a is still full, so b's last job takes it.
    done = next(c for c in claimed if c.id == b_reports[0].id)
    assert await store.finish_jobs([finish(done, Outcome.COMPLETED)]) == {done.id}
    again = await store.claim_due_jobs([CAPPED, "default"], 10, "w1", 30.0)
    assert [c.id for c in again] == [b_reports[2].id]


async def test_concurrent_claimers_never_exceed_the_queue_limit(
    store: JobStore, backend_url: str
) -> None:
    caps, tenant_caps = {CAPPED: 4}, {"t0": 2}
    jobs = [await enqueue(store, queue=CAPPED, tenant_id=f"t{n % 3}") for n in range(96)]
    others = [await enqueue(store, tenant_id="t0") for _ in range(24)]
    async with second_store(backend_url) as other_a, second_store(backend_url) as other_b:
        claimers = [store, other_a, other_b]
        for s in claimers:
            s.queue_limits, s.tenant_limits = caps, tenant_caps
        for round_ in range(4):  # each round a burst of claims, then every claimed job ends
            ids = [j.id for j in jobs[round_ * 24:(round_ + 1) * 24]]
            got: list[ClaimedJob] = []

            async def claim(s: JobStore, n: int, ids: list[int] = ids,
                            got: list[ClaimedJob] = got, round_: int = round_) -> None:
                if n % 3 == 0:  # disjoint deliveries: only the locks keep the counts exact
                    mine = [*ids[n * 2:n * 2 + 2], others[round_ * 6 + n // 3].id]
                    got.extend(await s.claim_jobs(mine, f"w{n}", 30.0))
                elif n % 3 == 1:
                    got.extend(await s.claim_due_jobs([CAPPED, "default"], 5, f"w{n}", 30.0))
                else:
                    got.extend(await s.claim_capped_backlog([CAPPED], 5, f"w{n}", 30.0))

            async with trio.open_nursery() as nursery:
                for n in range(18):
                    nursery.start_soon(claim, claimers[n % 3], n)
            assert len(got) == len({c.id for c in got})
            assert (await _running(store))[CAPPED] == 4  # the cap, reached and never passed
            assert (await store.running_by_tenant())["t0"] == 2
            applied = await store.finish_jobs([finish(c, Outcome.COMPLETED) for c in got])
            assert applied == {c.id for c in got}


async def test_capped_backlog_claims_only_capped_queues_and_tenants(store: JobStore) -> None:
    store.queue_limits = {CAPPED: 2}
    reports = [await enqueue(store, queue=CAPPED) for _ in range(3)]
    await enqueue(store)  # an uncapped queue: the intake's, not the backlog's
    claimed = await store.claim_capped_backlog([CAPPED, "default"], 10, "w1", 30.0)
    assert sorted(c.id for c in claimed) == [j.id for j in reports[:2]]
    assert await store.claim_capped_backlog([CAPPED, "default"], 10, "w1", 30.0) == []
    # A capped tenant's job in an uncapped queue, and only up to the tenant's cap.
    store.tenant_limits = {"t": 1}
    mine = [await enqueue(store, tenant_id="t") for _ in range(2)]
    got = await store.claim_capped_backlog([CAPPED, "default"], 10, "w1", 30.0)
    assert [c.id for c in got] == [mine[0].id]
    store.queue_limits, store.tenant_limits = {}, {}
    assert await store.claim_capped_backlog([CAPPED, "default"], 10, "w1", 30.0) == []


async def test_a_scoped_store_counts_only_its_tenants(store: JobStore) -> None:
    """During a live move each database caps the queue among the tenants it serves (the
    home database still holds moved tenants' rows, some left running)."""
    store.queue_limits = {CAPPED: 2}
    moved = [await enqueue(store, queue=CAPPED, tenant_id="moved") for _ in range(2)]
    assert len(await store.claim_jobs([j.id for j in moved], "w0", 30.0)) == 2
    mine = [await enqueue(store, queue=CAPPED, tenant_id="home") for _ in range(3)]
    _sql(store).tenant_scope = TenantScope.all_except({"moved"})
    claimed = await store.claim_due_jobs([CAPPED], 10, "w1", 30.0)
    assert [c.id for c in claimed] == [j.id for j in mine[:2]]
    assert await store.claim_jobs([mine[2].id], "w1", 30.0) == []
    assert await store.claim_capped_backlog([CAPPED], 10, "w1", 30.0) == []
