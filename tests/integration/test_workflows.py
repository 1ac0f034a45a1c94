"""Dependent jobs, chains and batches end to end (docs/workflows.md), on SQLite and
PostgreSQL: a daemon runs a chain in order handing each result on, a batch's callbacks run
once with the members' outcomes (on_success only when every member completed), a failed
dependency cancels its dependents (run_if_failed runs them), and the store's edges resolve
once: a stale finish releases nothing, an operator's retry of a member after the batch ended
releases nothing again."""

from __future__ import annotations

from typing import Any

import pytest
import redis
import trio

import gochatd
from gochatd.context import JobContext
from gochatd.errors import InvalidJob, InvalidTransition, JobNotFound
from gochatd.model import Finish, JobStatus, Outcome
from gochatd.store import open_store
from gochatd.worker.registry import HandlerSpec, Registry
from gochatd.workflows.model import DEPENDENCY_FAILED, HELD_UNTIL, MAX_WORKFLOW_ITEMS
from tests.integration.helpers import make_registry, migrate, started_worker
from tests.support.harness import make_settings


@pytest.fixture
async def url(backend_url: str) -> str:
    await migrate(backend_url)
    return backend_url


def _streamed_ids(redis_url: str) -> set[int]:
    r = redis.Redis.from_url(redis_url)
    try:
        return {int(fields[b"job_id"]) for key in r.scan_iter()
                if r.type(key) == b"stream" for _, fields in r.xrange(key)}
    finally:
        r.close()


def _registry(runs: list[tuple[str, Any]]) -> Registry:
    async def step(ctx: JobContext) -> Any:
        before = [d.result for d in await ctx.dependencies()]
        runs.append(("step", ctx.payload["n"]))
        return ((before[0] if before else 0) or 0) * 10 + ctx.payload["n"]

    async def member(ctx: JobContext) -> Any:
        runs.append(("member", ctx.payload["n"]))
        if ctx.payload.get("fail"):
            raise gochatd.NonRetryable("member refused")
        return ctx.payload["n"]

    async def callback(ctx: JobContext) -> Any:
        deps = await ctx.dependencies()
        runs.append((ctx.payload["kind"], ctx.job_id))
        return [[d.job_id, d.status.value, d.result] for d in deps]

    return make_registry(HandlerSpec("w:step", step), HandlerSpec("w:member", member),
                         HandlerSpec("w:callback", callback))


async def test_a_chain_runs_in_order_handing_each_result_on(backend_url: str) -> None:
    await _chain(backend_url, "")


async def test_a_chain_in_streams_mode(pg_clean: str, redis_url: str) -> None:
    """With Redis, each released link is dispatched through the stream like any due job."""
    await _chain(pg_clean, redis_url)


async def _chain(backend_url: str, redis_url: str) -> None:
    runs: list[tuple[str, Any]] = []
    settings = make_settings(backend_url, worker_concurrency=4, redis_url=redis_url)
    async with started_worker(settings, registry=_registry(runs)), \
            gochatd.Client(backend_url, redis_url or None) as client:
        jobs = await client.chain([gochatd.NewJob("w:step", {"n": n}) for n in (1, 2, 3)])
        assert [j.scheduled_at == HELD_UNTIL for j in jobs] == [False, True, True]
        last = await client.wait(jobs[-1].id, timeout_s=30)
        assert last.result == 123
        assert runs == [("step", 1), ("step", 2), ("step", 3)]
        links = await client.job_links(jobs[2].id)
        assert links is not None and links.waits_on == 0
        assert [(d.job_id, d.status, d.result) for d in links.dependencies] == [
            (jobs[1].id, JobStatus.COMPLETED, 12)]
        if redis_url:  # each released link went through the stream (the scheduler's XADD)
            assert _streamed_ids(redis_url) >= {j.id for j in jobs}


async def test_a_batch_runs_each_callback_once_with_the_outcomes(backend_url: str) -> None:
    runs: list[tuple[str, Any]] = []
    settings = make_settings(backend_url, worker_concurrency=4)
    async with started_worker(settings, registry=_registry(runs)), \
            gochatd.Client(backend_url) as client:
        ok = await client.batch(
            [gochatd.NewJob("w:member", {"n": n}) for n in (1, 2, 3)],
            on_success=gochatd.NewJob("w:callback", {"kind": "success"}),
            on_complete=gochatd.NewJob("w:callback", {"kind": "complete"}))
        assert ok.on_success is not None and ok.on_complete is not None
        done = await client.wait(ok.on_success.id, timeout_s=30)
        assert done.result == [[j.id, "completed", n] for j, n in zip(ok.jobs, (1, 2, 3),
                                                                       strict=True)]
        await client.wait(ok.on_complete.id, timeout_s=30)
        batch = await client.get_batch(ok.id)
        assert batch is not None and batch.counts == {"completed": 3} and batch.size == 3

        bad = await client.batch(
            [gochatd.NewJob("w:member", {"n": 1}), gochatd.NewJob("w:member", {"n": 2, "fail": 1})],
            on_success=gochatd.NewJob("w:callback", {"kind": "success"}),
            on_complete=gochatd.NewJob("w:callback", {"kind": "complete"}))
        assert bad.on_success is not None and bad.on_complete is not None
        complete = await client.wait(bad.on_complete.id, timeout_s=30)
        assert complete.result == [[bad.jobs[0].id, "completed", 1], [bad.jobs[1].id, "dead", None]]
        with pytest.raises(gochatd.JobFailed) as failed:
            await client.wait(bad.on_success.id, timeout_s=30)
        assert failed.value.job.status is JobStatus.CANCELLED
        assert failed.value.error_class == DEPENDENCY_FAILED
        assert f"dependency {bad.jobs[1].id} ended dead" in (failed.value.job.last_error or "")
        # Each callback ran once; the cancelled one never.
        assert sorted(k for k, _ in runs if k in {"success", "complete"}) == [
            "complete", "complete", "success"]


