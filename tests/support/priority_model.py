"""The claim order of docs/priority.md in plain Python, and a queue under load simulated with it.

``claim_order`` is what every claim's SQL must agree with, on both databases
(tests/contract/test_priority_order.py). ``old_claim_order`` is the rule it replaced
(``rank = scheduled_at - priority * aging_s``), kept to show that the overload of issue 23
starves under it and not under the new one (tests/unit/test_priority_model.py).

Times are seconds on one clock (the database's in the real thing)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Waiting:
    """A waiting job: its id (enqueue order), priority and due time (``scheduled_at``)."""

    id: int
    priority: int
    due_s: float


#: (waiting jobs, now, aging_s, how many) -> the ids one claim takes, best first.
Order = Callable[[Sequence[Waiting], float, float, int], list[int]]


def level(job: Waiting, now_s: float, aging_s: float, top: int) -> int:
    """The job's priority plus one step per ``aging_s`` seconds it has been due, at most
    ``top``: the highest priority among the queue's due waiting jobs."""
    return min(job.priority + math.floor((now_s - job.due_s) / aging_s), top)


def claim_order(waiting: Sequence[Waiting], now_s: float, aging_s: float, n: int) -> list[int]:
    """The rule: highest level first, then the longest due, then the lowest id."""
    due = [j for j in waiting if j.due_s <= now_s]
    if not due:
        return []
    top = max(j.priority for j in due)
    due.sort(key=lambda j: (-level(j, now_s, aging_s, top), j.due_s, j.id))
    return [j.id for j in due[:n]]


def old_claim_order(waiting: Sequence[Waiting], now_s: float, aging_s: float,
                    n: int) -> list[int]:
    """The replaced rule: the earliest ``due - priority * aging_s``, without a top."""
    due = [j for j in waiting if j.due_s <= now_s]
    due.sort(key=lambda j: (j.due_s - j.priority * aging_s, j.due_s, j.id))
    return [j.id for j in due[:n]]


def simulate(order: Order, arrivals: Sequence[Waiting], *, slots: int, work_s: float,
             aging_s: float) -> dict[int, float]:
    """Each job's wait (due to start) in a queue of ``slots`` handler slots whose jobs each
    take ``work_s``: a slot that frees claims one job by ``order``."""
    pending = sorted(arrivals, key=lambda j: (j.due_s, j.id))
    free_at = [0.0] * slots  # a heap: when each slot frees
    waiting: list[Waiting] = []
    waits: dict[int, float] = {}
    now, i = 0.0, 0
    while i < len(pending) or waiting:
        now = max(now, free_at[0])
        if not waiting:
            now = max(now, pending[i].due_s)
        while i < len(pending) and pending[i].due_s <= now:
            waiting.append(pending[i])
            i += 1
        [job_id] = order(waiting, now, aging_s, 1)
        job = next(j for j in waiting if j.id == job_id)
        waiting.remove(job)
        waits[job_id] = now - job.due_s
        heapq.heapreplace(free_at, now + work_s)
    return waits


def issue_23_overload(*, low: int, flood_rate: float, flood_s: float, high: int,
                      start_s: float = 0.0) -> list[Waiting]:
    """``low`` priority-0 jobs due at ``start_s``, then priority-``high`` jobs at
    ``flood_rate`` per second for ``flood_s`` seconds (ids in that order)."""
    lows = [Waiting(i + 1, 0, start_s) for i in range(low)]
    count = round(flood_rate * flood_s)
    return lows + [Waiting(low + 1 + k, high, start_s + (k + 1) / flood_rate)
                   for k in range(count)]
