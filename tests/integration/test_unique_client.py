"""Unique jobs from the producers' side (docs/unique-jobs.md): ``Client`` with concurrent
callers (group commit) and Redis dispatch, ``enqueue_many`` items, ``SyncClient``, and
``gochatd.testing.inline()``, which runs a unique job once however often it is enqueued."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import gochatd
import gochatd.testing
from gochatd.errors import InvalidJob
from gochatd.model import Job, Outcome
from gochatd.worker.registry import HandlerSpec
from tests.contract.helpers import is_postgres
from tests.integration.helpers import make_registry, redis_call, sql, stream_key


async def test_concurrent_unique_enqueues_make_one_job_dispatched_once(
    backend_url: str, redis_url: str
) -> None:
    if not is_postgres(backend_url):
        await gochatd.testing.migrate(backend_url)
    jobs: list[Job] = []
    async with gochatd.Client(backend_url, redis_url) as client:

        async def produce(n: int) -> None:
            # Other non-unique jobs ride in the same group-commit batches.
            await client.enqueue("report:other", {"n": n})
            jobs.append(await client.enqueue("report:build", {"account": 7}, unique_for_s=60))

        async with trio.open_nursery() as nursery:
            for n in range(12):
                nursery.start_soon(produce, n)
        assert len(jobs) == 12 and len({j.id for j in jobs}) == 1
        results = await client.enqueue_many([
            gochatd.NewJob("report:build", {"account": 7}, unique_for_s=60),
            {"job_type": "report:build", "payload": {"account": 8}, "unique_key": "acct-8"},
            {"job_type": "report:build", "payload": {"account": 9}, "unique_key": "acct-8"},
        ])
        assert [r.created for r in results] == [False, True, False]
        assert results[0].job.id == jobs[0].id and results[2].job.id == results[1].job.id
        with pytest.raises(InvalidJob, match=r"^unique_for_s: expected 0 to 2592000"):
            await client.enqueue("report:build", unique_for_s=-1)
    rows = await sql(backend_url, "SELECT job_type, count(*) FROM background_jobs "
                                  "GROUP BY job_type ORDER BY job_type")
    assert [(t, int(n)) for t, n in rows] == [("report:build", 2), ("report:other", 12)]
    xlen: int = await redis_call(redis_url, lambda r: r.xlen(stream_key()))
    assert xlen == 14, "a holder returned to a duplicate is not dispatched again"


def _sync_side(url: str) -> dict[str, Any]:
    with gochatd.SyncClient(url) as client:
        first = client.enqueue("crm:sync", {"account": 7}, unique_key="crm:sync:7")
        again = client.enqueue("crm:sync", {"account": 7, "why": "webhook"},
                               unique_key="crm:sync:7")
        return {"first": first.id, "again": again.id, "payload": again.payload}


async def test_sync_client_unique_enqueue(sqlite_url: str) -> None:
    await gochatd.testing.migrate(sqlite_url)
    got = await trio.to_thread.run_sync(_sync_side, sqlite_url)
    assert got["first"] == got["again"] and got["payload"] == {"account": 7}


async def test_inline_runs_a_unique_job_once(sqlite_url: str) -> None:
    ran: list[int] = []

    async def build(ctx: gochatd.JobContext) -> None:
        ran.append(ctx.job_id)

    registry = make_registry(HandlerSpec("report:build", build))
    await gochatd.testing.migrate(sqlite_url)
    async with gochatd.Client(sqlite_url) as client:
        with gochatd.testing.inline(registry=registry) as run:
            for _ in range(3):  # completed within its window: still the holder
                await client.enqueue("report:build", {"account": 7}, unique_for_s=600)
            await client.enqueue("report:build", {"account": 7}, unique_key="k")
            await client.enqueue("report:build", {"account": 7}, unique_key="k")  # no window
    assert run.statuses() == [Outcome.COMPLETED] * 3 and len(set(ran)) == 3
