"""Weighted queue order: heavier queues come first more often; none with weight > 0 starves."""

from __future__ import annotations

from collections import Counter

from gochatd.config.settings import Settings
from gochatd.worker.service import Worker


def _worker(weights: dict[str, int], strict: bool = False) -> Worker:
    return Worker(Settings(database_url="sqlite:///:memory:", worker_queues=weights,
                           worker_strict_priority=strict))


def test_weighted_order_is_proportional_and_never_starves() -> None:
    worker = _worker({"high": 8, "default": 4, "low": 1, "off": 0})
    firsts = Counter(worker.queue_order()[0] for _ in range(13_000))
    assert "off" not in firsts
    assert firsts["low"] > 300  # ~1/13 of the rounds
    assert firsts["high"] > firsts["default"] > firsts["low"]
    assert abs(firsts["high"] / 13_000 - 8 / 13) < 0.05
    for _ in range(50):
        assert sorted(worker.queue_order()) == ["default", "high", "low"]


def test_strict_priority_order() -> None:
    worker = _worker({"low": 1, "high": 8, "default": 4}, strict=True)
    assert worker.queue_order() == ["high", "default", "low"]
