"""How far back the polling claim looks, per queue: a window of due times instead of the
whole claim index.

A claimed job's old entry stays in ``background_jobs_claimable_idx``, ahead of every waiting
job of its queue, until vacuum may remove it. While a snapshot held open elsewhere (a
REPEATABLE READ report, a transaction left idle) keeps every such entry, a claim that
starts at the head of the queue visits each of them: its cost grows with every job run
since the snapshot began (docs/chaos.md, ``active_readers``). A claim only needs jobs that
became due since its queue's last pass saw the head of the queue (the oldest job it
claimed; or, when it claimed fewer than it asked for, everything due), plus ``margin_s``
for commits that land after the pass that should have seen them. Every ``full_every_s`` a
pass looks at the whole queue, so a job outside every window (a commit slower than the
margin, a job enqueued with a due time long past, a row written by foreign SQL) still
runs, at most that much later. Monotonic seconds, turned into a due time by the database's
own ``now()``: the clock that decides what is due is never this process's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

#: Added to each window: a commit that lands after the pass that should have seen it.
MARGIN_S = 2.0
#: A pass over the whole queue at least this often.
FULL_EVERY_S = 5.0


class ClaimWindows:
    def __init__(self, *, margin_s: float = MARGIN_S, full_every_s: float = FULL_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.margin_s = margin_s
        self.full_every_s = full_every_s
        self._clock = clock
        self._complete_at: dict[str, float] = {}  # start of the last complete pass
        self._full_at: dict[str, float] = {}  # start of the last complete full pass
        self._started: dict[str, tuple[float, bool]] = {}

    def lookback_s(self, queue: str, now: float | None = None) -> float | None:
        """The seconds a pass starting now must look back, or None for a full pass."""
        now = self._clock() if now is None else now
        complete, full = self._complete_at.get(queue), self._full_at.get(queue)
        if complete is None or full is None or now - full >= self.full_every_s:
            return None
        return now - complete + self.margin_s

    def begin(self, queue: str) -> float | None:
        """Start a pass over ``queue``: what :meth:`lookback_s` says."""
        now = self._clock()
        lookback = self.lookback_s(queue, now)
        self._started[queue] = (now, lookback is None)
        return lookback

    def complete(self, queue: str, behind_s: float = 0.0) -> None:
        """The pass begun last over ``queue`` saw every job due up to ``behind_s`` seconds
        before its start: 0 when it claimed fewer than it asked for (nothing due was left),
        else how long its oldest claimed job had been due (a backlog: what waits behind
        that job is newer)."""
        started = self._started.pop(queue, None)
        if started is None:
            return
        at, full = started
        self._complete_at[queue] = at - max(0.0, behind_s)
        if full:
            self._full_at[queue] = at

    def widest_s(self, queues: Iterable[str]) -> float | None:
        """The widest window over ``queues`` (None when any needs a full pass)."""
        widest = 0.0
        for queue in queues:
            lookback = self.lookback_s(queue)
            if lookback is None:
                return None
            widest = max(widest, lookback)
        return widest
