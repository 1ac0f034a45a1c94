"""JobStore contract: unique jobs (docs/unique-jobs.md). A second enqueue of a unique key
returns the holder while it is queued, retrying or running, or completed within its
unique_for_s window (the database clock decides); after that, or once it is dead or
cancelled, a new job is created. Racing producers get one job."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import trio

from gochatd.client.validation import validate_enqueue
from gochatd.errors import IdempotencyConflict
from gochatd.model import EnqueueRequest, EnqueueResult, JobStatus, Outcome
from gochatd.store import JobStore
from tests.contract.helpers import (
    claim_one,
    finish,
    is_postgres,
    raw_sql,
    second_store,
)
from tests.support.wait import wait_until


def unique(job_type: str = "report:build", payload: dict[str, Any] | None = None,
           **fields: Any) -> EnqueueRequest:
    """A request as the client builds it (the default key derived when left out)."""
    base: dict[str, Any] = {
        "queue": None, "tenant_id": "default", "idempotency_key": None, "scheduled_at": None,
        "delay_s": None, "max_attempts": None, "priority": 0, "traceparent": None}
    return validate_enqueue(job_type, payload if payload is not None else {"account": 7},
                            **{**base, **fields}, max_payload_bytes=65536)


async def _holders(url: str, key: str) -> list[int]:
    ph = "%s" if is_postgres(url) else "?"
    rows = await raw_sql(url, "SELECT id FROM background_jobs WHERE tenant_id = 'default' "
                              f"AND unique_key = {ph}", (key,))
    return [int(r[0]) for r in rows]


async def test_a_duplicate_while_queued_returns_the_existing_job(
    store: JobStore, backend_url: str
) -> None:
    first = await store.enqueue(unique(unique_key="acct-7"))
    again = await store.enqueue(unique(payload={"account": 7, "other": 1}, unique_key="acct-7"))
    assert first.created and not again.created and not again.conflict
    assert again.job.id == first.job.id and again.job.payload == {"account": 7}
    other_tenant = await store.enqueue(unique(unique_key="acct-7", tenant_id="t2"))
    assert other_tenant.created and other_tenant.job.id != first.job.id
    [batch_a, batch_b] = await store.enqueue_many([unique(unique_key="acct-7"),
                                                   unique(unique_key="acct-8")])
    assert (batch_a.job.id, batch_a.created, batch_b.created) == (first.job.id, False, True)
    assert await _holders(backend_url, "acct-7") == [first.job.id]


async def test_the_default_key_is_the_type_and_payload(store: JobStore, backend_url: str) -> None:
    first = await store.enqueue(unique(payload={"b": 1, "a": [1, 2]}, unique_for_s=60))
    same = await store.enqueue(unique(payload={"a": [1, 2], "b": 1}, unique_for_s=0))
    different = await store.enqueue(unique(payload={"a": [1, 2], "b": 2}, unique_for_s=60))
    other_type = await store.enqueue(unique("report:mail", {"b": 1, "a": [1, 2]},
                                            unique_for_s=60))
    assert same.job.id == first.job.id and not same.created
    assert different.created and other_type.created
    # The documented derivation (docs/unique-jobs.md), as a plain SQL producer computes it.
    canonical = json.dumps({"a": [1, 2], "b": 1}, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False)
    key = "report:build:" + hashlib.sha256(canonical.encode()).hexdigest()
    assert await _holders(backend_url, key) == [first.job.id]


async def test_running_and_retrying_holders_count_and_a_finished_one_does_not(
    store: JobStore, backend_url: str
) -> None:
    first = (await store.enqueue(unique(unique_key="k"))).job
    claimed = await claim_one(store, first, "w1")
    assert (await store.enqueue(unique(unique_key="k"))).job.id == first.id  # running
    assert await store.finish_jobs([finish(claimed, Outcome.RETRY, delay_s=0.0,
                                           error_class="E", last_error="e")]) == {first.id}
    assert (await store.enqueue(unique(unique_key="k"))).job.id == first.id  # retrying
    claimed = await claim_one(store, (await store.get_job(first.id)) or first, "w1")
    assert await store.finish_jobs([finish(claimed, Outcome.COMPLETED)]) == {first.id}
    second = await store.enqueue(unique(unique_key="k"))  # no window: a new job
    assert second.created and second.job.id != first.id
    assert await _holders(backend_url, "k") == [second.job.id]
    old = await store.get_job(first.id)
    assert old is not None and old.status is JobStatus.COMPLETED  # released, not changed
    for outcome in (Outcome.DEAD, Outcome.CANCELLED):  # within a window: still not counted
        holder = (await store.enqueue(unique(unique_key=f"w-{outcome.value}",
                                             unique_for_s=3600))).job
        run = await claim_one(store, holder, "w1")
        await store.finish_jobs([finish(run, outcome, error_class="E", last_error="e")])
        fresh = await store.enqueue(unique(unique_key=f"w-{outcome.value}", unique_for_s=3600))
        assert fresh.created and fresh.job.id != holder.id


async def test_a_completed_holder_counts_until_its_window_ends_by_the_database_clock(
    store: JobStore, backend_url: str
) -> None:
    long = (await store.enqueue(unique(unique_key="long", unique_for_s=3600))).job
    await store.finish_jobs([finish(await claim_one(store, long, "w1"), Outcome.COMPLETED)])
    assert (await store.enqueue(unique(unique_key="long", unique_for_s=3600))).job.id == long.id
    short = (await store.enqueue(unique(unique_key="short", unique_for_s=0.5))).job
    await store.finish_jobs([finish(await claim_one(store, short, "w1"), Outcome.COMPLETED)])
    results: list[EnqueueResult] = []

    async def created() -> bool:
        results.append(await store.enqueue(unique(unique_key="short", unique_for_s=0.5)))
        return results[-1].created

    await wait_until(created, timeout_s=10)
    assert all(r.job.id == short.id for r in results[:-1])
    # The window closed by the database's clock: the new row came at or after unique_until.
    ph = "%s" if is_postgres(backend_url) else "?"
    [(until,)] = await raw_sql(backend_url, f"SELECT unique_until FROM background_jobs "
                                            f"WHERE id = {ph}", (short.id,))
    [(created_at,)] = await raw_sql(backend_url, f"SELECT created_at FROM background_jobs "
                                                 f"WHERE id = {ph}", (results[-1].job.id,))
    assert created_at >= until


async def test_racing_producers_get_one_job(store: JobStore, backend_url: str) -> None:
    # A finished holder first, so the racers also race to release its key.
    stale = (await store.enqueue(unique(unique_key="race"))).job
    await store.finish_jobs([finish(await claim_one(store, stale, "w1"), Outcome.COMPLETED)])
    results: list[EnqueueResult] = []
    ready: list[int] = []
    all_ready, start = trio.Event(), trio.Event()

    async def producer(many: bool) -> None:
        async with second_store(backend_url) as other:
            ready.append(1)
            if len(ready) == 8:
                all_ready.set()
            await start.wait()
            if many:
                results.extend(await other.enqueue_many([unique(unique_key="race")]))
            else:
                results.append(await other.enqueue(unique(unique_key="race")))

    async with trio.open_nursery() as nursery:
        for n in range(8):
            nursery.start_soon(producer, n % 2 == 0)
        with trio.fail_after(30):
            await all_ready.wait()  # every producer has its own connections open
        start.set()
    assert len(results) == 8 and sum(r.created for r in results) == 1
    assert len({r.job.id for r in results}) == 1 and results[0].job.id != stale.id
    assert await _holders(backend_url, "race") == [results[0].job.id]


async def test_the_idempotency_key_still_decides_first(store: JobStore) -> None:
    first = await store.enqueue(unique(idempotency_key="i1", unique_key="u1"))
    replay = await store.enqueue(unique(idempotency_key="i1", unique_key="u1"))
    assert replay.job.id == first.job.id and not replay.created
    try:
        await store.enqueue(unique(payload={"x": 1}, idempotency_key="i1", unique_key="u2"))
    except IdempotencyConflict as exc:
        assert exc.existing_id == first.job.id
    else:
        raise AssertionError("a different job under the same idempotency key must conflict")
    [same_key_other_idem] = await store.enqueue_many(
        [unique(idempotency_key="i2", unique_key="u1")])
    assert same_key_other_idem.job.id == first.job.id and not same_key_other_idem.created
    mixed = await store.enqueue_many(
        [EnqueueRequest("plain:job", {"n": 1}), unique(unique_key="u1"),
         EnqueueRequest("plain:job", {"n": 2}, idempotency_key="i1")], raise_on_conflict=False)
    assert [r.created for r in mixed] == [True, False, False]
    assert mixed[2].conflict and mixed[1].job.id == first.job.id


async def test_plain_sql_producers_share_keys_with_the_client(
    store: JobStore, backend_url: str
) -> None:
    """The INSERT and the release of docs/unique-jobs.md, as a producer in another language
    runs them."""
    pg = is_postgres(backend_url)
    now = "now()" if pg else "((julianday('now') - 2440587.5) * 86400.0)"
    until = f"{now} + interval '300 seconds'" if pg else f"{now} + 300"
    insert = ("INSERT INTO background_jobs (tenant_id, job_type, payload, unique_key, "
              f"unique_until) VALUES ('acme', 'report:build', '{{\"account\": 7}}', "
              f"'report:build:7', {until}) ON CONFLICT DO NOTHING RETURNING id")
    [(raw_id,)] = await raw_sql(backend_url, insert)
    assert await raw_sql(backend_url, insert) == []  # held: nothing inserted
    held = await store.enqueue(unique(tenant_id="acme", unique_key="report:build:7"))
    assert held.job.id == raw_id and not held.created
    release = ("UPDATE background_jobs SET unique_key = NULL WHERE tenant_id = 'acme' "
               "AND unique_key = 'report:build:7' AND NOT (status IN ('queued', 'retrying', "
               "'running') OR (status = 'completed' AND unique_until IS NOT NULL "
               f"AND unique_until > {now})) RETURNING id")
    assert await raw_sql(backend_url, release) == []  # still queued: it counts
    await raw_sql(backend_url, f"UPDATE background_jobs SET status = 'dead' WHERE id = {raw_id}")
    assert await raw_sql(backend_url, release) == [(raw_id,)]
    [(fresh_id,)] = await raw_sql(backend_url, insert)
    assert fresh_id != raw_id
