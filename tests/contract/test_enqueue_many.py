"""JobStore contract: enqueue_many (one INSERT per batch, idempotency per item)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gochatd.errors import IdempotencyConflict
from gochatd.model import EnqueueRequest, JobFilter, JobStatus
from gochatd.store import JobStore
from tests.contract.helpers import CLOCK_SLACK_S, raw_sql, row_count


def _req(n: int, **kwargs: object) -> EnqueueRequest:
    payload = kwargs.pop("payload", {"n": n})
    return EnqueueRequest(job_type="batch:job", payload=payload, **kwargs)  # type: ignore[arg-type]


async def test_batch_inserts_every_item_in_order(store: JobStore, backend_url: str) -> None:
    requests = [
        _req(0),
        _req(1, queue="high", tenant_id="acme", priority=5, max_attempts=3),
        _req(2, delay_s=60.0),
        _req(3, traceparent="00-" + "a" * 32 + "-" + "b" * 16 + "-01"),
    ]
    results = await store.enqueue_many(requests)
    assert [r.created for r in results] == [True] * 4
    assert not any(r.conflict for r in results)
    ids = [r.job.id for r in results]
    assert ids == sorted(ids) and len(set(ids)) == 4, "ids follow item order"
    assert [r.job.payload for r in results] == [{"n": n} for n in range(4)]
    one = results[1].job
    assert (one.queue, one.tenant_id, one.priority, one.max_attempts) == ("high", "acme", 5, 3)
    assert results[3].job.traceparent == requests[3].traceparent
    assert all(r.job.status is JobStatus.QUEUED for r in results)
    # The delayed item is due a minute later by the database clock; the others are due now.
    delay = (results[2].job.scheduled_at - results[2].job.created_at).total_seconds()
    assert abs(delay - 60.0) <= CLOCK_SLACK_S
    assert results[0].job.scheduled_at <= results[0].job.created_at + timedelta(
        seconds=CLOCK_SLACK_S)
    for result in results:
        assert await store.get_job(result.job.id) == result.job
    assert await row_count(backend_url) == 4


async def test_empty_batch_writes_nothing(store: JobStore, backend_url: str) -> None:
    assert await store.enqueue_many([]) == []
    assert await row_count(backend_url) == 0


async def test_scheduled_at_and_dispatch_now(store: JobStore) -> None:
    at = datetime(2020, 1, 1, tzinfo=UTC)
    future = datetime.now(UTC) + timedelta(hours=1)
    results = await store.enqueue_many([
        _req(0, scheduled_at=at, dispatch_now=True),
        _req(1, scheduled_at=future, dispatch_now=True),
    ])
    past, later = results[0].job, results[1].job
    assert past.scheduled_at == at
    assert past.dispatched_at is not None, "due now: marked dispatched for the client's XADD"
    assert abs((later.scheduled_at - future).total_seconds()) < 0.001
    assert later.dispatched_at is None, "not due: the scheduler dispatches it later"


async def test_repeat_within_a_batch_returns_the_first(store: JobStore, backend_url: str) -> None:
    results = await store.enqueue_many([
        _req(0, idempotency_key="k"),
        _req(1),
        _req(0, idempotency_key="k", payload={"n": 0}),
    ])
    assert [(r.created, r.conflict) for r in results] == [(True, False), (True, False),
                                                          (False, False)]
    assert results[2].job == results[0].job
    assert await row_count(backend_url) == 2


async def test_repeat_across_batches_returns_the_existing(
    store: JobStore, backend_url: str
) -> None:
    single = await store.enqueue(_req(9, idempotency_key="single"))
    first = await store.enqueue_many([_req(n, idempotency_key=f"k{n}") for n in range(3)])
    # Key order inside the payload is not part of its identity.
    again = await store.enqueue_many([
        _req(7),
        _req(2, idempotency_key="k2"),
        _req(9, idempotency_key="single"),
        _req(0, idempotency_key="k0", payload={"n": 0}),
    ])
    assert [r.created for r in again] == [True, False, False, False]
    assert [r.job.id for r in again[1:]] == [first[2].job.id, single.job.id, first[0].job.id]
    assert again[0].job.id > first[2].job.id
    assert await row_count(backend_url) == 5


async def test_same_key_in_another_tenant_is_another_job(store: JobStore) -> None:
    results = await store.enqueue_many([
        _req(0, idempotency_key="k", tenant_id="t1"),
        _req(1, idempotency_key="k", tenant_id="t2"),
    ])
    assert [r.created for r in results] == [True, True]
    assert results[0].job.id != results[1].job.id


async def test_conflicts_are_reported_per_item(store: JobStore, backend_url: str) -> None:
    held = await store.enqueue(_req(0, idempotency_key="taken"))
    results = await store.enqueue_many([
        _req(1),
        _req(5, idempotency_key="taken"),  # same key, different payload
        _req(2, idempotency_key="fresh"),
        EnqueueRequest(job_type="other:type", payload={"n": 2}, idempotency_key="fresh"),
    ])
    assert [(r.created, r.conflict) for r in results] == [
        (True, False), (False, True), (True, False), (False, True),
    ]
    assert results[1].job == held.job, "a conflict returns the row holding the key"
    assert results[3].job.id == results[2].job.id
    assert await row_count(backend_url) == 3
    unchanged = await store.get_job(held.job.id)
    assert unchanged == held.job


async def test_raise_on_conflict_writes_nothing(store: JobStore, backend_url: str) -> None:
    held = await store.enqueue(_req(0, idempotency_key="taken"))
    with pytest.raises(IdempotencyConflict) as info:
        await store.enqueue_many(
            [_req(1), _req(2, idempotency_key="new"), _req(5, idempotency_key="taken")],
            raise_on_conflict=True,
        )
    assert info.value.existing_id == held.job.id
    assert info.value.index == 2
    assert "requests[2]" in str(info.value)
    assert await row_count(backend_url) == 1, "the batch was rolled back"
    # Within the batch too: the second item clashes with the first, so neither is written.
    with pytest.raises(IdempotencyConflict) as info:
        await store.enqueue_many(
            [_req(1, idempotency_key="dup"), _req(2, idempotency_key="dup")],
            raise_on_conflict=True,
        )
    assert info.value.index == 1
    assert await row_count(backend_url) == 1
    # A matching repeat is not a conflict.
    results = await store.enqueue_many([_req(0, idempotency_key="taken")], raise_on_conflict=True)
    assert (results[0].created, results[0].job.id) == (False, held.job.id)


async def test_key_is_usable_again_after_its_row_is_gone(store: JobStore, backend_url: str) -> None:
    first = await store.enqueue_many([_req(0, idempotency_key="k")])
    await raw_sql(backend_url, "DELETE FROM background_jobs WHERE id = ?", [first[0].job.id])
    again = await store.enqueue_many([_req(1, idempotency_key="k")], raise_on_conflict=True)
    assert again[0].created and again[0].job.id != first[0].job.id


async def test_large_batch(store: JobStore, backend_url: str) -> None:
    n = 5000
    requests = [
        _req(i, queue=("high", "low")[i % 2], idempotency_key=f"big-{i}" if i % 3 == 0 else None)
        for i in range(n)
    ]
    results = await store.enqueue_many(requests)
    assert len(results) == n and all(r.created for r in results)
    ids = [r.job.id for r in results]
    assert ids == sorted(ids) and len(set(ids)) == n
    assert [r.job.payload["n"] for r in results] == list(range(n))
    assert await row_count(backend_url) == n
    listed = await store.list_jobs(JobFilter(queue="low", limit=n))
    assert len(listed) == n // 2
    # The whole batch again: every keyed item is found, every unkeyed one is new.
    again = await store.enqueue_many(requests)
    keyed = [i for i in range(n) if i % 3 == 0]
    assert [again[i].job.id for i in keyed] == [ids[i] for i in keyed]
    assert sum(r.created for r in again) == n - len(keyed)
    assert await row_count(backend_url) == 2 * n - len(keyed)
