"""The body the maintenance loops that poll the store share (pauses, routes, retention): a
pass, then a pause. A store that is down is counted and logged as a transient error and the
next pass tries again; anything else ends the daemon, as in every loop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NoReturn

import trio

from gochatd.counters import Counters
from gochatd.errors import StoreUnavailable


async def run_every(where: str, run_once: Callable[[], Awaitable[object]],
                    interval_s: Callable[[], float], counters: Counters,
                    task_status: trio.TaskStatus[None]) -> NoReturn:
    """``interval_s`` is read after each pass, so a reload takes effect at the next one."""
    task_status.started()
    while True:
        try:
            await run_once()
        except StoreUnavailable as exc:
            counters.transient_error(where, exc)
        await trio.sleep(interval_s())