async def test_depends_on_existing_jobs(backend_url: str) -> None:
    runs: list[tuple[str, Any]] = []
    settings = make_settings(backend_url, worker_concurrency=4)
    async with started_worker(settings, registry=_registry(runs)), \
            gochatd.Client(backend_url) as client:
        first = await client.enqueue("w:member", {"n": 5})
        await client.wait(first.id, timeout_s=30)
        after = await client.enqueue("w:step", {"n": 6}, depends_on=[first.id])
        assert (await client.wait(after.id, timeout_s=30)).result == 56  # already done: runs
        dead = await client.enqueue("w:member", {"n": 7, "fail": 1})
        with pytest.raises(gochatd.JobFailed):
            await client.wait(dead.id, timeout_s=30)
        refused = await client.enqueue("w:step", {"n": 8}, depends_on=[dead.id, first.id])
        assert (refused.status, refused.error_class) == (JobStatus.CANCELLED, DEPENDENCY_FAILED)
        anyway = await client.enqueue("w:step", {"n": 9}, depends_on=[dead.id],
                                      run_if_failed=True)
        assert (await client.wait(anyway.id, timeout_s=30)).status is JobStatus.COMPLETED
        with pytest.raises(JobNotFound):
            await client.enqueue("w:step", {"n": 1}, depends_on=[first.id + 10_000])
        with pytest.raises(JobNotFound):  # another tenant's job is not there
            await client.enqueue("w:step", {"n": 1}, depends_on=[first.id], tenant_id="other")
        with pytest.raises(InvalidJob, match="depends_on"):
            await client.enqueue("w:step", {"n": 1}, depends_on=["1"])  # type: ignore[list-item]
        with pytest.raises(InvalidJob, match="delay_s"):
            await client.enqueue("w:step", {"n": 1}, depends_on=[first.id], delay_s=5)


async def test_edges_resolve_once_stale_finish_and_late_retry(url: str) -> None:
    """At the store: a stale finish of the last member releases nothing; its fenced finish
    (dead) releases on_complete once; an operator's retry of that member after the batch
    ended, completed, leaves the finished callback as it was."""
    store = open_store(url)
    await store.open()
    try:
        async with gochatd.Client(store=store) as client:
            batch = await client.batch([gochatd.NewJob("w:member", {"n": 1}, queue="wf")],
                                       on_complete=gochatd.NewJob("w:callback", {"kind": "c"},
                                                                  queue="wf"))
            assert batch.on_complete is not None
            callback, member = batch.on_complete.id, batch.jobs[0]
            [claimed] = await store.claim_jobs([member.id], "w1", 30.0)
            assert await store.claim_jobs([callback], "w1", 30.0) == []  # held
            stale = Finish(member.id, "w1", claimed.fence + 1, Outcome.DEAD, "default")
            assert await store.finish_jobs([stale]) == set()
            links = await client.job_links(callback)
            assert links is not None and links.waits_on == 1
            dead = Finish(member.id, "w1", claimed.fence, Outcome.DEAD, "default",
                          error_class="boom")
            assert await store.finish_jobs([dead]) == {member.id}
            links = await client.job_links(callback)
            assert links is not None and links.waits_on == 0
            assert [d.status for d in links.dependencies] == [JobStatus.DEAD]
            [run] = await store.claim_jobs([callback], "w2", 30.0)
            done = Finish(callback, "w2", run.fence, Outcome.COMPLETED, "default")
            assert await store.finish_jobs([done]) == {callback}
            # The operator retries the dead member; it completes this time.
            await client.retry(member.id)
            [again] = await store.claim_jobs([member.id], "w3", 30.0)
            ok = Finish(member.id, "w3", again.fence, Outcome.COMPLETED, "default")
            assert await store.finish_jobs([ok]) == {member.id}
            after = await client.get_job(callback)
            assert after is not None and after.status is JobStatus.COMPLETED
            assert after.fence == run.fence and after.attempts == 1
            batch_now = await client.get_batch(batch.id)
            assert batch_now is not None and batch_now.counts == {"completed": 1}
    finally:
        await store.close()


