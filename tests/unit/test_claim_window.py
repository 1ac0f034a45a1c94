"""The polling claim's due-time window per queue (store/claim_window.py)."""

from __future__ import annotations

from gochatd.store.claim_window import ClaimWindows


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_queue_is_scanned_whole_until_a_pass_completes() -> None:
    clock = Clock()
    w = ClaimWindows(margin_s=2.0, full_every_s=5.0, clock=clock)
    assert w.begin("q") is None
    clock.now += 1.0
    assert w.begin("q") is None  # the first pass never completed
    w.complete("q")  # the pass begun at 101
    clock.now += 0.5
    assert w.begin("q") == 2.5  # 0.5 s since that pass + the margin
    assert w.begin("other") is None  # every queue has a window of its own


def test_a_backlog_pass_keeps_its_heads_wait_in_the_window() -> None:
    clock = Clock()
    w = ClaimWindows(margin_s=2.0, full_every_s=5.0, clock=clock)
    w.begin("q")
    w.complete("q", behind_s=30.0)  # it claimed a job due 30 s before the pass
    clock.now += 1.0
    assert w.begin("q") == 33.0


def test_a_full_pass_comes_back_every_full_every_s() -> None:
    clock = Clock()
    w = ClaimWindows(margin_s=2.0, full_every_s=5.0, clock=clock)
    w.begin("q")
    w.complete("q")
    for _ in range(4):
        clock.now += 1.0
        assert w.begin("q") is not None
        w.complete("q")
    clock.now += 1.0
    assert w.begin("q") is None  # 5 s since the last full pass
    w.complete("q")
    clock.now += 1.0
    assert w.begin("q") == 3.0


def test_a_pass_that_did_not_complete_leaves_the_window_open() -> None:
    clock = Clock()
    w = ClaimWindows(margin_s=2.0, full_every_s=60.0, clock=clock)
    w.begin("q")
    w.complete("q")
    clock.now += 1.0
    w.begin("q")  # failed: never completed
    clock.now += 1.0
    assert w.begin("q") == 4.0  # still from the last complete pass


def test_next_due_looks_as_far_back_as_the_widest_window() -> None:
    clock = Clock()
    w = ClaimWindows(margin_s=2.0, full_every_s=60.0, clock=clock)
    for q, behind in (("a", 0.0), ("b", 10.0)):
        w.begin(q)
        w.complete(q, behind_s=behind)
    assert w.widest_s(["a", "b"]) == 12.0
    assert w.widest_s(["a", "c"]) is None  # c was never scanned whole
