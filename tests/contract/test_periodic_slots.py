"""JobStore contract: periodic-slot records. Only the caller that moves a slot record
forward enqueues, in the same transaction; a recorded slot is never enqueued again, even
after its job is gone. Every backend."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import trio

from gochatd.model import EnqueueRequest, JobStatus
from gochatd.store import JobStore
from tests.contract.helpers import raw_sql, row_count, second_store

SLOT = datetime(2026, 1, 1, tzinfo=UTC)


def name() -> str:
    return f"periodic:contract_{uuid.uuid4().hex[:8]}"


def request(job_type: str, slot: datetime) -> EnqueueRequest:
    return EnqueueRequest(job_type=job_type, payload={"p": 1}, queue="scheduled_jobs",
                          idempotency_key=f"{job_type}:{slot.isoformat()}", scheduled_at=slot)


async def test_database_now_is_the_database_clock(store: JobStore) -> None:
    before = datetime.now(UTC)
    now = await store.database_now()
    assert now.tzinfo is not None
    assert abs((now - before).total_seconds()) < 5  # same host in the tests


async def test_the_first_claim_records_and_enqueues(store: JobStore, backend_url: str) -> None:
    job_type = name()
    claim = await store.claim_periodic_slot(job_type, SLOT, request(job_type, SLOT))
    assert claim.claimed and claim.job is not None
    assert claim.job.job_type == job_type
    assert claim.job.queue == "scheduled_jobs"
    assert claim.job.scheduled_at == SLOT
    assert claim.job.status is JobStatus.QUEUED
    assert (await store.periodic_slots())[job_type] == SLOT


async def test_a_recorded_or_older_slot_is_not_claimed(store: JobStore, backend_url: str) -> None:
    job_type = name()
    await store.claim_periodic_slot(job_type, SLOT, request(job_type, SLOT))
    before = await row_count(backend_url)
    again = await store.claim_periodic_slot(job_type, SLOT, request(job_type, SLOT))
    older = SLOT - timedelta(days=1)
    old = await store.claim_periodic_slot(job_type, older, request(job_type, older))
    assert not again.claimed and again.job is None
    assert not old.claimed and old.job is None
    assert await row_count(backend_url) == before
    assert (await store.periodic_slots())[job_type] == SLOT


async def test_a_pruned_job_is_not_enqueued_again(store: JobStore, backend_url: str) -> None:
    job_type = name()
    claim = await store.claim_periodic_slot(job_type, SLOT, request(job_type, SLOT))
    assert claim.job is not None
    await raw_sql(backend_url, "DELETE FROM background_jobs WHERE id = ?", [claim.job.id])
    again = await store.claim_periodic_slot(job_type, SLOT, request(job_type, SLOT))
    assert not again.claimed
    rows = await raw_sql(backend_url, "SELECT count(*) FROM background_jobs WHERE job_type = ?",
                         [job_type])
    assert rows[0][0] == 0


async def test_a_later_slot_moves_the_record(store: JobStore) -> None:
    job_type = name()
    await store.claim_periodic_slot(job_type, SLOT, request(job_type, SLOT))
    later = SLOT + timedelta(minutes=5)
    claim = await store.claim_periodic_slot(job_type, later, request(job_type, later))
    assert claim.claimed and claim.job is not None and claim.job.scheduled_at == later
    assert (await store.periodic_slots())[job_type] == later


async def test_a_skipped_slot_is_recorded_without_a_job(store: JobStore, backend_url: str) -> None:
    job_type = name()
    before = await row_count(backend_url)
    claim = await store.claim_periodic_slot(job_type, SLOT, None)
    assert claim.claimed and claim.job is None
    assert await row_count(backend_url) == before
    assert (await store.periodic_slots())[job_type] == SLOT


async def test_an_existing_key_is_not_inserted_twice(store: JobStore, backend_url: str) -> None:
    """The slot record was lost (restored backup) but the job is there: no second job."""
    job_type = name()
    first = await store.claim_periodic_slot(job_type, SLOT, request(job_type, SLOT))
    assert first.job is not None
    await raw_sql(backend_url, "DELETE FROM gochatd_periodic_slots WHERE name = ?", [job_type])
    claim = await store.claim_periodic_slot(job_type, SLOT, request(job_type, SLOT))
    assert claim.claimed and claim.job is None
    rows = await raw_sql(backend_url, "SELECT id FROM background_jobs WHERE job_type = ?",
                         [job_type])
    assert rows == [(first.job.id,)]


async def test_concurrent_claims_of_one_slot_enqueue_once(
    store: JobStore, backend_url: str
) -> None:
    job_type = name()
    results: list[bool] = []
    async with second_store(backend_url) as other, trio.open_nursery() as nursery:
        for s in (store, other) * 4:

            async def claim(s: JobStore = s) -> None:
                outcome = await s.claim_periodic_slot(job_type, SLOT, request(job_type, SLOT))
                results.append(outcome.claimed)

            nursery.start_soon(claim)
    assert sorted(results) == [False] * 7 + [True]
    rows = await raw_sql(backend_url, "SELECT count(*) FROM background_jobs WHERE job_type = ?",
                         [job_type])
    assert rows[0][0] == 1
