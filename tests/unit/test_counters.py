"""Counters remember the last store error for a few seconds: /readyz reports it."""

from __future__ import annotations

from gochatd.errors import DispatchUnavailable, StoreUnavailable
from gochatd.obs.counters import STORE_ERROR_RECENT_S, Counters


def test_a_store_error_is_recent_for_a_few_seconds_then_forgotten() -> None:
    now = [100.0]
    counters = Counters(clock=lambda: now[0])
    assert counters.recent_store_error() is None
    counters.transient_error("finish_failed", StoreUnavailable("postgres unavailable: DiskFull"))
    assert counters.recent_store_error() == "finish: postgres unavailable: DiskFull"
    assert counters["store_errors"] == 1
    now[0] += STORE_ERROR_RECENT_S - 0.1
    assert counters.recent_store_error() == "finish: postgres unavailable: DiskFull"
    now[0] += 0.2
    assert counters.recent_store_error() is None


def test_the_latest_store_error_wins_and_redis_errors_are_not_store_errors() -> None:
    now = [0.0]
    counters = Counters(clock=lambda: now[0])
    counters.transient_error("claim_failed", StoreUnavailable("postgres unavailable: A"))
    now[0] += 1.0
    counters.transient_error("heartbeat_failed", StoreUnavailable("postgres unavailable: B"))
    counters.transient_error("intake_failed", DispatchUnavailable("redis unavailable"))
    assert counters.recent_store_error() == "heartbeat: postgres unavailable: B"
    assert counters["redis_errors"] == 1
