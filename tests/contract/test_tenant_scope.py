"""JobStore contract: ``tenant_scope`` (store/scope.py). During a live tenant migration each
database's store acts only on the tenants routed to it, although the home database still
holds the moved tenants' rows. A scoped store never claims, reaps, dispatches, redispatches,
retries, cancels, prunes, counts, lists, gets or finishes an out-of-scope tenant's jobs or
outbox rows; ALL (the default) sees every tenant."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gochatd.errors import JobNotFound
from gochatd.migrate.routing.store import RoutedStore
from gochatd.model import (
    ClaimedJob,
    EnqueueRequest,
    Job,
    JobFilter,
    JobStatus,
    Lease,
    Outcome,
)
from gochatd.outbox.model import OutboxFilter, OutboxMessage, OutboxStatus
from gochatd.store import JobStore
from gochatd.store.scope import ALL, TenantScope
from gochatd.store.sql_store import SqlJobStore
from tests.contract.helpers import claim_one, enqueue, finish
from tests.contract.test_outbox import reply

A, B = "tenant-a", "tenant-b"


@dataclass
class Rows:
    """One tenant's rows in every state the scoped queries select by."""

    queued: list[Job] = field(default_factory=list)  # [0] dispatched at enqueue, [1:] not
    expired: Job | None = None  # running, lease already expired
    running: ClaimedJob | None = None  # running, live lease
    dead: Job | None = None
    completed: Job | None = None
    pending: list[OutboxMessage] = field(default_factory=list)  # outbox, channel "wa"
    sending_expired: OutboxMessage | None = None
    sending: OutboxMessage | None = None  # live lease
    outbox_dead: OutboxMessage | None = None


async def _claim_outbox_one(store: JobStore, channel: str, lease_s: float) -> OutboxMessage:
    [message] = await store.claim_outbox([channel], 1, "sender", lease_s)
    return message


async def _populate(store: JobStore, tenant: str) -> Rows:
    rows = Rows()
    rows.queued.append((await store.enqueue(EnqueueRequest(
        job_type="t:q", payload={}, tenant_id=tenant, dispatch_now=True))).job)
    assert rows.queued[0].dispatched_at is not None
    for _ in range(3):
        rows.queued.append(await enqueue(store, "t:q", tenant_id=tenant))
    rows.expired = (await claim_one(store, await enqueue(store, tenant_id=tenant), "w0", 0.0)).job
    rows.running = await claim_one(store, await enqueue(store, tenant_id=tenant), "w1", 30.0)
    dead = await claim_one(store, await enqueue(store, tenant_id=tenant), "w1")
    assert await store.finish_jobs([finish(dead, Outcome.DEAD)]) == {dead.id}
    rows.dead = await store.get_job(dead.id)
    done = await claim_one(store, await enqueue(store, tenant_id=tenant), "w1")
    replies = (reply(f"{tenant}-p1"), reply(f"{tenant}-p2"),
               reply(f"{tenant}-x", channel=f"x-{tenant}"),
               reply(f"{tenant}-y", channel=f"y-{tenant}"),
               reply(f"{tenant}-z", channel=f"z-{tenant}"))
    assert await store.finish_jobs([finish(done, Outcome.COMPLETED, replies=replies)]) == {done.id}
    rows.completed = await store.get_job(done.id)
    rows.sending_expired = await _claim_outbox_one(store, f"x-{tenant}", 0.0)
    rows.sending = await _claim_outbox_one(store, f"y-{tenant}", 30.0)
    failed = await _claim_outbox_one(store, f"z-{tenant}", 30.0)
    assert await store.fail_outbox(failed, "sender", "test")
    rows.outbox_dead = await store.get_outbox(failed.id)
    rows.pending = await store.list_outbox(OutboxFilter(tenant_id=tenant, channel="wa"))
    assert len(rows.pending) == 2
    return rows


async def _snapshot(store: JobStore, tenant: str) -> tuple[list[Job], list[OutboxMessage]]:
    jobs = await store.list_jobs(JobFilter(tenant_id=tenant, limit=500))
    return jobs, await store.list_outbox(OutboxFilter(tenant_id=tenant, limit=500))


