"""The daemon's plain counters: one handle, passed to each component that counts.

Components call ``inc``; ``/v1/status`` shows every counter and ``/metrics`` exports the
ones named in ``metrics.EXPORTED_COUNTERS`` (read at scrape time). A transient error of the
store or Redis is counted and logged the same way everywhere (``transient_error``).

Each finish the finisher commits is counted once, in ``FinishedCounts`` (per queue, job
type and outcome), and read three ways: ``finished_<outcome>`` here, /metrics'
``gochatd_jobs_finished_total`` (metrics.py, at scrape time) and the throughput charts'
``FinishTally`` (what was added since the last flush, which ``loops/stats.py`` adds to the
database).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping

from gochatd.errors import DispatchUnavailable, StoreUnavailable
from gochatd.model import Outcome
from gochatd.obs.logs import get_logger
from gochatd.store.fleet import FinishCounts

#: A store error this recent makes /readyz say not ready (``recent_store_error``).
STORE_ERROR_RECENT_S = 5.0


FinishKey = tuple[str, str, Outcome]  # (queue, job type, outcome)


class FinishedCounts:
    """Every applied finish of this daemon since it started, per (queue, job type,
    outcome): the one count per finish on the finisher's path."""

    def __init__(self) -> None:
        self.totals: dict[FinishKey, int] = {}

    def add(self, queue: str, job_type: str, outcome: Outcome) -> None:
        key = (queue, job_type, outcome)
        self.totals[key] = self.totals.get(key, 0) + 1

    def by_outcome(self) -> dict[str, int]:
        """``finished_<outcome>``: the totals per outcome."""
        out: Counter[str] = Counter()
        for (_, _, outcome), n in list(self.totals.items()):
            out[f"finished_{outcome.value}"] += n
        return dict(out)


class Counters(Mapping[str, int]):
    """Read like a mapping (a missing name reads 0); written only through ``inc``, and
    ``finished`` for the finish counts (read here as ``finished_<outcome>``)."""

    def __init__(self, worker_id: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self._values: Counter[str] = Counter()
        self.finished = FinishedCounts()
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

    def transient_error(self, event: str, exc: StoreUnavailable | DispatchUnavailable) -> None:
        """A store or Redis call failed in a loop that will retry: count it, log one line.
        ``event`` is the line's name as the call site spells it (``reap_failed``), so that
        grep finds where a logged event comes from; the store error says ``reap: ...``."""
        self.inc("redis_errors" if isinstance(exc, DispatchUnavailable) else "store_errors")
        if isinstance(exc, StoreUnavailable):
            self._store_error = (self._clock(), f"{event.removesuffix('_failed')}: {exc}")
        self._log.warning(event, error=str(exc))

    def _all(self) -> Counter[str]:
        return self._values + Counter(self.finished.by_outcome())

    def __getitem__(self, name: str) -> int:
        if name.startswith("finished_"):
            return self.finished.by_outcome().get(name, 0)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


#: The outcomes the throughput charts count, and the column each one adds to (a cancel or a
#: shutdown's interruption is neither a success nor a failure there).
_CHARTED = {Outcome.COMPLETED: 0, Outcome.DEAD: 1, Outcome.RETRY: 2}


class FinishTally:
    """The charted finishes (``FinishedCounts``) per (queue, job type) added since the last
    ``take``: one database upsert per flush (loops/stats.py), nothing per finish."""

    def __init__(self, finished: FinishedCounts | None = None) -> None:
        self._finished = finished if finished is not None else FinishedCounts()
        #: The totals as of the last take (less what a failed flush gave back).
        self._taken: dict[FinishKey, int] = {}

    def __bool__(self) -> bool:
        return any(n != self._taken.get(key, 0) for key, n in self._finished.totals.items()
                   if key[2] in _CHARTED)

    def add(self, queue: str, job_type: str, outcome: Outcome) -> None:
        """One finish (the finisher counts in ``FinishedCounts``; this is for a tally of
        its own)."""
        self._finished.add(queue, job_type, outcome)

    def take(self) -> list[FinishCounts]:
        """Everything counted since the last take."""
        now = dict(self._finished.totals)
        rows: dict[tuple[str, str], list[int]] = {}
        for key, n in now.items():
            column = _CHARTED.get(key[2])
            delta = n - self._taken.get(key, 0)
            if column is None or not delta:
                continue
            rows.setdefault((key[0], key[1]), [0, 0, 0])[column] += delta
        self._taken = now
        return [FinishCounts(queue, job_type, c[0], c[1], c[2])
                for (queue, job_type), c in rows.items()]

    def give_back(self, counts: list[FinishCounts]) -> None:
        """A flush that failed: its counts go back, to be taken with the next one."""
        for c in counts:
            for outcome, n in ((Outcome.COMPLETED, c.completed), (Outcome.DEAD, c.failed),
                               (Outcome.RETRY, c.retried)):
                if n:
                    key = (c.queue, c.job_type, outcome)
                    self._taken[key] = self._taken.get(key, 0) - n
