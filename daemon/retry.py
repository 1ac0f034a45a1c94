"""Retry policy: pure functions of the attempt number."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """Exponential backoff with full jitter and a cap.

    The delay before attempt ``n + 1`` is uniform in ``[0, min(cap_s, base_s * 2**(n-1))]``,
    never below ``min_s``.
    """

    base_s: float = 1.0
    cap_s: float = 3600.0
    min_s: float = 0.0

    def delay_s(self, attempt: int, rng: random.Random | None = None) -> float:
        exp = min(self.cap_s, self.base_s * (2.0 ** max(0, min(attempt - 1, 62))))
        draw = (rng or random).uniform(0.0, exp)
        return max(self.min_s, draw)


def next_delay_s(
    backoff: Backoff, attempt: int, max_attempts: int, requested_s: float | None = None
) -> float | None:
    """Seconds until the next attempt, or None when attempts are exhausted. A delay the
    handler asked for (``RetryAfter``, an HTTP ``Retry-After``) replaces the backoff draw,
    within ``min_s``..``cap_s``."""
    if attempt >= max_attempts:
        return None
    if requested_s is not None:
        return min(backoff.cap_s, max(backoff.min_s, requested_s))
    return backoff.delay_s(attempt)