def _sql(store: JobStore) -> SqlJobStore:
    """The scope is the SQL stores' (the router sets it on each); both backends are ones.
    Under the routed store (no routes), its home store's: every call goes there."""
    sql = store.home if isinstance(store, RoutedStore) else store
    assert isinstance(sql, SqlJobStore)
    return sql


def _ids(items: list[Job] | list[OutboxMessage]) -> set[int]:
    return {x.id for x in items}


async def _check_reads(store: JobStore, mine: Rows, other: Rows, tenant: str) -> None:
    assert other.dead is not None and mine.dead is not None
    assert await store.get_job(other.dead.id) is None
    assert await store.get_job(mine.dead.id) == mine.dead
    listed = await store.list_jobs(JobFilter(limit=500))
    assert listed and {j.tenant_id for j in listed} == {tenant}
    counts = await store.count_jobs_by_status()
    assert counts == {JobStatus.QUEUED: 4, JobStatus.RUNNING: 2, JobStatus.DEAD: 1,
                      JobStatus.COMPLETED: 1}
    [stats] = await store.queue_stats()
    assert (stats.queued, stats.running, stats.dead) == (4, 2, 1)
    assert await store.running_by_tenant() == {tenant: 2}
    assert other.sending is not None and mine.sending is not None
    assert await store.get_outbox(other.sending.id) is None
    assert await store.get_outbox(mine.sending.id) == mine.sending
    assert {m.tenant_id for m in await store.list_outbox(OutboxFilter(limit=500))} == {tenant}
    outbox = await store.outbox_stats()
    assert outbox.counts == {OutboxStatus.PENDING: 2, OutboxStatus.SENDING: 2,
                             OutboxStatus.DEAD: 1}


async def _check_dispatch_and_claims(
    store: JobStore, mine: Rows, other: Rows, tenant: str
) -> None:
    refs = await store.dispatch_due_jobs(["default"], 100)
    assert {r.job_id for r in refs} == _ids(mine.queued[1:])
    assert await store.next_due_in_s(["default"], undispatched_only=True) is None
    stale = await store.redispatch_stale_jobs({"default": 100}, -1.0)
    assert {r.job_id for r in stale} == _ids(mine.queued)
    # The tenant-limit claim paths (full_tenants, pick_*, claim_jobs_limited) ...
    store.tenant_limits = {A: 50, B: 50}
    got = await store.claim_jobs([other.queued[0].id, mine.queued[0].id], "w2", 30.0)
    assert [c.id for c in got] == [mine.queued[0].id]
    got = await store.claim_capped_backlog(["default"], 1, "w2", 30.0)
    assert [c.id for c in got] == [mine.queued[1].id]
    got = await store.claim_due_jobs(["default"], 1, "w2", 30.0)
    assert [c.id for c in got] == [mine.queued[2].id]
    # ... and the plain ones.
    store.tenant_limits = {}
    got = await store.claim_due_jobs(["default"], 100, "w2", 30.0)
    assert [c.id for c in got] == [mine.queued[3].id]
    assert await store.claim_jobs([j.id for j in other.queued], "w2", 30.0) == []
    assert await store.next_due_in_s(["default"], undispatched_only=False) is None
    assert await store.running_by_tenant() == {tenant: 6}


async def _check_leases_and_finishes(store: JobStore, mine: Rows, other: Rows) -> None:
    assert mine.expired is not None and mine.running is not None and other.running is not None
    reaped = await store.reap_expired_leases()
    assert [r.job_id for r in reaped.retried] + reaped.dead == [mine.expired.id]
    leases = await store.extend_leases(
        [Lease(c.id, c.fence, c.job.tenant_id) for c in (other.running, mine.running)], "w1", 30.0)
    assert [x.job_id for x in leases] == [mine.running.id]
    # Out of scope: reported as not applied, nothing written (no reply either).
    theirs = finish(other.running, Outcome.COMPLETED)
    assert await store.finish_jobs([theirs]) == set()
    with_reply = finish(other.running, Outcome.COMPLETED, replies=(reply("never"),))
    assert await store.finish_jobs([with_reply, finish(mine.running, Outcome.RETRY)]) == {
        mine.running.id}
    assert other.dead is not None and mine.dead is not None
    with pytest.raises(JobNotFound):
        await store.requeue_job(other.dead.id)
    with pytest.raises(JobNotFound):
        await store.cancel_job(other.queued[1].id)
    with pytest.raises(JobNotFound):
        await store.cancel_job(other.running.id)
    assert await store.requeue_dead_jobs(JobFilter(limit=100)) == [mine.dead.id]
    assert await store.count_prunable_jobs(JobStatus.COMPLETED, 0.0) == 1
    assert await store.prune_finished_jobs(JobStatus.COMPLETED, 0.0, 100) == 1


