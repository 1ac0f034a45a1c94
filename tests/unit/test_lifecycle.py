"""The lifecycle: one state, the moves the table allows, and the three-step stop."""

from __future__ import annotations

import trio

from gochatd.obs.counters import Counters
from gochatd.obs.sdnotify import Notifier
from gochatd.worker.lifecycle import CLAIMING, Lifecycle, State
from gochatd.worker.wakeup import Wakeups


class Jobs:
    """In-flight jobs as the lifecycle sees them: a count, and interrupts it asked for."""

    def __init__(self, n: int = 0) -> None:
        self.n = n
        self.interrupts = 0

    def __len__(self) -> int:
        return self.n

    def interrupt_all(self) -> None:
        self.interrupts += 1


def _lifecycle(jobs: Jobs | None = None) -> tuple[Lifecycle, Counters, list[State]]:
    counters = Counters("test")
    seen: list[State] = []
    lifecycle = Lifecycle(jobs or Jobs(), notifier=Notifier(""), wakeups=Wakeups(),
                          counters=counters, worker_id="test", on_dispatch=seen.append)
    return lifecycle, counters, seen


def test_only_streams_and_polling_claim() -> None:
    assert {State.STREAMS, State.POLLING} == CLAIMING
    lifecycle, _, seen = _lifecycle()
    assert lifecycle.state is State.STARTING and not lifecycle.claiming
    lifecycle.dispatching(State.STREAMS)
    assert lifecycle.state is State.STREAMS and lifecycle.claiming and lifecycle.ready.is_set()
    lifecycle.dispatching(State.POLLING)
    assert lifecycle.state is State.POLLING and lifecycle.mode is State.POLLING
    assert seen == [State.STREAMS, State.POLLING]


def test_pause_and_drain_outlive_a_dispatch_change_and_resume_returns_to_it() -> None:
    lifecycle, _, _ = _lifecycle()
    lifecycle.dispatching(State.STREAMS)
    lifecycle.pause()
    assert lifecycle.state is State.PAUSED and not lifecycle.claiming
    lifecycle.dispatching(State.POLLING)  # Redis went away while paused
    assert lifecycle.state is State.PAUSED and lifecycle.mode is State.POLLING
    lifecycle.drain()
    assert lifecycle.state is State.DRAINING and lifecycle.draining
    lifecycle.pause()  # a drain stays a drain
    assert lifecycle.state is State.DRAINING and not lifecycle.paused
    assert lifecycle.resume()
    assert lifecycle.state is State.POLLING and lifecycle.claiming
    assert not lifecycle.draining and not lifecycle.exit_when_drained


def test_drain_and_exit_stops_once_no_job_is_left() -> None:
    jobs = Jobs(2)
    lifecycle, _, _ = _lifecycle(jobs)
    lifecycle.dispatching(State.STREAMS)
    lifecycle.drain(exit_when_drained=True)
    assert lifecycle.state is State.DRAINING and lifecycle.exit_when_drained
    jobs.n = 1
    lifecycle.job_left()
    assert lifecycle.state is State.DRAINING
    jobs.n = 0
    lifecycle.job_left()
    assert lifecycle.state is State.STOPPING
    assert lifecycle.draining  # still reported: the stop came from the drain
    assert not lifecycle.resume()  # nothing to resume while stopping
    assert lifecycle.state is State.STOPPING


async def test_three_stop_requests_end_claims_then_grace_then_everything() -> None:
    jobs = Jobs(3)
    lifecycle, counters, _ = _lifecycle(jobs)
    lifecycle.dispatching(State.POLLING)
    root = trio.CancelScope()  # the root nursery's scope
    lifecycle.bind_root(root)
    with lifecycle.claims() as claims, lifecycle.grace(60.0) as grace:
        lifecycle.request_stop()
        assert lifecycle.state is State.STOPPING and not lifecycle.claiming
        assert claims.cancel_called and not grace.cancel_called
        assert jobs.interrupts == 0 and not lifecycle.stop_now
        lifecycle.request_stop()
        assert lifecycle.stop_now and grace.cancel_called and jobs.interrupts == 1
        assert not root.cancel_called and counters["forced_stop"] == 0
        lifecycle.request_stop()
        assert root.cancel_called and counters["forced_stop"] == 1
    lifecycle.finished()
    assert lifecycle.state is State.STOPPED and lifecycle.mode is State.STOPPED
    assert lifecycle.stopped.is_set()


async def test_a_stop_before_the_claims_began_cancels_them_at_once() -> None:
    lifecycle, _, _ = _lifecycle()
    lifecycle.request_stop(force=True)  # a forced first stop: stop now, no grace
    assert lifecycle.state is State.STOPPING and lifecycle.stop_now
    with lifecycle.claims() as claims, lifecycle.grace(60.0) as grace:
        assert claims.cancel_called and grace.cancel_called
    lifecycle.dispatching(State.STREAMS)  # the intake may still report: no move back
    assert lifecycle.state is State.STOPPING


def test_moves_the_table_does_not_allow_change_nothing() -> None:
    lifecycle, _, _ = _lifecycle()
    lifecycle.request_stop()
    lifecycle.pause()
    lifecycle.drain()
    assert lifecycle.state is State.STOPPING and not lifecycle.paused
    lifecycle.finished()
    lifecycle.request_stop()  # a late signal after the stop: still stopped
    assert lifecycle.state is State.STOPPED
