"""Stats: adds the finisher's tally of committed outcomes (``counters.FinishTally``) to the
database's per-minute counters (``gochatd_job_counts``) every ``FLUSH_S``: one upsert per
flush, never one per job, so the finish path stays as fast as without the charts. Every
daemon adds to the same rows (the minute is the database clock's), so the throughput charts
(GET /v1/stats/throughput) cover the fleet and survive restarts; the retention loop prunes
rows older than ``loops/retention.COUNTS_KEEP_S``.

A flush the store refuses gives its counts back to the tally, to go with the next one. On a
clean stop the daemon flushes once more after the finisher wrote its last batch
(``flush_final``, shielded and bounded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

import trio

from gochatd.errors import StoreUnavailable
from gochatd.loops.every import run_every
from gochatd.obs.counters import Counters, FinishTally
from gochatd.store import JobStore

#: Between two flushes: a chart's minute may take up to this long to be complete.
FLUSH_S = 5.0
#: The last flush on a clean stop gets this long.
FINAL_FLUSH_S = 2.0


@dataclass(frozen=True, slots=True)
class StatsResult:
    rows: int
    completed: int
    failed: int
    retried: int


class StatsFlusher:
    def __init__(self, *, store: JobStore, tally: FinishTally, counters: Counters,
                 interval_s: float = FLUSH_S) -> None:
        self._store = store
        self._tally = tally
        self._counters = counters
        self.interval_s = interval_s

    async def run_once(self) -> StatsResult:
        counts = self._tally.take()
        if not counts:
            return StatsResult(0, 0, 0, 0)
        try:
            await self._store.add_job_counts(counts)
        except StoreUnavailable:
            self._tally.give_back(counts)
            raise
        return StatsResult(len(counts), sum(c.completed for c in counts),
                           sum(c.failed for c in counts), sum(c.retried for c in counts))

    async def flush_final(self) -> None:
        """Once more on a clean stop, after the finisher's last batch; shielded, bounded."""
        with trio.CancelScope(shield=True), trio.move_on_after(FINAL_FLUSH_S):
            try:
                await self.run_once()
            except StoreUnavailable as exc:
                self._counters.transient_error("stats_failed", exc)

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> NoReturn:
        await run_every("stats_failed", self.run_once, lambda: self.interval_s, self._counters,
                        task_status)