async def _check_outbox(store: JobStore, mine: Rows, other: Rows) -> None:
    claimed = await store.claim_outbox(["wa"], 100, "sender2", 30.0)
    assert _ids(claimed) == _ids(mine.pending)
    assert other.sending_expired is not None and mine.sending_expired is not None
    assert await store.reap_outbox_leases(max_attempts=5) == [mine.sending_expired.id]
    assert other.sending is not None and mine.sending is not None
    assert await store.complete_outbox(other.sending, "sender", "pm-1") is None
    assert await store.retry_outbox(other.sending, "sender", 1.0, "test") is False
    assert await store.fail_outbox(other.sending, "sender", "test") is False
    assert await store.complete_outbox(mine.sending, "sender", "pm-2") is not None
    assert other.outbox_dead is not None and mine.outbox_dead is not None
    assert await store.requeue_outbox(other.outbox_dead.id) is None
    requeued = await store.requeue_outbox(mine.outbox_dead.id)
    assert requeued is not None and requeued.status is OutboxStatus.PENDING


@pytest.mark.parametrize("kind", ["all_except", "only"])
async def test_scoped_store_never_touches_other_tenants(store: JobStore, kind: str) -> None:
    rows = {A: await _populate(store, A), B: await _populate(store, B)}
    # all_except({A}) serves B; only({A}) serves A.
    scope, tenant = ((TenantScope.all_except({A}), B) if kind == "all_except"
                     else (TenantScope.only({A}), A))
    hidden = B if tenant == A else A
    mine, other = rows[tenant], rows[hidden]
    before = await _snapshot(store, hidden)
    mine_before = await _snapshot(store, tenant)

    _sql(store).tenant_scope = scope
    await _check_reads(store, mine, other, tenant)
    await _check_dispatch_and_claims(store, mine, other, tenant)
    await _check_leases_and_finishes(store, mine, other)
    await _check_outbox(store, mine, other)
    assert await _snapshot(store, hidden) == ([], [])

    _sql(store).tenant_scope = ALL
    assert await _snapshot(store, hidden) == before
    assert await _snapshot(store, tenant) != mine_before
    # ALL sees both tenants again: the hidden tenant's due jobs are claimable.
    assert await store.next_due_in_s(["default"], undispatched_only=False) is not None
    got = await store.claim_jobs([j.id for j in other.queued], "w3", 30.0)
    assert _ids([c.job for c in got]) == _ids(other.queued)


async def test_all_scope_sees_every_tenant(store: JobStore) -> None:
    assert _sql(store).tenant_scope == ALL and ALL.is_all
    a = await enqueue(store, tenant_id=A)
    b = await enqueue(store, tenant_id=B)
    assert _ids(await store.list_jobs(JobFilter(limit=10))) == {a.id, b.id}
    assert await store.count_jobs_by_status() == {JobStatus.QUEUED: 2}
    got = await store.claim_due_jobs(["default"], 10, "w1", 30.0)
    assert sorted(c.id for c in got) == [a.id, b.id]
    # A scope naming no tenant with only() serves nothing at all.
    _sql(store).tenant_scope = TenantScope.only(())
    assert await store.running_by_tenant() == {}
    assert await store.get_job(a.id) is None
    _sql(store).tenant_scope = ALL
    assert await store.running_by_tenant() == {A: 1, B: 1}


def test_scope_membership() -> None:
    assert A in ALL and B in ALL
    assert A not in TenantScope.all_except({A}) and B in TenantScope.all_except({A})
    assert A in TenantScope.only({A}) and B not in TenantScope.only({A})
    assert TenantScope.only([A, B]) == TenantScope.only({B, A})
    assert TenantScope.only({A}) != TenantScope.all_except({A})
    assert not TenantScope.only(()).is_all and not TenantScope.all_except({A}).is_all
