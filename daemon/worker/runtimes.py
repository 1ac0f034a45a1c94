"""How a handler runs: ``trio`` (an ``async def`` on the daemon's loop), ``asyncio`` (an
``async def`` that uses asyncio, run through trio-asyncio) or ``thread`` (a plain ``def``, run
in a worker thread). ``@gochatd.job(..., runtime=...)`` checks the choice against the function
(``check_runtime``) and wraps it so the runner awaits every handler the same way (``adapt``).

asyncio: the daemon opens one trio-asyncio loop for its lifetime when a registered handler
needs it (service.py); a handler is an asyncio task on it, awaited from the job's Trio task.
The job's cancel scope (timeout, operator cancel, shutdown, lost lease) cancels that task
and waits until it has finished, so its ``finally`` blocks run before the job's outcome is
written; a handler that swallows the cancellation still ends as cancelled (the scope is
checked after it returns).

thread: the job's task waits for the function in a thread of its own. A thread cannot be
stopped from outside: on a timeout or stop the job ends at once (reported as such) and the
thread is left to finish its call in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
from collections.abc import AsyncIterator, Callable, Collection
from typing import TYPE_CHECKING, Any, NoReturn

import outcome
import trio

from gochatd.errors import InvalidHandler

if TYPE_CHECKING:
    from gochatd.context import JobContext
    from gochatd.worker.registry import Handler

RUNTIMES = ("trio", "asyncio", "thread")
#: The thread handlers' own limiter: the job pool already bounds them (worker.concurrency).
_THREADS: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("gochatd_threads")


def check_runtime(job_type: str, fn: Callable[..., Any], runtime: str | None) -> str:
    """The runtime ``fn`` runs with: the one asked for, or by its kind when left out (an
    ``async def``: trio, a plain ``def``: thread). ``InvalidHandler`` (one line) when the
    value is unknown or does not fit the function."""
    where = f"@gochatd.job({job_type!r}" + (f", runtime={runtime!r})" if runtime else ")")
    name = getattr(fn, "__qualname__", repr(fn))
    if not callable(fn):
        raise InvalidHandler(f"{where}: {name} is not a function")
    # An object whose __call__ is an async def counts as one.
    is_async = inspect.iscoroutinefunction(fn) or (
        not inspect.isfunction(fn) and inspect.iscoroutinefunction(type(fn).__call__))
    if runtime is None:
        return "trio" if is_async else "thread"
    if runtime not in RUNTIMES:
        raise InvalidHandler(
            f"{where}: runtime must be 'trio', 'asyncio' or 'thread', got {runtime!r}")
    if runtime == "thread" and is_async:
        raise InvalidHandler(f"{where}: {name} is an async def; runtime 'thread' runs a plain "
                             "def (use runtime='trio' or 'asyncio' for an async def)")
    if runtime != "thread" and not is_async:
        raise InvalidHandler(f"{where}: {name} is a plain def; runtime {runtime!r} runs an "
                             "async def (a plain def runs with runtime='thread')")
    return runtime


def adapt(fn: Callable[..., Any], runtime: str) -> Handler:
    """``fn`` as an ``async def handler(ctx)`` the runner awaits on Trio."""
    if runtime == "asyncio":
        return _on_asyncio(fn)
    if runtime == "thread":
        return _in_thread(fn)
    handler: Handler = fn
    return handler


@contextlib.asynccontextmanager
async def loop_for(runtimes: Collection[str]) -> AsyncIterator[None]:
    """The daemon's one trio-asyncio loop, open while it runs, when an asyncio handler is
    registered (else nothing: trio-asyncio is not even imported). Its tasks inherit it."""
    if "asyncio" not in runtimes:
        yield
        return
    import trio_asyncio

    async with trio_asyncio.open_loop():
        yield


def _on_asyncio(fn: Callable[..., Any]) -> Handler:
    async def run_on_asyncio(ctx: JobContext) -> Any:
        import trio_asyncio

        loop = trio_asyncio.current_loop.get()
        if loop is None:
            raise RuntimeError("an asyncio handler needs the daemon's trio-asyncio loop (loop_for)")
        value = await _await_on(loop, fn, ctx)
        # A handler that swallowed its cancellation still ends as cancelled.
        await trio.lowlevel.checkpoint_if_cancelled()
        return value

    run_on_asyncio.__qualname__ = getattr(fn, "__qualname__", "handler")
    return run_on_asyncio


async def _await_on(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], ctx: JobContext
                    ) -> Any:
    """``fn(ctx)`` as a task on ``loop`` (the trio-asyncio loop, in this thread), awaited by
    the current Trio task. The task hands its outcome straight to the Trio task when it ends:
    one crossing less than trio-asyncio's ``run_aio_coroutine``, whose answer travels as a
    done callback through the loop again (~40 % of trio-asyncio's CPU per asyncio job). A Trio
    cancellation cancels the task and waits until it has ended."""
    me = trio.lowlevel.current_task()
    started = False

    async def body() -> None:
        nonlocal started
        started = True
        try:
            value = await fn(ctx)
        except asyncio.CancelledError as exc:
            trio.lowlevel.reschedule(me, outcome.Error(exc))
            raise  # the task ends cancelled
        except BaseException as exc:  # handed to the job's Trio task, which raises it
            trio.lowlevel.reschedule(me, outcome.Error(exc))
            return
        trio.lowlevel.reschedule(me, outcome.Value(value))

    task = loop.create_task(body())
    raise_cancel: Callable[[], NoReturn] | None = None

    def abort(raise_cancel_arg: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
        nonlocal raise_cancel
        raise_cancel = raise_cancel_arg
        task.cancel()
        # Not started yet: it never will (the cancel ends it first), nothing to wait for.
        return trio.lowlevel.Abort.FAILED if started else trio.lowlevel.Abort.SUCCEEDED

    try:
        return await trio.lowlevel.wait_task_rescheduled(abort)
    except asyncio.CancelledError:
        if raise_cancel is None:
            raise  # cancelled from the asyncio side, not by the job's scope
        raise_cancel()


def _in_thread(fn: Callable[..., Any]) -> Handler:
    async def run_in_thread(ctx: JobContext) -> Any:
        try:
            limiter = _THREADS.get()
        except LookupError:
            limiter = trio.CapacityLimiter(math.inf)
            _THREADS.set(limiter)
        return await trio.to_thread.run_sync(fn, ctx, abandon_on_cancel=True, limiter=limiter)

    run_in_thread.__qualname__ = getattr(fn, "__qualname__", "handler")
    return run_in_thread


def timeout_message(runtime: str, timeout_s: float) -> str:
    """The job's last_error after a timeout; a thread's call runs on (it cannot be stopped)."""
    if runtime == "thread":
        return (f"handler timed out after {timeout_s}s in its thread "
                "(the thread runs on until the function returns)")
    return f"handler timed out after {timeout_s}s"
