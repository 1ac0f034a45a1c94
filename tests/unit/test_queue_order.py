"""Weighted queue order (worker/queues.py): queues that all have work get jobs in the
ratio of their weights, none with weight > 0 starves, and a queue that was empty is read
first once a job arrives in it, however large another queue's backlog."""

from __future__ import annotations

from collections import Counter

from gochatd.config.settings import Settings
from gochatd.worker.queues import QueueSelection
from gochatd.worker.service import Worker


def _worker(weights: dict[str, int], strict: bool = False) -> Worker:
    return Worker(Settings(database_url="sqlite:///:memory:", worker_queues=weights,
                           worker_strict_priority=strict))


def _round(queues: QueueSelection, waiting: dict[str, int], free: int) -> Counter[str]:
    """One read: the queues in order, each giving what it has until ``free`` is taken."""
    order = queues.order()
    taken: Counter[str] = Counter()
    for queue in order:
        n = min(waiting.get(queue, 0), free - sum(taken.values()))
        if n > 0:
            taken[queue] = n
            waiting[queue] -= n
    queues.charge(order, taken)
    return taken


def test_queues_with_work_get_jobs_in_the_ratio_of_their_weights() -> None:
    queues = QueueSelection({"high": 8, "default": 4, "low": 1, "off": 0})
    backlog = {"high": 10**9, "default": 10**9, "low": 10**9, "off": 10**9}
    given: Counter[str] = Counter()
    for _ in range(13_000):
        given += _round(queues, backlog, free=3)
    total = sum(given.values())
    assert "off" not in given
    for queue, weight in (("high", 8), ("default", 4), ("low", 1)):
        assert abs(given[queue] / total - weight / 13) < 0.01, given
    assert sorted(queues.order()) == ["default", "high", "low"]


def test_a_job_in_an_empty_queue_is_read_in_the_next_round_behind_any_backlog() -> None:
    queues = QueueSelection({"maint": 20, "high": 8, "default": 4, "low": 2})
    waiting = {"default": 10**9}
    for i in range(5_000):
        if i % 7 == 0:  # a trickle: one job now and then
            waiting["high"] = waiting.get("high", 0) + 1
            taken = _round(queues, waiting, free=2)
            assert taken["high"] == 1, (i, queues.order(), taken)
        else:
            assert _round(queues, waiting, free=2)["default"] == 2


def test_an_idle_queue_banks_no_credit() -> None:
    queues = QueueSelection({"high": 8, "default": 4})
    waiting = {"default": 10**9}
    for _ in range(1_000):  # high idle meanwhile
        _round(queues, waiting, free=1)
    waiting["high"] = 10**9
    given: Counter[str] = Counter()
    for _ in range(1_200):
        given += _round(queues, waiting, free=1)
    assert abs(given["default"] / 1_200 - 4 / 12) < 0.02, given  # not held back to repay


def test_a_paused_queue_comes_back_without_a_debt_or_a_credit() -> None:
    queues = QueueSelection({"high": 8, "default": 4})
    waiting = {"default": 10**9, "high": 10**9}
    queues.paused = frozenset({"high"})
    for _ in range(500):
        _round(queues, waiting, free=1)
    queues.paused = frozenset()
    given: Counter[str] = Counter()
    for _ in range(1_200):
        given += _round(queues, waiting, free=1)
    assert abs(given["high"] / 1_200 - 8 / 12) < 0.02, given


def test_weighted_order_from_the_worker_lists_every_active_queue() -> None:
    worker = _worker({"high": 8, "default": 4, "low": 1, "off": 0})
    assert sorted(worker.queue_order()) == ["default", "high", "low"]
    assert worker.queue_order()[0] == "high"  # nothing given yet: the heaviest first


def test_strict_priority_order() -> None:
    worker = _worker({"low": 1, "high": 8, "default": 4}, strict=True)
    assert worker.queue_order() == ["high", "default", "low"]
