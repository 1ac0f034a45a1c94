"""Job type -> handler, plus the built-in ``sys:*`` handlers."""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from gochatd.errors import ConfigError, HandlerFailure, InvalidHandler, NonRetryable
from gochatd.worker.runtimes import adapt, check_runtime

if TYPE_CHECKING:
    from gochatd.context import JobContext
    from gochatd.hooks import Layer

#: A handler's return value is its result (docs/results.md): JSON, or None for none.
Handler = Callable[["JobContext"], Awaitable[Any]]
F = TypeVar("F", bound=Callable[..., object])

# \Z, not $: "$" also matches before a trailing newline ("default\n" is no queue name).
JOB_TYPE_RE = re.compile(r"^[A-Za-z0-9_.\-]+(:[A-Za-z0-9_.\-*]+)*\Z")
QUEUE_RE = re.compile(r"^[A-Za-z0-9_\-]{1,64}\Z")


@dataclass(frozen=True, slots=True)
class HandlerSpec:
    job_type: str
    fn: Handler
    queue: str = "default"
    timeout_s: float | None = None
    max_attempts: int = 25
    #: How ``fn`` was written (runtimes.py); ``fn`` itself is always awaited on Trio.
    runtime: str = "trio"


def handler_spec(
    job_type: str, fn: Callable[..., object], *, runtime: str | None = None,
    queue: str = "default", timeout_s: float | None = None, max_attempts: int = 25,
) -> HandlerSpec:
    """A spec for ``fn`` in its runtime (checked: ``InvalidHandler``), wrapped for Trio."""
    chosen = check_runtime(job_type, fn, runtime)
    return HandlerSpec(job_type, adapt(fn, chosen), queue, timeout_s, max_attempts, chosen)


class Registry:
    def __init__(self) -> None:
        self._specs: dict[str, HandlerSpec] = {}
        #: The hooks around every job (hooks.py), outermost first; empty: none run.
        self.layers: tuple[Layer, ...] = ()

    def add(self, spec: HandlerSpec) -> None:
        self._specs[spec.job_type] = spec

    def add_layer(self, layer: Layer) -> None:
        self.layers = (*self.layers, layer)

    def get(self, job_type: str) -> HandlerSpec | None:
        return self._specs.get(job_type)

    def job_types(self) -> list[str]:
        return sorted(self._specs)

    def runtimes(self) -> set[str]:
        """The runtimes the registered handlers need (the daemon opens trio-asyncio for
        ``asyncio``)."""
        return {spec.runtime for spec in self._specs.values()}


#: The process-wide registry that ``@gochatd.job`` writes to.
REGISTRY = Registry()


#: Who registered each job type through ``@gochatd.job`` ("module.function"): a second
#: function for a type is refused; the same one again (a module imported twice) is not.
_ORIGINS: dict[str, str] = {}


def job(
    job_type: str,
    *,
    queue: str = "default",
    timeout_s: float | None = None,
    max_attempts: int = 25,
    runtime: str | None = None,
) -> Callable[[F], F]:
    """Register ``handler(ctx: JobContext) -> None`` for ``job_type``: an ``async def`` on
    Trio (``runtime="trio"``, the default for one) or on asyncio (``runtime="asyncio"``), or
    a plain ``def`` in a worker thread (``runtime="thread"``, the default for one). A bad
    name or setting, a runtime that is unknown or does not fit the function, a type another
    function already handles, or a built-in ``sys:`` type raises ``InvalidHandler``."""
    if not isinstance(job_type, str) or not JOB_TYPE_RE.match(job_type) or len(job_type) > 200:
        raise InvalidHandler(f"job type {job_type!r}: expected letters, digits, '_', '-', '.' "
                             "and ':' (at most 200)")
    if not isinstance(queue, str) or not QUEUE_RE.match(queue):
        raise InvalidHandler(f"{job_type}: queue {queue!r}: expected 1-64 letters, digits, "
                             "'_' or '-'")
    if timeout_s is not None and timeout_s <= 0:
        raise InvalidHandler(f"{job_type}: timeout_s must be > 0")
    if max_attempts < 1:
        raise InvalidHandler(f"{job_type}: max_attempts must be >= 1")

    def register(fn: F) -> F:
        origin = _origin_of(job_type, fn)
        spec = handler_spec(job_type, fn, runtime=runtime, queue=queue, timeout_s=timeout_s,
                            max_attempts=max_attempts)
        REGISTRY.add(spec)
        _ORIGINS[job_type] = origin
        return fn

    return register


def _origin_of(job_type: str, fn: Callable[..., object]) -> str:
    """``fn``'s name, once no other function holds ``job_type`` (``InvalidHandler``)."""
    module = getattr(fn, "__module__", None) or "?"
    origin = f"{module}.{getattr(fn, '__qualname__', repr(fn))}"
    if job_type.startswith("sys:") and module != __name__:
        raise InvalidHandler(f"job type {job_type!r} is built in ({origin} cannot replace "
                             "it); give yours another name")
    held = _ORIGINS.get(job_type)
    if held is not None and held != origin and REGISTRY.get(job_type) is not None:
        raise InvalidHandler(f"job type {job_type!r} is already handled by {held}; {origin} "
                             "cannot register it too")
    return origin


def load_handler_modules(names: list[str]) -> None:
    """Import the handler modules: installed packages first, then the current directory (as
    ``python -m`` would, and uvicorn and celery do), so ``--handlers myapp.jobs`` run beside
    ``myapp/`` finds it without installing it."""
    if names:
        cwd = os.getcwd()
        if cwd not in sys.path and "" not in sys.path:
            sys.path.append(cwd)
    for name in names:
        try:
            importlib.import_module(name)
        except InvalidHandler as exc:
            raise ConfigError(f"handlers: {name}: {exc}") from None
        except (ImportError, TypeError, ValueError) as exc:  # TypeError: a relative name
            raise ConfigError(
                f"handlers: cannot import module {name!r} ({exc}); it must be importable from "
                f"the installed packages or the current directory {os.getcwd()}"
            ) from None
        except Exception as exc:  # the module itself failed (a SyntaxError names its line)
            raise ConfigError(
                f"handlers: importing {name!r} failed: {type(exc).__name__}: {exc}"
            ) from None


@job("sys:noop")
async def _noop(ctx: JobContext) -> None:
    return None


@job("sys:sleep")
async def _sleep(ctx: JobContext) -> None:
    seconds = ctx.payload.get("seconds", 1.0)
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or seconds < 0:
        raise NonRetryable("sys:sleep needs a non-negative number in 'seconds'")
    await trio.sleep(float(seconds))


class SysFailError(HandlerFailure):
    """The failure ``sys:fail`` raises: ``error_class`` ``SysFailError`` (retried) or
    ``non_retryable`` (dead at once). Its text is the job's own ``message`` field, which the
    stored error shows (that is what the type is for); credentials and secret-looking pairs
    in it, and the payload's other strings, are still masked (obs/redact.py)."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__("SysFailError" if retryable else "non_retryable", message,
                         retryable=retryable)


@job("sys:fail")
async def _fail(ctx: JobContext) -> None:
    message = str(ctx.payload.get("message", "sys:fail"))
    raise SysFailError(message, retryable=bool(ctx.payload.get("retryable", True)))
