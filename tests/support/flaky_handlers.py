"""Handlers for tests that need a job to fail once and then succeed, loaded by a real daemon
with ``--handlers tests.support.flaky_handlers``.

``test:fail_once`` (payload ``{"marker": "/abs/path"}``): when the marker file does not exist
yet, it creates it and raises ``gochatd.NonRetryable`` so the job goes straight to ``dead``;
once the file exists (an operator's manual retry), it completes, its result
``{"marker": <file name>, "attempt": n}``.
"""

from __future__ import annotations

import trio

import gochatd
from gochatd.context import JobContext


@gochatd.job("test:fail_once")
async def fail_once(ctx: JobContext) -> dict[str, object]:
    marker = ctx.payload.get("marker")
    if not isinstance(marker, str) or not marker:
        raise gochatd.NonRetryable("test:fail_once needs a file path in 'marker'")
    path = trio.Path(marker)
    if not await path.exists():
        await path.touch()
        raise gochatd.NonRetryable(f"first attempt fails on purpose (marker {path.name} created)")
    return {"marker": path.name, "attempt": ctx.attempt}  # its result (docs/results.md)
