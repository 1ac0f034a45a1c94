"""Failures: retry with backoff until max_attempts, NonRetryable, per-type timeouts, unknown
job types, and what ends up in last_error. Every backend, with and without Redis."""

from __future__ import annotations

import pytest
import trio

from gochatd.context import JobContext
from gochatd.model import Job, JobStatus
from gochatd.worker.registry import REGISTRY, HandlerSpec
from gochatd.worker.service import Worker
from tests.integration.helpers import (
    Tracker,
    make_registry,
    opened_store,
    seconds,
    started_worker,
    wait_for,
    wait_for_status,
)
from tests.support.harness import make_settings

MODES = pytest.mark.parametrize("with_redis", [False, True], ids=["polling", "streams"])


def counted_sys_fail(tracker: Tracker) -> HandlerSpec:
    """``sys:fail`` itself, wrapped to count executions."""
    builtin = REGISTRY.get("sys:fail")
    assert builtin is not None

    async def handler(ctx: JobContext) -> None:
        tracker.executions[ctx.job_id] += 1
        tracker.attempts.append((ctx.job_id, ctx.attempt))
        await builtin.fn(ctx)

    return HandlerSpec("sys:fail", handler)


@MODES
async def test_retryable_failure_is_retried_then_dead(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    tracker = Tracker()
    settings = make_settings(backend_url, redis_url if with_redis else "")
    async with started_worker(settings, registry=make_registry(counted_sys_fail(tracker))) as run:
        job = await run.worker.client.enqueue(
            "sys:fail", {"retryable": True, "customer": "acme-corp",
                         "message": "card of acme-corp declined: token=tok_4111 (see postgres://u:pw@db/x)"},
            max_attempts=3,
        )
        dead = await wait_for_status(run.worker.store, job.id, JobStatus.DEAD)

    assert tracker.attempts == [(job.id, 1), (job.id, 2), (job.id, 3)]
    assert dead.attempts == 3
    assert dead.fence == 3
    assert dead.error_class == "SysFailError"
    # sys:fail's own message is the error (the class is error_class, not repeated); the
    # payload's other strings and anything secret-looking in it are still masked.
    assert dead.last_error == "card of [payload] declined: token=*** (see postgres://u:***@db/x)"
    assert dead.failed_at is not None
    assert dead.completed_at is None
    assert dead.lease_expires_at is None


@MODES
async def test_non_retryable_failure_is_dead_after_one_attempt(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    tracker = Tracker()
    settings = make_settings(backend_url, redis_url if with_redis else "")
    async with started_worker(settings, registry=make_registry(counted_sys_fail(tracker))) as run:
        job = await run.worker.client.enqueue(
            "sys:fail", {"retryable": False, "message": "malformed input"}, max_attempts=3
        )
        dead = await wait_for_status(run.worker.store, job.id, JobStatus.DEAD)

    assert tracker.executions[job.id] == 1
    assert dead.attempts == 1
    assert dead.error_class == "non_retryable"
    assert dead.last_error == "malformed input"
    assert dead.failed_at is not None


@MODES
async def test_retry_backoff_is_persisted_and_respected(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    """The first failure stops the worker, so the row is seen in 'retrying' before any
    retry: scheduled_at - updated_at (one statement, database clock) is the drawn delay,
    which must lie in (0, min(retry_cap_s, retry_base_s)]. Later attempts start no earlier
    than that scheduled_at. One handler slot: while the first attempt runs no claim can be
    in flight, so none can take the retry (the draw may be 2 ms) before the stop."""
    base_s, cap_s = 0.3, 0.2
    settings = make_settings(
        backend_url, redis_url if with_redis else "",
        worker_retry_base_s=base_s, worker_retry_cap_s=cap_s, worker_concurrency=1,
    )
    first_worker: list[Worker] = []
    seen_at_start: list[Job] = []

    async with opened_store(backend_url) as reader:

        async def fail(ctx: JobContext) -> None:
            row = await reader.get_job(ctx.job_id)
            assert row is not None
            seen_at_start.append(row)
            if ctx.attempt == 1:
                first_worker[0].request_stop()
            raise RuntimeError("upstream said 503")

        registry = make_registry(HandlerSpec("test:flaky", fail))
        async with started_worker(settings, registry=registry) as run:
            first_worker.append(run.worker)
            job = await run.worker.client.enqueue("test:flaky", {}, max_attempts=3)
            with trio.fail_after(10):
                await run.done.wait()  # the first attempt's handler stops the worker
            assert run.exit_code == 0

        retrying = await reader.get_job(job.id)
        assert retrying is not None
        assert retrying.status is JobStatus.RETRYING
        assert retrying.attempts == 1
        assert retrying.error_class == "RuntimeError"
        assert retrying.last_error == "upstream said 503"  # the class is error_class
        assert retrying.lease_expires_at is None
        delay = seconds(retrying.scheduled_at, retrying.updated_at)
        assert 0.0 < delay <= min(cap_s, base_s) + 1e-3, delay

        async with started_worker(settings, registry=registry) as run:
            dead = await wait_for_status(run.worker.store, job.id, JobStatus.DEAD)

    assert [r.attempts for r in seen_at_start] == [1, 2, 3]
    assert seen_at_start[1].scheduled_at == retrying.scheduled_at
    for row in seen_at_start[1:]:
        # Claimed only once due; the retry was scheduled after the previous claim.
        assert row.locked_at is not None and row.locked_at >= row.scheduled_at
    assert seen_at_start[2].scheduled_at > seen_at_start[1].locked_at  # type: ignore[operator]
    assert dead.attempts == 3
    assert dead.error_class == "RuntimeError"


async def test_stored_errors_are_redacted(backend_url: str) -> None:
    async def leaky(ctx: JobContext) -> None:
        raise RuntimeError(
            "connect postgresql://app:hunter2@db.internal/jobs failed; "
            f"api_key=sk_live_51abc for {ctx.payload['email']}"
        )

    registry = make_registry(HandlerSpec("test:leaky", leaky))
    async with started_worker(make_settings(backend_url), registry=registry) as run:
        job = await run.worker.client.enqueue(
            "test:leaky", {"email": "alice@example.com"}, max_attempts=1
        )
        dead = await wait_for_status(run.worker.store, job.id, JobStatus.DEAD)

    assert dead.error_class == "RuntimeError"
    assert dead.last_error is not None
    assert "postgresql://app:***@db.internal/jobs" in dead.last_error
    assert "api_key=***" in dead.last_error
    assert "[payload]" in dead.last_error
    for secret in ("hunter2", "sk_live_51abc", "alice@example.com"):
        assert secret not in dead.last_error


@MODES
async def test_per_type_timeout_retries_with_timeout_class(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    """``timeout_s`` on the registration cancels the handler and retries the job with
    error_class 'timeout'; types without it are not limited."""
    tracker = Tracker()
    timed_out_at: list[float] = []

    async def hangs_first_time(ctx: JobContext) -> None:
        tracker.attempts.append((ctx.job_id, ctx.attempt))
        if ctx.attempt == 1:
            started = trio.current_time()
            try:
                await trio.sleep_forever()
            finally:
                timed_out_at.append(trio.current_time() - started)

    async def always_hangs(ctx: JobContext) -> None:
        tracker.attempts.append((ctx.job_id, ctx.attempt))
        await trio.sleep_forever()

    async def slow_but_unlimited(ctx: JobContext) -> None:
        tracker.attempts.append((ctx.job_id, ctx.attempt))
        await trio.sleep(0.5)

    registry = make_registry(
        HandlerSpec("test:hangs-once", hangs_first_time, timeout_s=0.3),
        HandlerSpec("test:hangs", always_hangs, timeout_s=0.2),
        HandlerSpec("test:slow", slow_but_unlimited),
    )
    settings = make_settings(backend_url, redis_url if with_redis else "")
    async with started_worker(settings, registry=registry) as run:
        client = run.worker.client
        once = await client.enqueue("test:hangs-once", {}, max_attempts=3)
        hangs = await client.enqueue("test:hangs", {}, max_attempts=2)
        slow = await client.enqueue("test:slow", {}, max_attempts=1)
        once_done = await wait_for_status(run.worker.store, once.id, JobStatus.COMPLETED)
        hangs_dead = await wait_for_status(run.worker.store, hangs.id, JobStatus.DEAD)
        slow_done = await wait_for_status(run.worker.store, slow.id, JobStatus.COMPLETED)

    assert [a for j, a in tracker.attempts if j == once.id] == [1, 2]
    assert len(timed_out_at) == 1 and 0.3 <= timed_out_at[0] < 2.0
    assert once_done.attempts == 2
    # The first attempt timed out (above); the completion clears the current error.
    assert (once_done.error_class, once_done.last_error) == (None, None)

    assert [a for j, a in tracker.attempts if j == hangs.id] == [1, 2]
    assert hangs_dead.attempts == 2
    assert hangs_dead.error_class == "timeout"
    assert hangs_dead.last_error == "handler timed out after 0.2s"

    assert slow_done.attempts == 1
    assert slow_done.error_class is None


@MODES
async def test_a_job_type_without_a_handler_waits_untouched(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    """Not claimed, so no attempt is spent: it waits for a daemon with its handler
    (docs/job-types.md). Before, it was dead with unknown_job_type at once."""
    settings = make_settings(backend_url, redis_url if with_redis else "")
    async with started_worker(settings, registry=make_registry()) as run:
        job = await run.worker.client.enqueue("test:nobody-handles-this", {}, max_attempts=5)
        # Enqueued after it, so claimed after it had it been claimable; the worker keeps going.
        after = await run.worker.client.enqueue("sys:noop", {})
        await wait_for_status(run.worker.store, after.id, JobStatus.COMPLETED)
        if with_redis:  # its stream entry was read, and acked unclaimed
            await wait_for(lambda: run.worker.counters["stream_entries_without_handler"] >= 1,
                           what="the entry refused")
        waiting = await run.worker.store.get_job(job.id)

    assert waiting is not None
    assert (waiting.status, waiting.attempts, waiting.fence) == (JobStatus.QUEUED, 0, 0)
    assert waiting.error_class is None
