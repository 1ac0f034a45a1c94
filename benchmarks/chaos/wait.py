"""Conditions with deadlines. The runner never sleeps to synchronise: it polls a condition
until it holds or its deadline passes. (Sleeps that are a fault's own timing, such as
"kill a worker every 3 s", live in the scenarios and say so.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    pass


def poll_until(
    probe: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.1,
    tick: Callable[[], None] | None = None,
) -> T:
    """Call ``probe`` until it returns something truthy; ``tick`` runs every round (the
    fleet uses it to notice and restart crashed daemons). Raises ``WaitTimeout``."""
    deadline = time.monotonic() + timeout_s
    while True:
        if tick is not None:
            tick()
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout_s:.1f}s waiting for {what} (last: {last!r})")
        time.sleep(interval_s)


def hold_for(seconds: float, tick: Callable[[], None] | None = None, interval_s: float = 0.1) -> None:
    """A fault's own duration (a partition lasts this long): keeps ticking meanwhile."""
    end = time.monotonic() + seconds
    while True:
        if tick is not None:
            tick()
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(interval_s, left))
