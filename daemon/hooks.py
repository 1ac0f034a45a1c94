"""Hooks around every job: ``@gochatd.before_job``, ``@gochatd.after_job`` and
``@gochatd.middleware`` (docs/hooks.md).

Each hook is a layer around the handler; the first registered is the outermost, so before
hooks run in registration order and after hooks in reverse (like nested ``with`` blocks).
The layers run on Trio inside the job's cancel scope, whatever the handler's runtime: the
job's timeout covers them and a stop (cancel, shutdown, lost lease) cancels them with it.
A hook's exception is the job's failure (``HookFailed``, naming the hook), retried like a
handler's; it never reaches the daemon. With no hook registered the runner awaits the
handler directly (``Registry.layers`` is empty): nothing is added per job.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from gochatd.errors import HookFailed, InvalidHandler

if TYPE_CHECKING:
    from gochatd.context import JobContext
    from gochatd.worker.registry import Handler, Registry

#: The rest of the chain, as a middleware sees it: ``await call_next()``.
CallNext = Callable[[], Awaitable[None]]
#: A layer: ``layer(ctx, call_next)``; ``call_next`` runs the inner layers and the handler.
Layer = Callable[["JobContext", CallNext], Awaitable[None]]
F = TypeVar("F", bound=Callable[..., Any])


def hook_name(fn: Callable[..., Any]) -> str:
    """What the stored error calls a hook: ``module.qualname``."""
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


def _awaitable(kind: str, fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """``fn`` awaited on Trio: an ``async def`` as it is, a plain ``def`` called in place
    (it runs on the daemon's loop, so it must be quick: a counter, a log line)."""
    if not callable(fn):
        raise InvalidHandler(f"@gochatd.{kind}: {fn!r} is not a function")
    if inspect.iscoroutinefunction(fn):
        return fn

    async def called(*args: Any) -> Any:
        return fn(*args)

    return called


def before_layer(fn: Callable[[JobContext], Any]) -> Layer:
    name, call = hook_name(fn), _awaitable("before_job", fn)

    async def before(ctx: JobContext, call_next: CallNext) -> None:
        try:
            await call(ctx)
        except Exception as exc:
            raise HookFailed("before_job", name, exc) from exc
        await call_next()

    return before


def after_layer(fn: Callable[[JobContext, Exception | None], Any]) -> Layer:
    """After the handler returned (``error`` None) or raised (``error`` is the exception, or
    the ``HookFailed`` of an inner hook), which stays the job's failure. Not run when the
    job is cancelled (timeout, stop): its scope is cancelled, so nothing more may run."""
    name, call = hook_name(fn), _awaitable("after_job", fn)

    async def after(ctx: JobContext, call_next: CallNext) -> None:
        try:
            await call_next()
        except Exception as exc:
            await _after_failed(call, name, ctx, exc)
            raise
        try:
            await call(ctx, None)
        except Exception as exc:
            raise HookFailed("after_job", name, exc) from exc

    return after


async def _after_failed(call: Callable[..., Awaitable[Any]], name: str, ctx: JobContext,
                        error: Exception) -> None:
    """Tell the hook about a failure; its own error is logged, the first one stands."""
    try:
        await call(ctx, error)
    except Exception as exc:
        ctx.log.warning("job_hook_failed", hook=name, error_class=type(exc).__name__)


def middleware_layer(fn: Callable[[JobContext, CallNext], Awaitable[None]]) -> Layer:
    if not inspect.iscoroutinefunction(fn):
        raise InvalidHandler(f"@gochatd.middleware: {hook_name(fn)} must be an async def "
                             "taking (ctx, call_next)")
    name = hook_name(fn)

    async def around(ctx: JobContext, call_next: CallNext) -> None:
        inner_failed: list[Exception] = []

        async def guarded_next() -> None:
            try:
                await call_next()
            except Exception as exc:
                inner_failed.append(exc)
                raise

        try:
            await fn(ctx, guarded_next)
        except Exception as exc:
            if inner_failed and exc is inner_failed[-1]:
                raise  # the handler's (or an inner hook's) failure, passed through
            raise HookFailed("middleware", name, exc) from exc

    return around


async def run_layers(layers: Sequence[Layer], handler: Handler, ctx: JobContext) -> Any:
    """``handler(ctx)`` inside ``layers`` (outermost first); what the handler returned (its
    result, docs/results.md: the layers pass it by, they do not return it)."""
    returned: list[Any] = [None]

    async def step(index: int) -> None:
        if index == len(layers):
            returned[0] = await handler(ctx)
            return
        await layers[index](ctx, lambda: step(index + 1))

    await step(0)
    return returned[0]


def before_job(fn: F) -> F:
    """Run ``fn(ctx)`` before every job's handler (an ``async def``, or a quick ``def``)."""
    _registry().add_layer(before_layer(fn))
    return fn


def after_job(fn: F) -> F:
    """Run ``fn(ctx, error)`` after every job's handler returned (``error`` None) or raised."""
    _registry().add_layer(after_layer(fn))
    return fn


def middleware(fn: F) -> F:
    """Wrap every job: ``async def fn(ctx, call_next)`` that awaits ``call_next()`` once."""
    _registry().add_layer(middleware_layer(fn))
    return fn


def _registry() -> Registry:
    from gochatd.worker.registry import REGISTRY

    return REGISTRY
