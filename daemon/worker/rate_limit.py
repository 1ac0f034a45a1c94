"""Rate limits per queue on the claim path (``worker.queue_rates``, docs/rate-limits.md).

``RateLimitedClaims`` stands between the claimers (the intake's stream and polling claims,
the backlog loop) and the store. Without rates (the default) ``claimer()`` hands out the
store itself: the claim path's only cost is checking an empty mapping. Otherwise a rate-limited queue is
claimed on its own by ``store.claim_rate_limited``: one transaction that counts the jobs
started in the queue's current window of the database clock, fleet-wide, and claims at
most what the window has left (store/rate_windows.py). The other queues keep the plain
claims, in the round's order.

A job held back is not claimed: it stays ``queued``, is charged no attempt and keeps its
due time. Once a claim filled a queue's window this daemon skips the queue (no store call)
until the window ends, by the window's remaining time as the database reported it. In
streams mode the held queue's entries are acked like any unclaimed entry and the backlog
loop (worker/capped_backlog.py) claims its waiting jobs when the window reopens; in polling
mode the poller does, waking no later than that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import trio

from gochatd.config.rates import QueueRate
from gochatd.model import ClaimedJob
from gochatd.store import JobStore


class Claimer(Protocol):
    """What the claimers call: the store itself, or ``RateLimitedClaims`` in front of it."""

    async def claim_due_jobs(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]: ...

    async def claim_delivered_jobs(
        self, delivered: Mapping[str, Sequence[int | None]], owner: str, lease_s: float
    ) -> list[ClaimedJob]: ...


class RateLimitedClaims:
    def __init__(self, store: JobStore, rates: Mapping[str, QueueRate]) -> None:
        self._store = store
        self.rates: dict[str, QueueRate] = dict(rates)
        #: Queue -> when (trio clock) to claim it again, while jobs of it may be waiting: at
        #: once after a claim that took all it asked for; after a full window, when it ends
        #: (skipped until then).
        self._held: dict[str, float] = {}

    def reconfigure(self, rates: Mapping[str, QueueRate]) -> None:
        self.rates = dict(rates)
        self._held.clear()

    def claimer(self) -> Claimer:
        """The store itself while no queue has a rate (nothing in between: the claim path's
        cost without rates is this check), else this object."""
        return self if self.rates else self._store

    async def claim_due_jobs(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        """The polling claim: up to ``limit`` due jobs, filling ``queues`` in order."""
        rates = self.rates
        if not rates:
            return await self._store.claim_due_jobs(queues, limit, owner, lease_s)
        claimed: list[ClaimedJob] = []
        plain: list[str] = []  # consecutive queues without a rate: one plain claim
        for queue in [*queues, ""]:  # "" (no queue name) flushes the last run
            if queue and queue not in rates:
                plain.append(queue)
                continue
            if plain and len(claimed) < limit:
                claimed.extend(await self._store.claim_due_jobs(
                    plain, limit - len(claimed), owner, lease_s))
            plain = []
            if queue and len(claimed) < limit:
                claimed.extend(await self._claim_limited(
                    queue, limit - len(claimed), owner, lease_s, dispatched_only=False))
        return claimed

    async def claim_delivered_jobs(
        self, delivered: Mapping[str, Sequence[int | None]], owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        """The stream claim. A rate-limited queue's entries are tokens of the queue (as in a
        queue with priorities: docs/priority.md): as many of its first due jobs among those
        given an entry as the window allows."""
        rates = self.rates
        if not rates or not any(queue in rates for queue in delivered):
            return await self._store.claim_delivered_jobs(delivered, owner, lease_s)
        plain = {q: ids for q, ids in delivered.items() if q not in rates}
        claimed = (await self._store.claim_delivered_jobs(plain, owner, lease_s)
                   if plain else [])
        for queue, ids in delivered.items():
            if queue in rates and ids:
                claimed.extend(await self._claim_limited(
                    queue, len(ids), owner, lease_s, dispatched_only=True))
        return claimed

    async def _claim_limited(self, queue: str, limit: int, owner: str, lease_s: float,
                             *, dispatched_only: bool) -> list[ClaimedJob]:
        now = trio.current_time()
        if self._held.get(queue, now) > now:
            return []
        got = await self._store.claim_rate_limited(queue, self.rates[queue], limit, owner,
                                                   lease_s, dispatched_only=dispatched_only)
        if got.full:
            self._held[queue] = trio.current_time() + got.window_left_s
        elif len(got.claimed) >= limit:
            self._held[queue] = now
        else:
            self._held.pop(queue, None)
        return got.claimed

    def reopened(self, queues: Sequence[str]) -> list[str]:
        """The rate-limited ``queues`` whose full window has ended: their held-back jobs
        wait for a claim (streams mode: the backlog loop's)."""
        now = trio.current_time()
        return [q for q in queues if q in self._held and self._held[q] <= now]

    def next_open_in_s(self, default_s: float) -> float:
        """Until the earliest held queue may be claimed again (at most ``default_s``)."""
        now = trio.current_time()
        ahead = [t - now for t in self._held.values() if t > now]
        return min(default_s, *ahead) if ahead else default_s

    def unheld(self, queues: Sequence[str]) -> Sequence[str]:
        """``queues`` but those skipped until their full window ends (the poller's next due
        time leaves their due jobs out: it wakes when the window ends)."""
        if not self._held:
            return queues
        now = trio.current_time()
        return [q for q in queues if self._held.get(q, now) <= now]

    def unlimited(self, queues: Sequence[str]) -> list[str]:
        """``queues`` without a rate."""
        rates = self.rates
        return [q for q in queues if q not in rates] if rates else list(queues)

    def backlog_wait_s(self, interval_s: float) -> float:
        """The backlog loop's sleep: ``interval_s``, but with rates no longer than the
        shortest period, so that a held queue is claimed soon after its window ends."""
        if not self.rates:
            return interval_s
        shortest = min(rate.period_s for rate in self.rates.values())
        return self.next_open_in_s(min(interval_s, float(shortest)))
