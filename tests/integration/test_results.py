"""Job results end to end (docs/results.md), on SQLite and PostgreSQL: a daemon stores what
each runtime's handler returned (through middleware), a result over the bound or not JSON
makes the job dead with a clear error, and ``Client.wait`` / ``SyncClient.wait`` return
the completed job or raise ``JobFailed`` / ``WaitTimeout``. On PostgreSQL a waiter is woken
by the finish trigger's NOTIFY, not by its fallback re-read."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

import gochatd
from gochatd.context import JobContext
from gochatd.errors import JobNotFound
from gochatd.hooks import middleware_layer
from gochatd.model import JobStatus
from gochatd.results import wait as wait_module
from gochatd.worker.registry import HandlerSpec, Registry, handler_spec
from tests.contract.helpers import is_postgres, raw_sql
from tests.integration.helpers import make_registry, migrate, started_worker
from tests.support.harness import make_settings

CallNext = Callable[[], Awaitable[None]]
BIG = "x" * 300


@pytest.fixture
async def url(backend_url: str) -> str:
    """``backend_url`` with the schema (the tests without a daemon: a Client creates none)."""
    await migrate(backend_url)
    return backend_url


async def _on_trio(ctx: JobContext) -> dict[str, Any]:
    await trio.lowlevel.checkpoint()
    return {"runtime": "trio", "echo": ctx.payload}


async def _on_asyncio(ctx: JobContext) -> list[Any]:
    await asyncio.sleep(0)
    return ["asyncio", ctx.payload.get("n")]


def _in_thread(ctx: JobContext) -> str:
    return "thread"


async def _nothing(ctx: JobContext) -> None:
    return None


async def _too_big(ctx: JobContext) -> str:
    return BIG


async def _not_json(ctx: JobContext) -> object:
    return {"when": object()}


async def _refused(ctx: JobContext) -> None:
    raise gochatd.NonRetryable("no such report")


def _registry() -> Registry:
    registry = make_registry(
        handler_spec("r:trio", _on_trio), handler_spec("r:asyncio", _on_asyncio, runtime="asyncio"),
        handler_spec("r:thread", _in_thread), HandlerSpec("r:none", _nothing),
        HandlerSpec("r:big", _too_big), HandlerSpec("r:object", _not_json),
        HandlerSpec("r:refused", _refused),
    )

    async def passing(ctx: JobContext, call_next: CallNext) -> None:
        await call_next()  # a middleware returns nothing: the handler's value goes by it

    registry.add_layer(middleware_layer(passing))
    return registry


async def test_a_daemon_stores_each_runtimes_result_and_wait_returns_it(backend_url: str) -> None:
    settings = make_settings(backend_url, worker_concurrency=4, worker_max_result_bytes=200)
    async with started_worker(settings, registry=_registry()), gochatd.Client(backend_url) as client:
        trio_job = await client.enqueue("r:trio", {"n": 1})
        aio_job = await client.enqueue("r:asyncio", {"n": 2})
        thread_job = await client.enqueue("r:thread")
        none_job = await client.enqueue("r:none")
        done = await client.wait(trio_job.id, timeout_s=30)
        assert done.status is JobStatus.COMPLETED
        assert done.result == {"runtime": "trio", "echo": {"n": 1}}
        assert (await client.wait(aio_job.id, timeout_s=30)).result == ["asyncio", 2]
        assert (await client.wait(thread_job.id, timeout_s=30)).result == "thread"
        assert (await client.wait(none_job.id, timeout_s=30)).result is None
        # A finished job answers at once, and again.
        assert (await client.wait(trio_job.id, timeout_s=0)).result == done.result


async def test_wait_raises_job_failed_naming_the_error_class(backend_url: str) -> None:
    settings = make_settings(backend_url, worker_max_result_bytes=200)
    async with started_worker(settings, registry=_registry()), gochatd.Client(backend_url) as client:
        big = await client.enqueue("r:big", max_attempts=5)
        with pytest.raises(gochatd.JobFailed) as failed:
            await client.wait(big.id, timeout_s=30)
        job = failed.value.job
        assert (job.status, job.error_class, job.attempts) == (JobStatus.DEAD,
                                                               "result_too_large", 1)
        assert job.result is None and BIG not in (job.last_error or "")
        assert "302 bytes" in (job.last_error or "") and "(200)" in (job.last_error or "")
        assert "result_too_large" in str(failed.value) and f"job {big.id} ended dead" in str(
            failed.value)

        weird = await client.enqueue("r:object")
        with pytest.raises(gochatd.JobFailed) as failed:
            await client.wait(weird.id, timeout_s=30)
        assert failed.value.error_class == "result_not_json"

        refused = await client.enqueue("r:refused")
        with pytest.raises(gochatd.JobFailed, match="non_retryable: no such report"):
            await client.wait(refused.id, timeout_s=30)

        later = await client.enqueue("r:none", delay_s=3600)
        await client.cancel(later.id)
        with pytest.raises(gochatd.JobFailed, match="ended cancelled") as failed:
            await client.wait(later.id, timeout_s=30)
        assert failed.value.job.status is JobStatus.CANCELLED


async def test_wait_times_out_on_a_job_that_does_not_finish(url: str) -> None:
    async with gochatd.Client(url) as client:
        later = await client.enqueue("r:none", delay_s=3600)
        started = trio.current_time()
        with pytest.raises(gochatd.WaitTimeout) as timed_out:
            await client.wait(later.id, timeout_s=0.3)
        assert trio.current_time() - started >= 0.3
        assert isinstance(timed_out.value, TimeoutError)
        assert timed_out.value.job.status is JobStatus.QUEUED
        assert "still queued after waiting 0.3s" in str(timed_out.value)
        with pytest.raises(JobNotFound):
            await client.wait(later.id + 1000, timeout_s=1)
        with pytest.raises(ValueError, match="timeout_s"):
            await client.wait(later.id, timeout_s=-1)


async def _complete_by_sql(url: str, job_id: int, result: str) -> None:
    """A finish written from outside (another worker's finish, as the trigger sees it)."""
    await raw_sql(url, "UPDATE background_jobs SET status = 'completed', result = ?"
                  + ("::jsonb" if is_postgres(url) else "") + " WHERE id = ?", (result, job_id))


async def test_a_waiter_is_woken_by_the_finish_not_its_fallback(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the fallback re-read and the poll backoff pushed to 60 s, the wait can only end
    within its 20 s timeout if the finish wakes it: PostgreSQL's NOTIFY. (SQLite polls: the
    backoff stays at its bound there.)"""
    postgres = is_postgres(url)
    if postgres:
        monkeypatch.setattr(wait_module, "FALLBACK_REREAD_S", 60.0)
    reading_done = trio.Event()  # the waiter read the row (queued) and is about to sleep
    real_next_s = wait_module._Pace.next_s

    def next_s(self: Any) -> float:
        reading_done.set()
        return real_next_s(self)

    monkeypatch.setattr(wait_module._Pace, "next_s", next_s)
    async with gochatd.Client(url) as client:
        job = await client.enqueue("r:none", delay_s=3600)
        got: list[gochatd.Job] = []

        async def waiter() -> None:
            got.append(await client.wait(job.id, timeout_s=20))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await reading_done.wait()
            await _complete_by_sql(url, job.id, '{"by": "sql"}')
            started = trio.current_time()
        assert got[0].result == {"by": "sql"}
        assert trio.current_time() - started < (5.0 if postgres else 2.0)


async def test_sync_client_wait_from_threads(backend_url: str) -> None:
    settings = make_settings(backend_url, worker_concurrency=4)

    def produce_and_wait(url: str) -> list[Any]:
        with gochatd.SyncClient(url) as client:
            jobs = [client.enqueue("r:trio", {"n": n}) for n in range(3)]
            results = [client.wait(j.id, timeout_s=30).result for j in jobs]
            later = client.enqueue("r:none", delay_s=3600)
            try:
                client.wait(later.id, timeout_s=0.2)
            except gochatd.WaitTimeout as exc:
                results.append(exc.job.status.value)
            return results

    async with started_worker(settings, registry=_registry()):
        results = await trio.to_thread.run_sync(produce_and_wait, backend_url)
    assert results == [{"runtime": "trio", "echo": {"n": n}} for n in range(3)] + ["queued"]


async def test_client_wait_under_asyncio(url: str) -> None:
    """The asyncio side of the wake-up (call_soon_threadsafe), with a finish from outside."""

    async def main() -> Any:
        async with gochatd.Client(url) as client:
            job = await client.enqueue("r:none", delay_s=3600)
            waiting = asyncio.ensure_future(client.wait(job.id, timeout_s=20))
            await asyncio.to_thread(_complete_sync, url, job.id)
            return (await waiting).result

    def _complete_sync(url: str, job_id: int) -> None:
        trio.run(_complete_by_sql, url, job_id, "[1, 2]")

    assert await trio.to_thread.run_sync(asyncio.run, main()) == [1, 2]


async def test_wait_for_a_pruned_job_is_not_found(url: str) -> None:
    async with gochatd.Client(url) as client:
        job = await client.enqueue("r:none", delay_s=3600)
        await raw_sql(url, "DELETE FROM background_jobs WHERE id = ?", (job.id,))
        with pytest.raises(JobNotFound):
            await client.wait(job.id, timeout_s=5)



async def test_testing_run_job_shows_the_result() -> None:
    """``gochatd.testing.run_job`` (docs/testing.md): the result as a daemon stores it."""
    outcome = await gochatd.testing.run_job("r:trio", {"n": 3}, registry=_registry())
    assert outcome.completed and outcome.result == {"runtime": "trio", "echo": {"n": 3}}
    refused = await gochatd.testing.run_job("r:object", registry=_registry())
    assert (refused.status.value, refused.error_class, refused.result) == (
        "dead", "result_not_json", None)
