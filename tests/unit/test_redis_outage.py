"""Redis down: the warning's backoff, the count and the degraded reason (dispatch/outage.py),
on trio's MockClock."""

from __future__ import annotations

import itertools

from trio.testing import MockClock

from gochatd.dispatch.outage import WARN_MAX_S, RedisOutage
from gochatd.obs.counters import Counters


async def test_the_warning_backs_off_while_redis_stays_down(mock_clock: MockClock) -> None:
    counters = Counters()
    outage = RedisOutage("redis://:s3cret@127.0.0.1:6399/1", counters=counters, worker_id="t")
    warned_at = []
    for second in range(80):  # the intake's probe: once a second
        if outage.failed("redis unavailable: ConnectionError"):
            warned_at.append(second)
        mock_clock.jump(1)
    assert warned_at == [0, 5, 15, 35, 75]
    assert counters["redis_errors"] == 80  # every failed call counts
    assert outage.down and outage.degraded is not None
    assert outage.degraded.startswith(
        "polling the database: Redis at redis://:***@127.0.0.1:6399/1 does not answer "
        "(redis unavailable: ConnectionError) since ")
    assert "s3cret" not in outage.degraded


async def test_the_backoff_is_capped_and_starts_over_after_an_answer(mock_clock: MockClock) -> None:
    outage = RedisOutage("redis://127.0.0.1:6399/0", counters=Counters(), worker_id="t")
    warned_at = []
    for second in range(2000):
        if outage.failed("down"):
            warned_at.append(second)
        mock_clock.jump(1)
    gaps = [b - a for a, b in itertools.pairwise(warned_at)]
    assert max(gaps) == WARN_MAX_S and gaps[-1] == WARN_MAX_S
    outage.answered()
    assert outage.degraded is None and not outage.down
    assert outage.failed("down again")  # a new outage warns at once
    assert not outage.failed("down again")
