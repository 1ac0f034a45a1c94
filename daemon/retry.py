"""Retry policy: pure functions of the attempt number."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

#: The longest wait a ``Retry-After`` header is taken for (a larger one is this): an hour,
#: ``worker.retry_cap_s``'s default. Job retries are capped again by ``retry_cap_s``.
MAX_RETRY_AFTER_S = 3600.0


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


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date, at most
    ``MAX_RETRY_AFTER_S``; a date in the past is 0. None when absent or unreadable. An HTTP
    date is always GMT (RFC 9110), so a date without a zone (``-0000``) is read as UTC. The
    one reader for the HTTP handlers and the outbox webhook."""
    if not value:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return min(float(text), MAX_RETRY_AFTER_S)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(0.0, delta), MAX_RETRY_AFTER_S)
