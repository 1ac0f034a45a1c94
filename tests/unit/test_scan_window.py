"""ScanWindow: how far back the reaper and the sweep look."""

from gochatd.loops.scan_window import ScanWindow


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_first_pass_is_full_then_windows_start_at_the_last_complete_pass() -> None:
    clock = Clock()
    window = ScanWindow(margin_s=10.0, full_every_s=300.0, clock=clock)
    assert window.begin() is None
    window.complete()
    clock.now += 5
    assert window.begin() == 15.0  # 5 s since the last complete pass + margin
    window.complete()
    clock.now += 7
    assert window.begin() == 17.0


def test_a_pass_that_left_work_behind_keeps_the_window_open() -> None:
    clock = Clock()
    window = ScanWindow(margin_s=10.0, full_every_s=300.0, clock=clock)
    window.begin()
    window.complete()
    clock.now += 5
    assert window.begin() == 15.0  # not completed: it hit its limit, or failed
    clock.now += 5
    assert window.begin() == 20.0  # still from the last complete pass


def test_a_full_pass_comes_back_every_full_every_s() -> None:
    clock = Clock()
    window = ScanWindow(margin_s=1.0, full_every_s=60.0, clock=clock)
    window.begin()
    window.complete()
    for _ in range(5):
        clock.now += 10
        assert window.begin() is not None
        window.complete()
    clock.now += 10
    assert window.begin() is None  # 60 s since the last full pass
    clock.now += 1
    assert window.begin() is None  # that full pass did not complete: full again
    window.complete()
    clock.now += 1
    assert window.begin() == 2.0


def test_lookback_says_what_the_next_pass_would_look_back_without_starting_it() -> None:
    clock = Clock()
    window = ScanWindow(margin_s=10.0, full_every_s=60.0, clock=clock)
    assert window.lookback_s() is None  # nothing complete yet: everything
    window.begin()
    window.complete()
    clock.now += 5
    assert window.lookback_s() == 15.0
    assert window.lookback_s() == 15.0  # asking twice changes nothing
    assert window.begin() == 15.0
    clock.now += 2
    assert window.lookback_s() == 17.0  # that pass has not completed
    window.complete()
    assert window.lookback_s() == 12.0  # from the start of the pass that completed
    clock.now += 60
    assert window.lookback_s() is None  # a full pass is due
