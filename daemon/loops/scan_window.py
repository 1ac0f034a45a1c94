"""How far back a maintenance scan looks: a keyset window instead of the whole index.

The reaper and the sweep look for rows that became interesting since their previous pass
(a lease that expired, a dispatch that went stale). Scanning only that window keeps each
pass O(new rows) even while a transaction held open elsewhere keeps every dead row
version in the indexes (docs/bench.md, idle-in-tx). A pass that may have left work behind
(it hit its limit, or failed) does not move the window; every ``full_every_s`` a pass looks
at everything, so a row outside every window (a foreign row with an old time, a commit that
landed after a pass looked) is still found.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

#: Added to each window: commits that land a little after the pass that should have seen
#: them, and clock steps between this process and the database.
MARGIN_S = 10.0
FULL_EVERY_S = 300.0


class ScanWindow:
    def __init__(
        self, *, margin_s: float = MARGIN_S, full_every_s: float = FULL_EVERY_S,
        clock: Callable[[], float] = trio.current_time,
    ) -> None:
        self.margin_s = margin_s
        self.full_every_s = full_every_s
        self._clock = clock
        self._complete_at: float | None = None  # start of the last complete pass
        self._full_at: float | None = None  # start of the last complete full pass
        self._started: float | None = None
        self._started_full = False

    def lookback_s(self, now: float | None = None) -> float | None:
        """What a pass starting now would look back (None: a full pass), without starting
        one: how far back a question about the window's rows must reach."""
        now = self._clock() if now is None else now
        if (self._complete_at is None or self._full_at is None
                or now - self._full_at >= self.full_every_s):
            return None
        return now - self._complete_at + self.margin_s

    def begin(self) -> float | None:
        """Start a pass: the seconds it must look back, or None for a full pass."""
        now = self._clock()
        lookback = self.lookback_s(now)
        self._started = now
        self._started_full = lookback is None
        return lookback

    def complete(self) -> None:
        """The pass begun last left nothing behind: later passes start from it."""
        if self._started is None:
            return
        self._complete_at = self._started
        if self._started_full:
            self._full_at = self._started
        self._started = None
