"""Hooks around every job (``before_job``, ``after_job``, ``middleware``; docs/hooks.md):
their order, a hook's exception as the job's failure (retried, the hook named in the
redacted error), hooks that await around trio, asyncio and thread handlers, the job's
timeout covering them, and the same behaviour in a daemon and under gochatd.testing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.lowlevel

import gochatd
import gochatd.testing
from gochatd.context import JobContext
from gochatd.errors import HookFailed, InvalidHandler, NonRetryable
from gochatd.hooks import after_layer, before_layer, middleware_layer
from gochatd.model import JobStatus, Outcome
from gochatd.worker.registry import REGISTRY, HandlerSpec, Registry, handler_spec
from tests.integration.helpers import make_registry, started_worker, wait_all_status
from tests.support.harness import make_settings

CallNext = Callable[[], Awaitable[None]]


async def _ok(ctx: JobContext) -> None:
    return None


async def _boom(ctx: JobContext) -> None:
    raise KeyError("handler")


def _traced(trace: list[str], *specs: HandlerSpec) -> Registry:
    """b1, a1, mw, b2, a2 registered in that order, each noting what it saw."""

    async def b1(ctx: JobContext) -> None:
        await trio.lowlevel.checkpoint()
        trace.append("b1")

    def a1(ctx: JobContext, error: Exception | None) -> None:  # a plain def works too
        trace.append(f"a1:{type(error).__name__ if error else 'ok'}")

    async def mw(ctx: JobContext, call_next: CallNext) -> None:
        trace.append("mw:in")
        try:
            await call_next()
        finally:
            trace.append("mw:out")

    async def b2(ctx: JobContext) -> None:
        trace.append(f"b2:{ctx.job_type}")

    async def a2(ctx: JobContext, error: Exception | None) -> None:
        await trio.lowlevel.checkpoint()
        trace.append(f"a2:{type(error).__name__ if error else 'ok'}")

    async def handler(ctx: JobContext) -> None:
        trace.append("handler")

    registry = make_registry(HandlerSpec("t:ok", handler), HandlerSpec("t:boom", _boom), *specs)
    for layer in (before_layer(b1), after_layer(a1), middleware_layer(mw), before_layer(b2),
                  after_layer(a2)):
        registry.add_layer(layer)
    return registry


async def test_hooks_nest_in_registration_order() -> None:
    trace: list[str] = []
    registry = _traced(trace)
    outcome = await gochatd.testing.run_job("t:ok", registry=registry)
    assert outcome.completed
    assert trace == ["b1", "mw:in", "b2:t:ok", "handler", "a2:ok", "mw:out", "a1:ok"]
    trace.clear()
    failed = await gochatd.testing.run_job("t:boom", registry=registry)
    assert (failed.status, failed.error_class) == (Outcome.RETRY, "KeyError")
    assert isinstance(failed.exception, KeyError)  # the handler's, not wrapped
    assert trace == ["b1", "mw:in", "b2:t:boom", "a2:KeyError", "mw:out", "a1:KeyError"]


async def test_a_failing_before_hook_is_the_jobs_retried_failure_naming_the_hook() -> None:
    ran: list[int] = []

    async def handler(ctx: JobContext) -> None:
        ran.append(ctx.attempt)

    async def leaky(ctx: JobContext) -> None:
        raise ValueError(f"token {ctx.payload['secret']}")

    registry = make_registry(HandlerSpec("t:h", handler, max_attempts=2))
    registry.add_layer(before_layer(leaky))
    first = await gochatd.testing.run_job("t:h", {"secret": "hunter2"}, registry=registry)
    assert (first.status, first.error_class) == (Outcome.RETRY, "ValueError")
    assert first.error is not None and "hunter2" not in first.error
    assert first.error.startswith(f"before_job hook {__name__}.")
    assert "leaky failed: ValueError: token [payload]" in first.error
    assert isinstance(first.exception, HookFailed) and first.exception.hook.endswith("leaky")
    last = await gochatd.testing.run_job("t:h", {"secret": "x"}, registry=registry, attempt=2)
    assert (last.status, last.error_class) == (Outcome.DEAD, "ValueError")
    assert ran == []  # the handler never ran


async def test_a_failing_after_hook_fails_a_completed_job_but_not_over_a_handler_error() -> None:
    async def grumpy(ctx: JobContext, error: Exception | None) -> None:
        raise NonRetryable("metrics sink refused")

    registry = make_registry(HandlerSpec("t:ok", _ok), HandlerSpec("t:boom", _boom))
    registry.add_layer(after_layer(grumpy))
    done = await gochatd.testing.run_job("t:ok", registry=registry)
    assert (done.status, done.error_class) == (Outcome.DEAD, "non_retryable")
    assert done.error is not None and "after_job hook" in done.error and "grumpy" in done.error
    failed = await gochatd.testing.run_job("t:boom", registry=registry)
    assert (failed.status, failed.error_class, failed.error) == (
        Outcome.RETRY, "KeyError", "'handler'")


async def test_a_middleware_error_is_named_and_one_that_skips_the_handler_completes() -> None:
    async def broken(ctx: JobContext, call_next: CallNext) -> None:
        await call_next()
        raise RuntimeError("span exporter down")

    registry = make_registry(HandlerSpec("t:ok", _ok))
    registry.add_layer(middleware_layer(broken))
    outcome = await gochatd.testing.run_job("t:ok", registry=registry)
    assert (outcome.status, outcome.error_class) == (Outcome.RETRY, "RuntimeError")
    assert outcome.error is not None and outcome.error.startswith("middleware hook ")
    ran: list[str] = []

    async def guard(ctx: JobContext, call_next: CallNext) -> None:
        if ctx.payload.get("skip"):
            return
        await call_next()

    async def handler(ctx: JobContext) -> None:
        ran.append("handler")

    skipping = make_registry(HandlerSpec("t:h", handler))
    skipping.add_layer(middleware_layer(guard))
    assert (await gochatd.testing.run_job("t:h", {"skip": True}, registry=skipping)).completed
    assert ran == []


def _runtime_handlers(seen: list[str]) -> list[HandlerSpec]:
    async def on_trio(ctx: JobContext) -> None:
        await trio.lowlevel.checkpoint()
        seen.append("trio")

    async def on_asyncio(ctx: JobContext) -> None:
        await asyncio.sleep(0)
        seen.append("asyncio")

    def in_thread(ctx: JobContext) -> None:
        seen.append("thread")

    return [handler_spec("rt:trio", on_trio), handler_spec("rt:asyncio", on_asyncio,
                                                            runtime="asyncio"),
            handler_spec("rt:thread", in_thread)]


def _awaiting_hooks(seen: list[str], registry: Registry) -> None:
    async def before(ctx: JobContext) -> None:
        await trio.sleep(0.001)
        seen.append(f"before:{ctx.job_type}")

    async def after(ctx: JobContext, error: Exception | None) -> None:
        await trio.sleep(0.001)
        seen.append(f"after:{ctx.job_type}:{error is None}")

    registry.add_layer(before_layer(before))
    registry.add_layer(after_layer(after))


async def test_awaiting_hooks_run_around_every_runtime_under_run_job() -> None:
    seen: list[str] = []
    registry = make_registry(*_runtime_handlers(seen))
    _awaiting_hooks(seen, registry)
    for runtime in ("trio", "asyncio", "thread"):
        seen.clear()
        assert (await gochatd.testing.run_job(f"rt:{runtime}", registry=registry)).completed
        assert seen == [f"before:rt:{runtime}", runtime, f"after:rt:{runtime}:True"]


async def test_a_daemon_runs_hooks_around_every_runtime_and_retries_a_hook_failure(
    sqlite_url: str,
) -> None:
    seen: list[str] = []
    registry = make_registry(*_runtime_handlers(seen), HandlerSpec("t:ok", _ok))
    _awaiting_hooks(seen, registry)

    async def refuse_ok(ctx: JobContext) -> None:
        if ctx.job_type == "t:ok":
            raise PermissionError("no tracing context")

    registry.add_layer(before_layer(refuse_ok))
    settings = make_settings(sqlite_url, worker_concurrency=4)
    async with started_worker(settings, registry=registry) as run:
        async with gochatd.Client(sqlite_url) as client:
            jobs = [await client.enqueue(f"rt:{r}") for r in ("trio", "asyncio", "thread")]
            refused = await client.enqueue("t:ok", max_attempts=3)
        await wait_all_status(run.worker.store, [j.id for j in jobs], JobStatus.COMPLETED,
                              timeout_s=30)
        # Each failure retries within milliseconds, so `retrying` is too brief to wait for:
        # the job ends dead after its 3 attempts, each refused by the hook.
        retried = (await wait_all_status(run.worker.store, [refused.id], JobStatus.DEAD,
                                         timeout_s=30))[refused.id]
    for runtime in ("trio", "asyncio", "thread"):  # jobs run concurrently: per job order
        at = seen.index(runtime)
        assert f"before:rt:{runtime}" in seen[:at] and f"after:rt:{runtime}:True" in seen[at:]
    assert retried.attempts == 3 and retried.error_class == "PermissionError"
    assert retried.last_error is not None and "refuse_ok failed" in retried.last_error


async def test_the_jobs_timeout_covers_its_hooks() -> None:
    stopped: list[str] = []

    async def stuck(ctx: JobContext) -> None:
        try:
            await trio.sleep_forever()
        finally:
            stopped.append("before")

    async def handler(ctx: JobContext) -> None:
        stopped.append("handler ran")

    registry = make_registry(HandlerSpec("t:slow", handler, timeout_s=0.2))
    registry.add_layer(before_layer(stuck))
    with trio.fail_after(10):
        outcome = await gochatd.testing.run_job("t:slow", registry=registry)
    assert (outcome.status, outcome.error_class) == (Outcome.RETRY, "timeout")
    assert stopped == ["before"]  # cancelled with the job; the handler never started


async def test_inline_enqueues_run_the_hooks(sqlite_url: str) -> None:
    trace: list[str] = []
    registry = _traced(trace)
    await gochatd.testing.migrate(sqlite_url)
    async with gochatd.Client(sqlite_url) as client:
        with gochatd.testing.inline(registry=registry) as run:
            await client.enqueue("t:ok")
    assert run.statuses() == [Outcome.COMPLETED]
    assert trace == ["b1", "mw:in", "b2:t:ok", "handler", "a2:ok", "mw:out", "a1:ok"]


def test_the_decorators_register_with_the_process_wide_registry() -> None:
    before = REGISTRY.layers
    try:
        @gochatd.before_job
        async def b(ctx: JobContext) -> None:
            return None

        @gochatd.after_job
        def a(ctx: JobContext, error: Exception | None) -> None:
            return None

        @gochatd.middleware
        async def m(ctx: JobContext, call_next: CallNext) -> None:
            await call_next()

        assert len(REGISTRY.layers) == len(before) + 3
        with pytest.raises(InvalidHandler) as refused:
            gochatd.middleware(lambda ctx, call_next: None)
        assert "must be an async def" in str(refused.value)
        assert "\n" not in str(refused.value)
    finally:
        REGISTRY.layers = before
