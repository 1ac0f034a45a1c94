"""JobStore contract: enqueue, idempotency, foreign producers' SQL, schema, listing."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from gochatd.errors import IdempotencyConflict, InvalidJob
from gochatd.model import EnqueueRequest, JobFilter, JobStatus, Outcome
from gochatd.store import JobStore, open_store
from gochatd.store.queries import load_migrations
from tests.contract.helpers import (
    CLOCK_SLACK_S,
    claim_one,
    enqueue,
    finish,
    is_postgres,
    raw_sql,
    refetch,
    row_count,
)
from tests.support.wait import wait_until

# -- enqueue ---------------------------------------------------------------------------------


async def test_enqueue_defaults(store: JobStore) -> None:
    result = await store.enqueue(EnqueueRequest(job_type="mail:send", payload={"to": "a"}))
    job = result.job
    assert result.created is True
    assert job.id > 0
    assert job.status is JobStatus.QUEUED
    assert job.attempts == 0
    assert job.fence == 0
    assert job.max_attempts == 25
    assert job.tenant_id == "default"
    assert job.queue == "default"
    assert job.priority == 0
    assert job.payload == {"to": "a"}
    assert job.idempotency_key is None
    assert job.locked_by is None and job.lease_expires_at is None
    assert job.completed_at is None and job.failed_at is None and job.dispatched_at is None
    assert job.cancel_requested is False
    assert job.scheduled_at.tzinfo is not None
    assert await store.get_job(job.id) == job
    due_in = await store.next_due_in_s(["default"], False)
    assert due_in is not None and due_in <= 0.0


async def test_enqueue_keeps_given_fields(store: JobStore) -> None:
    job = await enqueue(
        store, "report:build", payload={"n": 1, "s": "é"}, queue="low-2", tenant_id="acme",
        max_attempts=3, priority=7, traceparent="00-abc-def-01",
    )
    got = await store.get_job(job.id)
    assert got is not None
    assert (got.job_type, got.queue, got.tenant_id, got.max_attempts, got.priority) == (
        "report:build", "low-2", "acme", 3, 7,
    )
    assert got.payload == {"n": 1, "s": "é"}
    assert got.traceparent == "00-abc-def-01"


async def test_delayed_job_is_not_claimable_until_due(store: JobStore) -> None:
    job = await enqueue(store, delay_s=0.4)
    due_in = await store.next_due_in_s(["default"], False)
    assert due_in is not None and 0.0 < due_in <= 0.4 + CLOCK_SLACK_S
    assert await store.claim_jobs([job.id], "w1", 30.0) == []
    assert await store.claim_due_jobs(["default"], 10, "w1", 30.0) == []
    assert await store.dispatch_due_jobs(["default"], 10) == []
    unchanged = await refetch(store, job)
    assert unchanged == job

    async def due() -> bool:
        left = await store.next_due_in_s(["default"], False)
        return left is not None and left <= 0.0

    await wait_until(due, timeout_s=5.0, what="delayed job due")
    claimed = await store.claim_due_jobs(["default"], 10, "w1", 30.0)
    assert [c.id for c in claimed] == [job.id]


async def test_long_delay_is_reported_by_next_due(store: JobStore) -> None:
    await enqueue(store, delay_s=3600.0)
    due_in = await store.next_due_in_s(["default"], False)
    assert due_in is not None and 3590.0 < due_in <= 3600.0 + CLOCK_SLACK_S
    assert await store.next_due_in_s(["other"], False) is None


async def test_scheduled_at_in_the_past_is_due(store: JobStore) -> None:
    past = datetime.now(UTC) - timedelta(hours=1)
    job = await enqueue(store, scheduled_at=past)
    assert abs((job.scheduled_at - past).total_seconds()) < 0.01
    claimed = await store.claim_jobs([job.id], "w1", 30.0)
    assert [c.id for c in claimed] == [job.id]


async def test_scheduled_at_in_the_future_is_not_due(store: JobStore) -> None:
    job = await enqueue(store, scheduled_at=datetime.now(UTC) + timedelta(hours=1))
    assert await store.claim_jobs([job.id], "w1", 30.0) == []
    due_in = await store.next_due_in_s(["default"], False)
    assert due_in is not None and 3500.0 < due_in <= 3600.0 + CLOCK_SLACK_S


async def test_enqueue_rejects_invalid_jobs_and_writes_nothing(
    store: JobStore, backend_url: str
) -> None:
    for bad in (
        EnqueueRequest(job_type="t", payload={}, queue="bad queue"),
        EnqueueRequest(job_type="t", payload={}, queue=""),
        EnqueueRequest(job_type="", payload={}),
        EnqueueRequest(job_type="t", payload={}, max_attempts=0),
        EnqueueRequest(job_type="t", payload={}, max_attempts=1001),
        EnqueueRequest(job_type="t", payload={}, tenant_id=""),
    ):
        with pytest.raises(InvalidJob):
            await store.enqueue(bad)
    assert await row_count(backend_url) == 0


# -- idempotency -----------------------------------------------------------------------------


async def test_idempotent_enqueue_returns_the_same_job(store: JobStore, backend_url: str) -> None:
    req = EnqueueRequest(job_type="t", payload={"a": 1, "b": [1, 2]}, idempotency_key="k1")
    first = await store.enqueue(req)
    assert first.created is True
    again = await store.enqueue(req)
    assert again.created is False
    assert again.job.id == first.job.id
    # Key order is not part of the payload's identity.
    reordered = EnqueueRequest(job_type="t", payload={"b": [1, 2], "a": 1}, idempotency_key="k1")
    third = await store.enqueue(reordered)
    assert (third.created, third.job.id) == (False, first.job.id)
    assert await row_count(backend_url) == 1


async def test_idempotent_hit_after_the_job_ran(store: JobStore) -> None:
    req = EnqueueRequest(job_type="t", payload={"a": 1}, idempotency_key="k-ran")
    job = (await store.enqueue(req)).job
    claimed = await claim_one(store, job, "w1")
    assert await store.finish_jobs([finish(claimed, Outcome.COMPLETED)]) == {job.id}
    again = await store.enqueue(req)
    assert again.created is False
    assert again.job.id == job.id
    assert again.job.status is JobStatus.COMPLETED


async def test_idempotency_conflict_writes_nothing(store: JobStore, backend_url: str) -> None:
    first = await store.enqueue(EnqueueRequest(job_type="t", payload={"a": 1}, idempotency_key="k"))
    for clash in (
        EnqueueRequest(job_type="t", payload={"a": 2}, idempotency_key="k"),
        EnqueueRequest(job_type="other", payload={"a": 1}, idempotency_key="k"),
    ):
        with pytest.raises(IdempotencyConflict) as info:
            await store.enqueue(clash)
        assert info.value.existing_id == first.job.id
    assert await row_count(backend_url) == 1
    assert await store.get_job(first.job.id) == first.job


async def test_same_key_in_another_tenant_is_another_job(
    store: JobStore, backend_url: str
) -> None:
    a = await store.enqueue(
        EnqueueRequest(job_type="t", payload={"a": 1}, idempotency_key="k", tenant_id="t1")
    )
    b = await store.enqueue(
        EnqueueRequest(job_type="t", payload={"a": 2}, idempotency_key="k", tenant_id="t2")
    )
    assert a.created and b.created
    assert a.job.id != b.job.id
    assert (b.job.tenant_id, b.job.payload) == ("t2", {"a": 2})
    assert await row_count(backend_url) == 2


async def test_no_key_means_no_deduplication(store: JobStore, backend_url: str) -> None:
    req = EnqueueRequest(job_type="t", payload={"a": 1})
    one, two = await store.enqueue(req), await store.enqueue(req)
    assert one.created and two.created and one.job.id != two.job.id
    assert await row_count(backend_url) == 2


# -- foreign producers: the wire contract ----------------------------------------------------


async def test_foreign_minimal_insert_gets_defaults_and_is_claimable(
    store: JobStore, backend_url: str
) -> None:
    await raw_sql(backend_url, "INSERT INTO background_jobs (job_type) VALUES (?)", ["bare"])
    await raw_sql(
        backend_url,
        "INSERT INTO background_jobs (job_type, queue, payload) VALUES (?, ?, ?)",
        ["foreign:job", "high", '{"x": [1, 2], "y": "z"}'],
    )
    jobs = await store.list_jobs(JobFilter())
    assert [j.job_type for j in jobs] == ["bare", "foreign:job"]
    bare, foreign = jobs
    assert bare.queue == "default" and bare.payload == {}
    assert foreign.queue == "high" and foreign.payload == {"x": [1, 2], "y": "z"}
    for job in jobs:
        assert job.status is JobStatus.QUEUED
        assert (job.attempts, job.fence, job.max_attempts, job.priority) == (0, 0, 25, 0)
        assert job.tenant_id == "default"
        assert job.idempotency_key is None and job.dispatched_at is None
        assert job.cancel_requested is False
    due_in = await store.next_due_in_s(["high"], True)
    assert due_in is not None and due_in <= 0.0
    claimed = await store.claim_due_jobs(["high", "default"], 10, "w1", 30.0)
    assert sorted(c.id for c in claimed) == [bare.id, foreign.id]
    assert {c.job.payload["y"] for c in claimed if c.id == foreign.id} == {"z"}
    assert all(c.fence == 1 and c.job.attempts == 1 for c in claimed)


@pytest.mark.parametrize(
    ("columns", "values"),
    [
        pytest.param("job_type, payload", ["t", None], id="null-payload"),
        pytest.param("job_type, payload", ["t", "[1]"], id="array-payload"),
        pytest.param("job_type, payload", ["t", '"text"'], id="string-payload"),
        pytest.param("job_type, payload", ["t", "not json"], id="invalid-json-payload"),
        pytest.param("job_type, max_attempts", ["t", -1], id="negative-max-attempts"),
        pytest.param("job_type, max_attempts", ["t", 0], id="zero-max-attempts"),
        pytest.param("job_type, queue", ["t", "my queue"], id="queue-with-space"),
        pytest.param("job_type, queue", ["t", "q/1"], id="queue-with-slash"),
        pytest.param("job_type, queue", ["t", "q" * 65], id="queue-too-long"),
        pytest.param("job_type, status", ["t", "pending"], id="unknown-status"),
        pytest.param("job_type, attempts", ["t", -1], id="negative-attempts"),
        pytest.param("job_type", [None], id="null-job-type"),
        pytest.param("job_type", [""], id="empty-job-type"),
        pytest.param("job_type, tenant_id", ["t", ""], id="empty-tenant"),
        pytest.param("job_type, scheduled_at", ["t", "not-a-time"], id="scheduled-not-a-time"),
    ],
)
async def test_foreign_invalid_insert_is_rejected(
    store: JobStore, backend_url: str, columns: str, values: list[object]
) -> None:
    marks = ", ".join("?" for _ in values)
    with pytest.raises((psycopg.Error, sqlite3.Error)):
        await raw_sql(
            backend_url, f"INSERT INTO background_jobs ({columns}) VALUES ({marks})", values
        )
    assert await row_count(backend_url) == 0
    assert await store.list_jobs(JobFilter()) == []


async def test_foreign_far_future_schedule_is_accepted_and_not_due(
    store: JobStore, backend_url: str
) -> None:
    far = datetime(9999, 12, 31, tzinfo=UTC)
    # PostgreSQL takes timestamptz text; SQLite takes epoch seconds (an integer here).
    value: object = far.isoformat() if is_postgres(backend_url) else int(far.timestamp())
    await raw_sql(
        backend_url,
        "INSERT INTO background_jobs (job_type, scheduled_at) VALUES (?, ?)",
        ["t", value],
    )
    [job] = await store.list_jobs(JobFilter())
    assert job.scheduled_at == far
    for undispatched_only in (False, True):
        due_in = await store.next_due_in_s(["default"], undispatched_only)
        assert due_in is not None and due_in > 1e11
    assert await store.claim_due_jobs(["default"], 10, "w1", 30.0) == []
    assert await store.claim_jobs([job.id], "w1", 30.0) == []
    assert await store.dispatch_due_jobs(["default"], 10) == []
    assert await store.get_job(job.id) == job


# -- schema ----------------------------------------------------------------------------------


async def test_migrate_twice_is_a_noop(store: JobStore) -> None:
    newest = max(m.version for m in load_migrations(store.dialect))
    assert newest >= 1
    assert await store.migrate() == []
    assert await store.schema_version() == newest
    assert await store.migrate() == []


@asynccontextmanager
async def _empty_database(backend_url: str, tmp_path: Path) -> AsyncIterator[str]:
    if not is_postgres(backend_url):
        yield f"sqlite:///{tmp_path / 'fresh.db'}"
        return
    name = f"gochatd_fresh_{uuid.uuid4().hex[:10]}"
    base = backend_url.rpartition("/")[0]
    await raw_sql(backend_url, f'CREATE DATABASE "{name}"')
    try:
        yield f"{base}/{name}"
    finally:
        await raw_sql(backend_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_migrate_fresh_database(store: JobStore, backend_url: str, tmp_path: Path) -> None:
    migrations = load_migrations(store.dialect)
    async with _empty_database(backend_url, tmp_path) as url:
        fresh = open_store(url)
        await fresh.open()
        try:
            assert await fresh.schema_version() == 0
            applied = await fresh.migrate()
            assert applied == [f"{m.version:04d}_{m.name}" for m in migrations]
            assert await fresh.schema_version() == migrations[-1].version
            assert await fresh.migrate() == []
            job = await enqueue(fresh)
            assert await fresh.get_job(job.id) == job
        finally:
            await fresh.close()


# -- listing ---------------------------------------------------------------------------------


async def test_list_jobs_filters(store: JobStore) -> None:
    a1 = await enqueue(store, "type:a", queue="q1", tenant_id="t1")
    a2 = await enqueue(store, "type:a", queue="q2", tenant_id="t2")
    b1 = await enqueue(store, "type:b", queue="q1", tenant_id="t2")
    b2 = await enqueue(store, "type:b", queue="q2", tenant_id="t1")
    c1 = await enqueue(store, "type:c", queue="q1", tenant_id="t1")
    claimed = await claim_one(store, b1, "w1")
    assert await store.finish_jobs([finish(claimed, Outcome.COMPLETED)]) == {b1.id}

    async def ids(**kwargs: object) -> list[int]:
        return [j.id for j in await store.list_jobs(JobFilter(**kwargs))]  # type: ignore[arg-type]

    assert await ids() == [a1.id, a2.id, b1.id, b2.id, c1.id]
    assert await ids(status=JobStatus.COMPLETED) == [b1.id]
    assert await ids(status=JobStatus.QUEUED) == [a1.id, a2.id, b2.id, c1.id]
    assert await ids(status=JobStatus.DEAD) == []
    assert await ids(queue="q1") == [a1.id, b1.id, c1.id]
    assert await ids(tenant_id="t2") == [a2.id, b1.id]
    assert await ids(job_type="type:b") == [b1.id, b2.id]
    assert await ids(queue="q1", tenant_id="t1", job_type="type:c") == [c1.id]
    assert await ids(queue="q2", status=JobStatus.COMPLETED) == []
    assert await ids(limit=2) == [a1.id, a2.id]
    assert await ids(after_id=a2.id) == [b1.id, b2.id, c1.id]
    assert await ids(after_id=a2.id, limit=1) == [b1.id]
    assert await ids(after_id=c1.id) == []
    assert await ids(queue="nope") == []
    listed = await store.list_jobs(JobFilter(job_type="type:c"))
    assert listed == [await store.get_job(c1.id)]


async def test_count_jobs_by_status(store: JobStore) -> None:
    assert await store.count_jobs_by_status() == {}
    jobs = [await enqueue(store) for _ in range(5)]
    done = await claim_one(store, jobs[0], "w1")
    assert await store.finish_jobs([finish(done, Outcome.COMPLETED)]) == {jobs[0].id}
    await claim_one(store, jobs[1], "w1")
    await store.cancel_job(jobs[2].id)
    assert await store.count_jobs_by_status() == {
        JobStatus.QUEUED: 2,
        JobStatus.RUNNING: 1,
        JobStatus.COMPLETED: 1,
        JobStatus.CANCELLED: 1,
    }


async def test_get_unknown_job_is_none(store: JobStore) -> None:
    assert await store.get_job(987654) is None
