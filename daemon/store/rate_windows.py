"""Rate-limited claims (``worker.queue_rates``, docs/rate-limits.md): at most ``count`` jobs
of a queue start per epoch-aligned window of ``period_s`` seconds of the database clock,
across every daemon of the fleet.

One claim of one rate-limited queue is one transaction, one unit (``ops.claim_rate_limited``):

1. ``lock_queue_rate_window`` locks the queue's row in ``queue_rate_windows`` (PostgreSQL:
   the upsert's row lock, held to the commit; SQLite: ``BEGIN IMMEDIATE``) and reads how
   many jobs started in the current window;
2. the claim takes at most ``count - used`` due jobs of the queue (the plain claim, or the
   capped one when caps are configured);
3. ``charge_queue_rate_window`` adds what it claimed to the window of the claimed rows'
   ``locked_at``, their start time.

Claimers of one queue are serialised by the row lock and each sees every earlier claim, so
the count holds fleet-wide; a job held back is not claimed at all (no attempt charged, and
it stays ``queued``). On PostgreSQL ``now()`` is the transaction's start, so the window read
in step 1 is the one its jobs start in; a transaction that waited for the lock past the
window's end finds a newer window in the row and claims nothing.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gochatd.config.rates import QueueRate
from gochatd.model import ClaimedJob

#: ``locked_at``'s place in a claimed row (store/queries.py JOB_COLUMNS).
LOCKED_AT = 15


@dataclass(frozen=True, slots=True)
class RateClaim:
    """What a rate-limited claim did: the claimed rows, whether the window is now full, and
    how long the window it read has left (database clock)."""

    rows: list[Any]
    full: bool
    window_left_s: float


@dataclass(frozen=True, slots=True)
class RateLimitedClaim:
    """``RateClaim`` with the rows as claimed jobs (the store's answer)."""

    claimed: list[ClaimedJob]
    full: bool
    window_left_s: float


def claim_within_rate(
    run: Callable[[str, dict[str, Any]], list[Any]], claim: Callable[[int], list[Any]],
    queue: str, rate: QueueRate, limit: int,
) -> RateClaim:
    """Steps 1-3 over ``run`` (a named statement on the transaction's connection) and
    ``claim`` (at most n due jobs of ``queue``)."""
    params = {"queue": queue, "period_s": rate.period_s, "count": rate.count}
    used, left_s = run("lock_queue_rate_window", params)[0]
    allowed = max(0, rate.count - int(used))
    rows = claim(min(limit, allowed)) if limit > 0 and allowed > 0 else []
    windows = Counter(_window_start(row[LOCKED_AT], rate.period_s) for row in rows)
    for window_start in sorted(windows):
        run("charge_queue_rate_window",
            {**params, "window_start": window_start, "n": windows[window_start]})
    full = len(rows) >= allowed  # nothing left in this window
    return RateClaim(rows, full=full, window_left_s=max(0.0, float(left_s)))


def _window_start(locked_at: datetime | float, period_s: int) -> int:
    epoch = locked_at.timestamp() if isinstance(locked_at, datetime) else float(locked_at)
    return math.floor(epoch / period_s) * period_s


__all__ = ["RateClaim", "RateLimitedClaim", "claim_within_rate"]
