"""The daemon's lifecycle: one state, its allowed moves, and the two-phase stop.

    STARTING ──> STREAMS <──> POLLING        the intake chose (or changed) how it claims
        │           │  ▲         │
        │           ▼  │         ▼
        ├──────> PAUSED / DRAINING           admin API: pause, drain; resume goes back
        ▼
    STOPPING ──> STOPPED                     a signal, drain-and-exit, or the admin API

Only STREAMS and POLLING claim jobs. ``dispatch`` remembers how the intake claims (it keeps
running while paused or draining, and ``/v1/status``'s ``mode`` reports it). Nobody sets
the state directly: the intake reports its dispatch mode, the admin API and signals ask
for a move (``drain``, ``pause``, ``resume``, ``request_stop``), and a move that the table
does not allow changes nothing.

Stop: the first request cancels the claim scope (the intake ends) and lets handlers finish
within the grace; the second (or ``force``) cancels the grace and interrupts every
handler; the third cancels the root scope at once (exit 1).
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Iterator
from typing import Protocol

import trio

from gochatd.obs.counters import Counters
from gochatd.obs.logs import get_logger
from gochatd.obs.sdnotify import Notifier
from gochatd.worker.wakeup import Wakeups

#: A second stop signal: handlers are interrupted at once, and everything left (their
#: unwinding, writing them back as ``interrupted``, the admin server) gets this long.
STOP_NOW_S = 2.0


class State(enum.StrEnum):
    STARTING = "starting"
    STREAMS = "streams"
    POLLING = "polling"
    PAUSED = "paused"
    DRAINING = "draining"
    STOPPING = "stopping"
    STOPPED = "stopped"


#: The states in which the daemon claims jobs.
CLAIMING = frozenset({State.STREAMS, State.POLLING})
#: The states the intake's own choice may move (a pause or a drain outlives a mode change).
DISPATCHING = frozenset({State.STARTING, State.STREAMS, State.POLLING})

_MOVES: dict[State, frozenset[State]] = {
    State.STARTING: frozenset({State.STREAMS, State.POLLING, State.PAUSED, State.DRAINING,
                               State.STOPPING}),
    State.STREAMS: frozenset({State.POLLING, State.PAUSED, State.DRAINING, State.STOPPING}),
    State.POLLING: frozenset({State.STREAMS, State.PAUSED, State.DRAINING, State.STOPPING}),
    State.PAUSED: frozenset({State.STARTING, State.STREAMS, State.POLLING, State.DRAINING,
                             State.STOPPING}),
    State.DRAINING: frozenset({State.STARTING, State.STREAMS, State.POLLING, State.STOPPING}),
    State.STOPPING: frozenset({State.STOPPED}),
    State.STOPPED: frozenset(),
}


class InFlight(Protocol):
    """The jobs this daemon holds, as the lifecycle sees them."""

    def __len__(self) -> int: ...

    def interrupt_all(self) -> None: ...


class Lifecycle:
    def __init__(self, jobs: InFlight, *, notifier: Notifier, wakeups: Wakeups,
                 counters: Counters, worker_id: str,
                 on_dispatch: Callable[[State], None] = lambda mode: None) -> None:
        self.state = State.STARTING
        #: How the intake claims: STARTING until it chose, then STREAMS or POLLING.
        self.dispatch = State.STARTING
        #: A drain was asked for (and not resumed): still reported while stopping after it.
        self.drain_requested = False
        #: A drain that ends the process once no job is left (drain-and-exit).
        self.exit_when_drained = False
        #: Why the daemon runs degraded (Redis down: it polls), or None; the intake sets it
        #: (dispatch/outage.py), /readyz and /v1/status show it.
        self.degraded: str | None = None
        #: A second stop request: interrupt the handlers without waiting out the grace.
        self.stop_now = False
        self.ready = trio.Event()
        self.stopped = trio.Event()
        self.notifier = notifier
        self._jobs = jobs
        self._wakeups = wakeups
        self._counters = counters
        self._on_dispatch = on_dispatch
        self._log = get_logger(worker_id=worker_id)
        self._claim_scope: trio.CancelScope | None = None
        self._grace_scope: trio.CancelScope | None = None
        self._root_scope: trio.CancelScope | None = None

    # -- reading ---------------------------------------------------------------------------

    @property
    def claiming(self) -> bool:
        return self.state in CLAIMING

    @property
    def stopping(self) -> bool:
        return self.state in (State.STOPPING, State.STOPPED)

    @property
    def draining(self) -> bool:
        return self.state is State.DRAINING or (self.stopping and self.drain_requested)

    @property
    def paused(self) -> bool:
        return self.state is State.PAUSED

    @property
    def mode(self) -> State:
        """The dispatch mode as ``/metrics`` and ``/v1/status`` report it."""
        return State.STOPPED if self.state is State.STOPPED else self.dispatch

    def status_line(self) -> str:
        state = (
            "stopping" if self.stopping else "draining" if self.draining
            else "paused" if self.paused else "serving"
        )
        return f"{state}; mode {self.mode.value}; in flight {len(self._jobs)}"

    # -- moves -----------------------------------------------------------------------------

    def _move(self, to: State) -> bool:
        if to is self.state:
            return True
        if to not in _MOVES[self.state]:
            return False
        self._log.debug("lifecycle_moved", state=to.value, previous=self.state.value)
        self.state = to
        return True

    def dispatching(self, mode: State) -> None:
        """The intake claims through ``mode`` (STREAMS or POLLING) from now on."""
        if mode is not self.dispatch:
            self._log.info("dispatch_mode", mode=mode.value, previous=self.dispatch.value)
            self.dispatch = mode
            self._on_dispatch(mode)
            self._wakeups.schedule.set()
        if self.state in DISPATCHING:
            self._move(mode)
        if not self.ready.is_set():
            self.ready.set()
            self.notifier.ready(self.status_line())
        else:
            self.notifier.status(self.status_line())

    def drain(self, *, exit_when_drained: bool = False) -> None:
        """Stop claiming; in-flight jobs finish. With exit_when_drained, exit 0 once idle."""
        if not self._move(State.DRAINING):
            return
        self.drain_requested = True
        self.exit_when_drained = exit_when_drained or self.exit_when_drained
        self._log.info("worker_drain_requested", exit_when_drained=self.exit_when_drained,
                       in_flight=len(self._jobs))
        if exit_when_drained:
            self.notifier.stopping(self.status_line())
        else:
            self.notifier.status(self.status_line())
        self.job_left()

    def pause(self) -> None:
        """Stop claiming in this process only (readiness unchanged). A drain stays a drain."""
        if self.draining or not self._move(State.PAUSED):
            return
        self._log.info("worker_paused")
        self.notifier.status(self.status_line())

    def resume(self) -> bool:
        """Undo a drain or a pause; False when stopping (nothing to resume)."""
        if self.stopping:
            return False
        self._move(self.dispatch)
        self.drain_requested = self.exit_when_drained = False
        self._log.info("worker_resumed")
        self.notifier.status(self.status_line())
        self._wakeups.slot_freed.set()
        self._wakeups.intake.set()
        return True

    def job_left(self) -> None:
        """A job left this daemon: a drain-and-exit ends once none is left."""
        if self.state is State.DRAINING and self.exit_when_drained and not len(self._jobs):
            self.request_stop()

    def request_stop(self, *, force: bool = False) -> None:
        """First call: stop claiming, let handlers finish within the grace. Second call
        (or ``force``): interrupt the handlers now and write them back, bounded. Third:
        cancel everything at once; leases expire and the reaper recovers the jobs."""
        if self.stop_now:
            self._counters.inc("forced_stop")
            self._log.warning("worker_stop_abandoned", in_flight=len(self._jobs))
            if self._root_scope is not None:
                self._root_scope.cancel()
            return
        if force or self.stopping:
            self.stop_now = True
            self._log.warning("worker_stop_now", in_flight=len(self._jobs), bound_s=STOP_NOW_S)
            if self._grace_scope is not None:
                self._grace_scope.cancel()
            self._jobs.interrupt_all()
            if not self.stopping:
                self._begin_stop()
            return
        self._begin_stop()

    def _begin_stop(self) -> None:
        self._move(State.STOPPING)
        self._log.info("worker_stop_requested")
        self.notifier.stopping(f"stopping; in flight {len(self._jobs)}")
        if self._claim_scope is not None:
            self._claim_scope.cancel()
        self._wakeups.slot_freed.set()

    def finished(self) -> None:
        self._move(State.STOPPED)
        self.stopped.set()

    # -- the scopes a stop cancels -----------------------------------------------------------

    def bind_root(self, scope: trio.CancelScope) -> None:
        """The third stop request cancels this scope (the root nursery's)."""
        self._root_scope = scope

    @contextlib.contextmanager
    def claims(self) -> Iterator[trio.CancelScope]:
        """The scope the claiming loops run in: the first stop request cancels it."""
        with trio.CancelScope() as scope:
            self._claim_scope = scope
            if self.stopping:
                scope.cancel()
            yield scope

    @contextlib.contextmanager
    def grace(self, grace_s: float) -> Iterator[trio.CancelScope]:
        """The grace handlers get to finish; a second stop request cuts it short."""
        with trio.move_on_after(grace_s) as scope:
            self._grace_scope = scope
            if self.stop_now:
                scope.cancel()
            yield scope
