"""The daemon's plain counters: one handle, passed to each component that counts.

Components call ``inc``; ``/v1/status`` shows every counter and ``/metrics`` exports the
ones named in ``metrics.EXPORTED_COUNTERS`` (read at scrape time). A transient error of the
store or Redis is counted and logged the same way everywhere (``transient_error``).

``FinishTally`` is the throughput charts' side: the finisher's committed outcomes per
(queue, job type), in memory until ``loops/stats.py`` adds them to the database.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping

from gochatd.errors import DispatchUnavailable, StoreUnavailable
from gochatd.logs import get_logger
from gochatd.model import Outcome
from gochatd.store.fleet import FinishCounts

#: A store error this recent makes /readyz say not ready (``recent_store_error``).
STORE_ERROR_RECENT_S = 5.0


class Counters(Mapping[str, int]):
    """Read like a mapping (a missing name reads 0); written only through ``inc``."""

    def __init__(self, worker_id: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self._values: Counter[str] = Counter()
        self._log = get_logger(worker_id=worker_id)
        self._clock = clock
        self._store_error: tuple[float, str] | None = None

    def recent_store_error(self, within_s: float = STORE_ERROR_RECENT_S) -> str | None:
        """The last store error (``where: message``) if one came within ``within_s``: a
        database that answers reads but refuses writes (a full disk) shows here, as the
        loops' writes fail; /readyz reports it."""
        if self._store_error is None or self._clock() - self._store_error[0] > within_s:
            return None
        return self._store_error[1]

    def inc(self, name: str, n: int = 1) -> None:
        self._values[name] += n

    def transient_error(self, where: str, exc: StoreUnavailable | DispatchUnavailable) -> None:
        """A store or Redis call failed in a loop that will retry: count it, log one line."""
        self.inc("redis_errors" if isinstance(exc, DispatchUnavailable) else "store_errors")
        if isinstance(exc, StoreUnavailable):
            self._store_error = (self._clock(), f"{where}: {exc}")
        self._log.warning(f"{where}_failed", error=str(exc))

    def __getitem__(self, name: str) -> int:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


#: The outcomes the throughput charts count, and the column each one adds to (a cancel or a
#: shutdown's interruption is neither a success nor a failure there).
_CHARTED = {Outcome.COMPLETED: 0, Outcome.DEAD: 1, Outcome.RETRY: 2}


class FinishTally:
    """Applied finishes per (queue, job type) since the last ``take``: one dict update per
    finish on the finisher's path, one database upsert per flush (loops/stats.py)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], list[int]] = {}

    def __bool__(self) -> bool:
        return bool(self._counts)

    def add(self, queue: str, job_type: str, outcome: Outcome, n: int = 1) -> None:
        column = _CHARTED.get(outcome)
        if column is None:
            return
        counts = self._counts.get((queue, job_type))
        if counts is None:
            counts = self._counts[(queue, job_type)] = [0, 0, 0]
        counts[column] += n

    def take(self) -> list[FinishCounts]:
        """Everything counted so far, and start again from zero."""
        taken, self._counts = self._counts, {}
        return [FinishCounts(queue, job_type, c[0], c[1], c[2])
                for (queue, job_type), c in taken.items()]

    def give_back(self, counts: list[FinishCounts]) -> None:
        """A flush that failed: its counts go back, to be added with the next one."""
        for c in counts:
            for outcome, n in ((Outcome.COMPLETED, c.completed), (Outcome.DEAD, c.failed),
                               (Outcome.RETRY, c.retried)):
                if n:
                    self.add(c.queue, c.job_type, outcome, n)
