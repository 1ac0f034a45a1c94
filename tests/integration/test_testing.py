"""gochatd.testing: run_job through the daemon's runner without a database, and inline()
enqueues that claim, run and finish the new jobs through the real store (SQLite and
PostgreSQL)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import gochatd
import gochatd.testing
from gochatd.context import JobContext
from gochatd.errors import InvalidJob, NonRetryable, RetryAfter
from gochatd.model import JobStatus, Outcome
from gochatd.worker.registry import HandlerSpec, handler_spec
from tests.integration.helpers import make_registry, sql

SEEN: list[dict[str, Any]] = []


async def _reply(ctx: JobContext) -> None:
    SEEN.append({"payload": ctx.payload, "attempt": ctx.attempt, "fence": ctx.fence})
    await ctx.reply(channel="email", to=str(ctx.payload["to"]), body={"n": ctx.payload["n"]},
                    dedupe_key=f"k{ctx.payload['n']}")


async def _boom(ctx: JobContext) -> None:
    SEEN.append({"attempt": ctx.attempt})
    raise KeyError(str(ctx.payload.get("secret", "none")))


async def _never(ctx: JobContext) -> None:
    raise NonRetryable("no")


async def _later(ctx: JobContext) -> None:
    raise RetryAfter(42)


async def _slow(ctx: JobContext) -> None:
    await trio.sleep_forever()


async def _step(ctx: JobContext) -> int:
    """A workflow job: what it saw of its dependencies; returns its own step."""
    deps = await ctx.dependencies()
    SEEN.append({"step": ctx.payload["step"],
                 "saw": [(d.status.value, d.result) for d in deps]})
    return int(ctx.payload["step"])


REGISTRY = make_registry(
    HandlerSpec("t:reply", _reply), HandlerSpec("t:boom", _boom, max_attempts=3),
    HandlerSpec("t:never", _never), HandlerSpec("t:later", _later),
    HandlerSpec("t:slow", _slow, timeout_s=0.2), HandlerSpec("t:step", _step),
)


def _steps(*steps: int) -> list[gochatd.NewJob]:
    return [gochatd.NewJob("t:step", {"step": n}) for n in steps]


@pytest.fixture(autouse=True)
def _forget() -> None:
    SEEN.clear()


async def test_run_job_completes_with_replies_and_decoded_payload() -> None:
    outcome = await gochatd.testing.run_job(
        "t:reply", {"to": "a@example.com", "n": 1, "pair": (1, 2)}, registry=REGISTRY)
    assert outcome.completed and outcome.status == "completed"
    assert [(r.channel, r.recipient, r.body) for r in outcome.replies] == [
        ("email", "a@example.com", {"n": 1})]
    assert SEEN == [{"payload": {"to": "a@example.com", "n": 1, "pair": [1, 2]},
                     "attempt": 1, "fence": 1}]
    assert outcome.error is None and outcome.exception is None


async def test_run_job_classifies_failures_as_the_daemon_does() -> None:
    boom = await gochatd.testing.run_job("t:boom", {"secret": "hunter2"}, registry=REGISTRY)
    assert (boom.status, boom.error_class, boom.attempts) == (Outcome.RETRY, "KeyError", 1)
    assert isinstance(boom.exception, KeyError)
    assert boom.retry_in_s is not None and 0 <= boom.retry_in_s <= 1.0
    assert boom.error == "'[payload]'"  # redacted as a worker stores it; the class is error_class
    last = await gochatd.testing.run_job("t:boom", registry=REGISTRY, attempt=3)
    assert (last.status, last.retry_in_s) == (Outcome.DEAD, None)
    never = await gochatd.testing.run_job("t:never", registry=REGISTRY)
    assert (never.status, never.error_class) == (Outcome.DEAD, "non_retryable")
    later = await gochatd.testing.run_job("t:later", registry=REGISTRY)
    assert (later.status, later.error_class, later.retry_in_s) == (
        Outcome.RETRY, "retry_after", 42)
    unknown = await gochatd.testing.run_job("t:missing", registry=REGISTRY)
    assert (unknown.status, unknown.error_class) == (Outcome.DEAD, "unknown_job_type")


async def test_run_job_enforces_the_handler_timeout() -> None:
    outcome = await gochatd.testing.run_job("t:slow", registry=REGISTRY)
    assert (outcome.status, outcome.error_class, outcome.exception) == (
        Outcome.RETRY, "timeout", None)
    assert outcome.error == "handler timed out after 0.2s"


async def test_run_retries_runs_every_attempt_until_dead() -> None:
    outcome = await gochatd.testing.run_job("t:boom", registry=REGISTRY, run_retries=True)
    assert (outcome.status, outcome.attempts) == (Outcome.DEAD, 3)
    assert [seen["attempt"] for seen in SEEN] == [1, 2, 3]
    two = await gochatd.testing.run_job("t:boom", registry=REGISTRY, run_retries=True,
                                        max_attempts=2)
    assert two.attempts == 2


async def test_run_job_refuses_what_enqueue_refuses_and_uses_the_global_registry() -> None:
    with pytest.raises(InvalidJob, match="payload"):
        await gochatd.testing.run_job("t:reply", {"x": float("nan")}, registry=REGISTRY)
    with pytest.raises(InvalidJob, match="job_type"):
        await gochatd.testing.run_job("bad type", registry=REGISTRY)
    fail = await gochatd.testing.run_job("sys:fail", {"retryable": False})
    assert (fail.status, fail.error_class) == (Outcome.DEAD, "non_retryable")


async def _status(url: str, job_id: int) -> str:
    return str((await sql(url, f"SELECT status FROM background_jobs WHERE id = {job_id}"))[0][0])


async def test_inline_runs_enqueued_jobs_and_writes_their_final_state(backend_url: str) -> None:
    await gochatd.testing.migrate(backend_url)
    async with gochatd.Client(backend_url) as client:
        with gochatd.testing.inline(registry=REGISTRY) as run:
            ok = await client.enqueue("t:reply", {"to": "b@example.com", "n": 2})
            bad = await client.enqueue("t:boom", {"n": 3})
            dead = await client.enqueue("t:never")
            later = await client.enqueue("t:reply", {"to": "c@example.com", "n": 4}, delay_s=600)
        assert ok.status == JobStatus.QUEUED  # enqueue returns the row as written
        assert run.statuses() == [Outcome.COMPLETED, Outcome.RETRY, Outcome.DEAD]
        assert [o.job.status for o in run.outcomes if o.job] == [
            JobStatus.COMPLETED, JobStatus.RETRYING, JobStatus.DEAD]
        assert [j.id for j in run.deferred] == [later.id]
        assert await _status(backend_url, ok.id) == "completed"
        assert await _status(backend_url, bad.id) == "retrying"
        assert await _status(backend_url, dead.id) == "dead"
        assert await _status(backend_url, later.id) == "queued"
        row = await client.get_job(bad.id)
        assert row is not None and (row.error_class, row.attempts) == ("KeyError", 1)
        replies = await sql(backend_url, "SELECT recipient FROM reply_outbox")
        assert [r[0] for r in replies] == ["b@example.com"]
        after = await client.enqueue("t:reply", {"to": "d@example.com", "n": 5})
        assert await _status(backend_url, after.id) == "queued"  # outside the block
        assert len(run.outcomes) == 3


async def test_inline_enqueue_many_runs_each_new_job_once(backend_url: str) -> None:
    await gochatd.testing.migrate(backend_url)
    items = [gochatd.NewJob("t:reply", {"to": f"{n}@example.com", "n": n},
                            idempotency_key=f"i{n}") for n in range(3)]
    async with gochatd.Client(backend_url) as client:
        with gochatd.testing.inline(registry=REGISTRY) as run:
            results = await client.enqueue_many(items)
            again = await client.enqueue_many(items)  # the same keys: existing jobs
            same = await client.enqueue("t:reply", {"to": "0@example.com", "n": 0},
                                        idempotency_key="i0")
        assert run.statuses() == [Outcome.COMPLETED] * 3
        assert [o.job.id for o in run.outcomes if o.job] == [r.job.id for r in results]
        assert not any(r.created for r in again) and same.id == results[0].job.id
        assert [s["attempt"] for s in SEEN] == [1, 1, 1]
        for result in results:
            assert await _status(backend_url, result.job.id) == "completed"


async def test_inline_runs_chains_and_batches_as_their_jobs_are_released(
    backend_url: str
) -> None:
    await gochatd.testing.migrate(backend_url)
    async with gochatd.Client(backend_url) as client:
        outside = await client.enqueue("t:step", {"step": 0})  # not run: before the block
        with gochatd.testing.inline(registry=REGISTRY) as run:
            chain = await client.chain(_steps(1, 2, 3))
            ok = await client.batch(_steps(4, 5), on_success=_steps(6)[0],
                                    on_complete=_steps(7)[0])
            failed = await client.batch([gochatd.NewJob("t:never")],
                                        on_success=_steps(8)[0], on_complete=_steps(9)[0])
            held = await client.enqueue("t:step", {"step": 10}, depends_on=[outside.id])
        assert ok.on_success is not None and failed.on_success is not None
        # Each link after the one before, reading its result; callbacks after the members.
        assert [(s["step"], s["saw"]) for s in SEEN] == [
            (1, []), (2, [("completed", 1)]), (3, [("completed", 2)]),
            (4, []), (5, []), (6, [("completed", 4), ("completed", 5)]),
            (7, [("completed", 4), ("completed", 5)]), (9, [("dead", None)])]
        assert run.statuses() == [Outcome.COMPLETED] * 7 + [Outcome.DEAD, Outcome.COMPLETED]
        # A job waiting on one outside the write stays queued; a cancelled callback never ran.
        assert [j.id for j in run.deferred] == [held.id]
        assert await _status(backend_url, failed.on_success.id) == "cancelled"
        assert await _status(backend_url, chain[-1].id) == "completed"


def test_inline_runs_a_sync_clients_chain(backend_url: str) -> None:
    trio.run(gochatd.testing.migrate, backend_url)
    with gochatd.SyncClient(backend_url) as client, \
            gochatd.testing.inline(registry=REGISTRY) as run:
        first = client.enqueue("t:step", {"step": 1})
        then = client.enqueue("t:step", {"step": 2}, depends_on=[first.id])
        chain = client.chain(_steps(3, 4))
    assert [(s["step"], s["saw"]) for s in SEEN] == [
        (1, []), (2, [("completed", 1)]), (3, []), (4, [("completed", 3)])]
    assert [o.job.id for o in run.outcomes if o.job] == [first.id, then.id, *(j.id for j in chain)]


def test_inline_under_asyncio_is_refused_before_anything_is_written(sqlite_url: str) -> None:
    import asyncio

    trio.run(gochatd.testing.migrate, sqlite_url)

    async def main() -> None:
        async with gochatd.Client(sqlite_url) as client:
            with gochatd.testing.inline(registry=REGISTRY), \
                    pytest.raises(RuntimeError, match="under Trio only; nothing was enqueued"):
                await client.enqueue("t:reply", {"to": "e@example.com", "n": 6})
            with gochatd.testing.inline(registry=REGISTRY), \
                    pytest.raises(RuntimeError, match="under Trio only"):
                await client.enqueue_many([gochatd.NewJob("t:reply", {"n": 7})])

    asyncio.run(main())
    rows = trio.run(sql, sqlite_url, "SELECT count(*) FROM background_jobs")
    assert rows == [(0,)]


async def test_inline_with_redis_dispatch_still_finishes_the_job(
    pg_clean: str, redis_url: str
) -> None:
    await gochatd.testing.migrate(pg_clean)
    async with gochatd.Client(pg_clean, redis_url) as client:
        with gochatd.testing.inline(registry=REGISTRY) as run:
            job = await client.enqueue("t:reply", {"to": "f@example.com", "n": 8})
    assert job.dispatched_at is not None  # XADDed after commit, as always
    assert run.statuses() == [Outcome.COMPLETED]
    assert await _status(pg_clean, job.id) == "completed"


def test_inline_with_the_sync_client(backend_url: str) -> None:
    trio.run(gochatd.testing.migrate, backend_url)
    with gochatd.SyncClient(backend_url) as client, \
            gochatd.testing.inline(registry=REGISTRY) as run:
        ok = client.enqueue("t:reply", {"to": "g@example.com", "n": 9})
        many = client.enqueue_many([gochatd.NewJob("t:boom"), gochatd.NewJob("t:never")])
        later = client.enqueue("t:reply", {"to": "h@example.com", "n": 10}, delay_s=600)
        rows = {job_id: client.get_job(job_id) for job_id in (ok.id, later.id)}
    assert run.statuses() == [Outcome.COMPLETED, Outcome.RETRY, Outcome.DEAD]
    assert [o.job.id for o in run.outcomes if o.job] == [ok.id] + [r.job.id for r in many]
    assert [j.id for j in run.deferred] == [later.id]
    assert rows[ok.id] is not None and rows[ok.id].status == JobStatus.COMPLETED  # type: ignore[union-attr]
    assert rows[later.id] is not None and rows[later.id].status == JobStatus.QUEUED  # type: ignore[union-attr]
    replies = trio.run(sql, backend_url, "SELECT recipient FROM reply_outbox")
    assert [r[0] for r in replies] == ["g@example.com"]


async def test_the_sync_client_inline_is_refused_inside_trio(sqlite_url: str) -> None:
    await gochatd.testing.migrate(sqlite_url)
    with gochatd.SyncClient(sqlite_url) as client, gochatd.testing.inline(registry=REGISTRY), \
            pytest.raises(RuntimeError, match=r"from Trio code use gochatd\.Client"):
        client.enqueue("t:reply", {"to": "i@example.com", "n": 11})
    rows = await sql(sqlite_url, "SELECT count(*) FROM background_jobs")
    assert rows == [(0,)]


async def _aio_handler(ctx: JobContext) -> None:
    import asyncio

    await asyncio.sleep(0)
    if ctx.payload.get("fail"):
        raise ValueError("asyncio side")


def _thread_handler(ctx: JobContext) -> None:
    if ctx.payload.get("fail"):
        raise NonRetryable("thread side")


async def test_run_job_runs_asyncio_and_thread_handlers_as_the_daemon_does() -> None:
    registry = make_registry(
        handler_spec("t:aio", _aio_handler, runtime="asyncio"),
        handler_spec("t:thread", _thread_handler))
    assert (await gochatd.testing.run_job("t:aio", registry=registry)).completed
    failed = await gochatd.testing.run_job("t:aio", {"fail": True}, registry=registry)
    assert (failed.status, failed.error_class) == (Outcome.RETRY, "ValueError")
    assert (await gochatd.testing.run_job("t:thread", registry=registry)).completed
    dead = await gochatd.testing.run_job("t:thread", {"fail": True}, registry=registry)
    assert (dead.status, dead.error_class) == (Outcome.DEAD, "non_retryable")
