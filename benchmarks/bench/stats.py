"""Percentiles, and the in-process latency tracker the bench's no-op handler feeds."""

from __future__ import annotations

import math
import time
from array import array
from collections.abc import Sequence

import trio

from gochatd.context import JobContext


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary_ms(values: Sequence[float], prefix: str) -> dict[str, float]:
    return {f"{prefix}_p50_ms": percentile(values, 50), f"{prefix}_p95_ms": percentile(values, 95),
            f"{prefix}_p99_ms": percentile(values, 99),
            f"{prefix}_max_ms": max(values) if values else math.nan,
            f"{prefix}_samples": float(len(values))}


class StartTracker:
    """Enqueue->start latency without keeping one entry per job: whichever of "enqueued"
    (the producer's clock before the call) and "started" (the handler) comes second turns the
    pair into one latency sample. In-process, a job may start before ``enqueue`` returns."""

    def __init__(self) -> None:
        self._enqueued: dict[int, float] = {}
        self._started: dict[int, float] = {}
        self.latencies_ms = array("d")
        self.started = 0
        self.first_start: float | None = None
        self.last_start = 0.0
        self._progress = trio.Event()

    def enqueued(self, job_id: int, at: float) -> None:
        started = self._started.pop(job_id, None)
        if started is None:
            self._enqueued[job_id] = at
        else:
            self.latencies_ms.append((started - at) * 1000)

    async def noop(self, ctx: JobContext) -> None:
        now = time.perf_counter()
        self.started += 1
        if self.first_start is None:
            self.first_start = now
        self.last_start = now
        at = self._enqueued.pop(ctx.job_id, None)
        if at is None:
            self._started[ctx.job_id] = now
        else:
            self.latencies_ms.append((now - at) * 1000)
        self._progress.set()
        self._progress = trio.Event()

    def reset_latencies(self) -> None:
        self.latencies_ms = array("d")

    async def wait_started(self, count: int, timeout_s: float) -> None:
        with trio.fail_after(timeout_s):
            while self.started < count:
                await self._progress.wait()
