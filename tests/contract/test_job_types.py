"""JobStore contract: job types' published defaults (gochatd_job_types, docs/job-types.md).
A daemon's publication is a last-writer-wins upsert that reports what it replaced; every
enqueue that leaves queue or max_attempts out gets the published values in its own INSERT,
an explicit value always wins, and an unpublished type gets 'default' and 25. Plain SQL:
on PostgreSQL a trigger fills the columns an INSERT leaves out; SQLite keeps the column
defaults, and the documented INSERT ... SELECT reads the table itself. Every backend."""

from __future__ import annotations

from datetime import UTC, datetime

from gochatd.model import EnqueueRequest
from gochatd.store import JobStore
from gochatd.worker.job_types import JobTypeDefaults
from tests.contract.helpers import enqueue, is_postgres, raw_sql, second_store

TYPED = JobTypeDefaults("mail:typed", queue="low", max_attempts=2, timeout_s=1.5)
OTHER = JobTypeDefaults("mail:other", queue="bulk", max_attempts=7)

#: docs/job-types.md: a plain INSERT on SQLite that wants the published values.
SQLITE_DOC_INSERT = """
INSERT INTO background_jobs (job_type, payload, queue, max_attempts)
SELECT ?, '{}',
       COALESCE((SELECT queue FROM gochatd_job_types WHERE job_type = ?), 'default'),
       COALESCE((SELECT max_attempts FROM gochatd_job_types WHERE job_type = ?), 25)
RETURNING queue, max_attempts
"""


async def test_publish_and_list(store: JobStore) -> None:
    assert await store.list_job_types() == []
    assert await store.publish_job_types([], "w1") == []
    before = await store.database_now()
    assert await store.publish_job_types([TYPED, OTHER], "w1") == []
    listed = await store.list_job_types()
    assert [t.defaults for t in listed] == [OTHER, TYPED]  # by name
    assert {t.published_by for t in listed} == {"w1"}
    for row in listed:
        assert row.updated_at.tzinfo is not None
        assert abs((row.updated_at - before).total_seconds()) < 5
    assert listed[1].to_dict() == {
        "job_type": "mail:typed", "queue": "low", "max_attempts": 2, "timeout_s": 1.5,
        "updated_at": listed[1].updated_at.isoformat(), "published_by": "w1"}


async def test_the_last_writer_wins_and_a_change_is_reported(
    store: JobStore, backend_url: str
) -> None:
    await store.publish_job_types([TYPED, OTHER], "w1")
    # The same values again (a restart): nothing to report, the row names the last publisher.
    assert await store.publish_job_types([TYPED], "w2") == []
    disagreeing = JobTypeDefaults("mail:typed", queue="high", max_attempts=2, timeout_s=None)
    async with second_store(backend_url) as other:
        changes = await other.publish_job_types([disagreeing, OTHER], "w3")
    assert len(changes) == 1
    [change] = changes
    assert change.before.defaults == TYPED and change.before.published_by == "w2"
    assert change.after == disagreeing
    rows = {t.job_type: t for t in await store.list_job_types()}
    assert rows["mail:typed"].defaults == disagreeing
    assert rows["mail:typed"].published_by == "w3"
    assert rows["mail:other"].defaults == OTHER


async def test_enqueue_takes_the_published_defaults(store: JobStore) -> None:
    unknown = await enqueue(store, "mail:unpublished")
    assert (unknown.queue, unknown.max_attempts) == ("default", 25)
    await store.publish_job_types([TYPED], "w1")

    job = await enqueue(store, "mail:typed")
    assert (job.queue, job.max_attempts) == ("low", 2)
    assert await store.get_job(job.id) == job  # the returned row is the stored one
    # An explicit value wins, column by column.
    job = await enqueue(store, "mail:typed", queue="high")
    assert (job.queue, job.max_attempts) == ("high", 2)
    job = await enqueue(store, "mail:typed", max_attempts=9)
    assert (job.queue, job.max_attempts) == ("low", 9)
    job = await enqueue(store, "mail:typed", queue="default", max_attempts=25)
    assert (job.queue, job.max_attempts) == ("default", 25)
    # A new publication applies to the next enqueue at once (nothing is cached).
    await store.publish_job_types([JobTypeDefaults("mail:typed", "later", 4)], "w2")
    job = await enqueue(store, "mail:typed")
    assert (job.queue, job.max_attempts) == ("later", 4)


async def test_enqueue_many_takes_the_published_defaults(store: JobStore) -> None:
    await store.publish_job_types([TYPED, OTHER], "w1")
    results = await store.enqueue_many([
        EnqueueRequest("mail:typed", {"n": 1}),
        EnqueueRequest("mail:other", {"n": 2}),
        EnqueueRequest("mail:typed", {"n": 3}, queue="high", max_attempts=3),
        EnqueueRequest("mail:unpublished", {"n": 4}),
        EnqueueRequest("mail:typed", {"n": 5}, idempotency_key="once"),
    ])
    got = [(r.job.queue, r.job.max_attempts) for r in results]
    assert got == [("low", 2), ("bulk", 7), ("high", 3), ("default", 25), ("low", 2)]
    for result in results:
        assert await store.get_job(result.job.id) == result.job
    # The same key again finds the row it wrote.
    [again] = await store.enqueue_many([EnqueueRequest("mail:typed", {"n": 5},
                                                       idempotency_key="once")])
    assert not again.created and again.job == results[4].job


async def test_a_periodic_slot_takes_the_published_defaults(store: JobStore) -> None:
    await store.publish_job_types([TYPED], "w1")
    slot = datetime(2026, 1, 1, tzinfo=UTC)
    claim = await store.claim_periodic_slot(
        "periodic:typed", slot, EnqueueRequest("mail:typed", {}, scheduled_at=slot,
                                               idempotency_key="periodic:typed:1"))
    assert claim.job is not None
    assert (claim.job.queue, claim.job.max_attempts) == ("low", 2)


async def test_plain_sql_inserts(store: JobStore, backend_url: str) -> None:
    await store.publish_job_types([TYPED], "w1")
    insert = "INSERT INTO background_jobs (job_type, payload) VALUES (?, '{}') RETURNING id"
    [(typed_id,)] = await raw_sql(backend_url, insert, ["mail:typed"])
    [(unknown_id,)] = await raw_sql(backend_url, insert, ["mail:unpublished"])
    [(explicit_id,)] = await raw_sql(
        backend_url, "INSERT INTO background_jobs (job_type, payload, queue, max_attempts) "
        "VALUES ('mail:typed', '{}', 'default', 25) RETURNING id")
    typed, unknown, explicit = [await store.get_job(i) for i in (typed_id, unknown_id,
                                                                    explicit_id)]
    assert unknown is not None and (unknown.queue, unknown.max_attempts) == ("default", 25)
    assert explicit is not None and (explicit.queue, explicit.max_attempts) == ("default", 25)
    assert typed is not None
    if is_postgres(backend_url):
        # The trigger fills what the INSERT left out.
        assert (typed.queue, typed.max_attempts) == ("low", 2)
    else:
        # SQLite keeps the column defaults (docs/job-types.md) ...
        assert (typed.queue, typed.max_attempts) == ("default", 25)
    # ... and the documented INSERT ... SELECT reads the published values on either.
    rows = await raw_sql(backend_url, SQLITE_DOC_INSERT, ["mail:typed"] * 3)
    assert rows == [("low", 2)]
    rows = await raw_sql(backend_url, SQLITE_DOC_INSERT, ["mail:unpublished"] * 3)
    assert rows == [("default", 25)]

