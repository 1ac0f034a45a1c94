"""Redis down, as the operator sees it: the daemon keeps running (it claims from the
database: polling), and says so. The first failed call logs ``redis_unavailable`` with the
masked address and the error; while Redis stays down the warning repeats with backoff
(``WARN_FIRST_S`` doubling to ``WARN_MAX_S``), each failed call counts in
``gochatd_redis_errors_total``, and ``degraded`` holds the reason that ``/readyz`` and
``/v1/status`` show. The first answer after that logs ``redis_available`` and clears it.

The intake reports here (its stream setup, its reads, its once-a-second probe while polling).
"""

from __future__ import annotations

from datetime import UTC, datetime

import trio

from gochatd.errors import DispatchUnavailable
from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.obs.redact import mask_url

#: The warning repeats after this long, then twice as long each time, up to WARN_MAX_S.
WARN_FIRST_S = 5.0
WARN_MAX_S = 300.0


class RedisOutage:
    def __init__(self, url: str, *, counters: Counters, worker_id: str) -> None:
        self.redis = mask_url(url)
        self._counters = counters
        self._log = get_logger(worker_id=worker_id)
        #: Why the daemon runs degraded, for /readyz and /v1/status; None while Redis answers.
        self.degraded: str | None = None
        self._down_since: float | None = None
        self._failures = 0
        self._next_warning = 0.0
        self._interval_s = WARN_FIRST_S

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def failed(self, exc: DispatchUnavailable | str) -> bool:
        """A Redis call failed (counted); a warning when one is due (then True)."""
        self._counters.inc("redis_errors")
        self._failures += 1
        now = trio.current_time()
        if self._down_since is None:
            self._down_since = now
            self._interval_s = WARN_FIRST_S
            since = datetime.now(UTC).isoformat(timespec="seconds")
            self.degraded = (f"polling the database: Redis at {self.redis} does not answer "
                             f"({exc}) since {since}")
        elif now < self._next_warning:
            return False
        else:
            self._interval_s = min(self._interval_s * 2, WARN_MAX_S)
        self._log.warning("redis_unavailable", redis=self.redis, error=str(exc),
                          failures=self._failures, down_s=round(now - self._down_since, 1),
                          next_warning_in_s=self._interval_s)
        self._failures = 0
        self._next_warning = now + self._interval_s
        return True

    def answered(self) -> None:
        """Redis answered: an outage, if there was one, is over."""
        if self._down_since is None:
            return
        self._log.info("redis_available", redis=self.redis,
                       down_s=round(trio.current_time() - self._down_since, 1))
        self._down_since = None
        self.degraded = None
        self._failures = 0
