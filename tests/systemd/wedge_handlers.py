"""A handler that wedges the daemon's event loop with a blocking call, as a buggy handler
would: the watchdog pings come from that loop, so they must stop while it is stuck."""

from __future__ import annotations

import time

import gochatd


@gochatd.job("test:wedge_loop", max_attempts=1)
async def wedge_loop(ctx: gochatd.JobContext) -> None:
    time.sleep(float(ctx.payload.get("seconds", 1.0)))  # noqa: ASYNC251  # the point: block the loop
