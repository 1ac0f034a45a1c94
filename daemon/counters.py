"""The daemon's plain counters: one handle, passed to each component that counts.

Components call ``inc``; ``/v1/status`` shows every counter and ``/metrics`` exports the
ones named in ``metrics.EXPORTED_COUNTERS`` (read at scrape time). A transient error of the
store or Redis is counted and logged the same way everywhere (``transient_error``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping

from gochatd.errors import DispatchUnavailable, StoreUnavailable
from gochatd.logs import get_logger


class Counters(Mapping[str, int]):
    """Read like a mapping (a missing name reads 0); written only through ``inc``."""

    def __init__(self, worker_id: str = "") -> None:
        self._values: Counter[str] = Counter()
        self._log = get_logger(worker_id=worker_id)

    def inc(self, name: str, n: int = 1) -> None:
        self._values[name] += n

    def transient_error(self, where: str, exc: StoreUnavailable | DispatchUnavailable) -> None:
        """A store or Redis call failed in a loop that will retry: count it, log one line."""
        self.inc("redis_errors" if isinstance(exc, DispatchUnavailable) else "store_errors")
        self._log.warning(f"{where}_failed", error=str(exc))

    def __getitem__(self, name: str) -> int:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)
