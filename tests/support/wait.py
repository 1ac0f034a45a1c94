"""Waiting on conditions with deadlines; tests never sleep to synchronise."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

T = TypeVar("T")


async def wait_until(
    probe: Callable[[], Awaitable[T]], *, timeout_s: float = 10.0, interval_s: float = 0.02,
    what: str = "condition",
) -> T:
    """Poll ``probe`` until it returns a truthy value; fail with ``what`` at the deadline."""
    last: T | None = None
    with trio.move_on_after(timeout_s):
        while True:
            last = await probe()
            if last:
                return last
            await trio.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")
