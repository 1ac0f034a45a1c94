"""Handlers and hooks a daemon imports with ``--handlers`` (tests/e2e/test_hooks_daemon.py):
module-level ``@gochatd.before_job``, ``after_job`` and ``middleware``, as docs/hooks.md
shows them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

import gochatd
from gochatd.context import JobContext

HOOKED = "e2e:hooked"


@gochatd.job(HOOKED, max_attempts=2)
def hooked(ctx: JobContext) -> None:  # a thread handler: the hooks still run on Trio
    ctx.log.info("e2e_handler_ran")


@gochatd.before_job
async def refuse_when_asked(ctx: JobContext) -> None:
    await trio.lowlevel.checkpoint()
    if ctx.payload.get("refuse"):
        raise PermissionError(f"refused {ctx.payload['refuse']}")


@gochatd.after_job
def note_outcome(ctx: JobContext, error: Exception | None) -> None:
    ctx.log.info("e2e_hook_after", error_class=type(error).__name__ if error else None)


@gochatd.middleware
async def around(ctx: JobContext, call_next: Callable[[], Awaitable[None]]) -> None:
    ctx.log.info("e2e_middleware_in")
    await call_next()