async def test_the_last_two_members_finishing_at_once_release_the_callback_once(
        url: str) -> None:
    """Two members finished concurrently on their own connections: the callback's count
    reaches zero exactly once (the row lock orders the two triggers)."""
    store = open_store(url)
    await store.open()
    try:
        async with gochatd.Client(store=store) as client:
            for _ in range(10):
                batch = await client.batch(
                    [gochatd.NewJob("w:member", {"n": n}, queue="wf2") for n in (1, 2)],
                    on_success=gochatd.NewJob("w:callback", {"kind": "s"}, queue="wf2"))
                assert batch.on_success is not None
                claims = await store.claim_jobs([j.id for j in batch.jobs], "w1", 30.0)
                async with trio.open_nursery() as nursery:
                    for c in claims:
                        nursery.start_soon(store.finish_jobs, [Finish(
                            c.job.id, "w1", c.fence, Outcome.COMPLETED, "default")])
                links = await client.job_links(batch.on_success.id)
                assert links is not None and links.waits_on == 0
                assert [d.resolved for d in links.dependencies] == [True, True]
                job = await client.get_job(batch.on_success.id)
                assert job is not None and job.scheduled_at != HELD_UNTIL
    finally:
        await store.close()


async def test_a_batch_refuses_idempotency_and_unique_keys(url: str) -> None:
    async with gochatd.Client(url) as client:
        for bad in ({"idempotency_key": "k"}, {"unique_key": "u"}):
            with pytest.raises(InvalidJob, match="batch"):
                await client.batch([gochatd.NewJob("w:member", {"n": 1}, **bad)])  # type: ignore[arg-type]
            with pytest.raises(InvalidJob, match=r"unique|idempotency_key"):
                await client.batch([gochatd.NewJob("w:member", {"n": 1})],
                                   on_complete=gochatd.NewJob("w:callback", {}, **bad))  # type: ignore[arg-type]
        assert await client.get_job(1) is None  # nothing was written


async def test_deleting_a_job_others_wait_on_counts_as_cancelled(url: str) -> None:
    """An operator deletes a dependency that has not finished: what waits on it is cancelled
    (dependency_failed), or released with run_if_failed; a held job is not run now."""
    async with gochatd.Client(url) as client:
        first = await client.enqueue("w:member", {"n": 1}, queue="parked")
        second = await client.enqueue("w:member", {"n": 2}, queue="parked")
        strict = await client.enqueue("w:step", {"n": 3}, depends_on=[first.id, second.id])
        lenient = await client.enqueue("w:step", {"n": 4}, depends_on=[first.id],
                                       run_if_failed=True)
        after = await client.enqueue("w:step", {"n": 5}, depends_on=[strict.id])
        with pytest.raises(InvalidTransition, match="waits on its dependencies"):
            await client.run_now(strict.id)
        await client.delete(first.id)
        gone = await client.get_job(strict.id)
        assert gone is not None and (gone.status, gone.error_class) == (
            JobStatus.CANCELLED, DEPENDENCY_FAILED)
        assert f"dependency {first.id} was deleted" in (gone.last_error or "")
        cascaded = await client.get_job(after.id)  # cancelled in turn
        assert cascaded is not None and cascaded.status is JobStatus.CANCELLED
        released = await client.get_job(lenient.id)
        assert released is not None and released.status is JobStatus.QUEUED
        assert released.scheduled_at != HELD_UNTIL
        links = await client.job_links(strict.id, with_results=False)
        assert links is not None
        assert [(d.job_id, d.status) for d in links.dependencies] == [
            (first.id, JobStatus.CANCELLED), (second.id, JobStatus.QUEUED)]


@pytest.mark.parametrize("ending", ["dead", "discarded", "deleted"])
async def test_the_longest_chain_is_cancelled_whole_when_its_head_fails(
        url: str, ending: str) -> None:
    """A chain as long as one call takes: its head's failure cancels every job after it in
    the one transaction that ended the head (one statement for the whole chain, not one
    trigger inside another per link: PostgreSQL's stack and SQLite's trigger depth end
    long before)."""
    store = open_store(url)
    await store.open()
    try:
        async with gochatd.Client(store=store) as client:
            chain = await client.chain([gochatd.NewJob("w:step", {"n": n}, queue="long")
                                        for n in range(MAX_WORKFLOW_ITEMS)])
            head = chain[0].id
            if ending == "dead":
                [claimed] = await store.claim_jobs([head], "w1", 30.0)
                assert await store.finish_jobs([Finish(head, "w1", claimed.fence,
                                                       Outcome.DEAD, "default")]) == {head}
            elif ending == "discarded":
                await client.discard(head)
            else:
                await client.delete(head)
            last = await client.get_job(chain[-1].id)
            assert last is not None and (last.status, last.error_class) == (
                JobStatus.CANCELLED, DEPENDENCY_FAILED)
            assert last.last_error == f"dependency {chain[-2].id} ended cancelled"
            counts = await store.count_jobs_by_status()
            assert counts[JobStatus.CANCELLED] == len(chain) - 1, counts
            links = await client.job_links(chain[-1].id, with_results=False)
            assert links is not None and [d.resolved for d in links.dependencies] == [True]
    finally:
        await store.close()
