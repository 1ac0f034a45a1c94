"""The daemon's signals, watched by one task for its whole run (``SignalWatch``): from
before its first connection to its exit, so no signal ever meets Python's default action.

Before the daemon runs (its first connections, which wait for a PostgreSQL that is not up
yet, its migrations): SIGTERM abandons the start (exit 0), Ctrl-C (SIGINT) too (exit 130,
the shell's code for it), SIGHUP is ignored (nothing to reload yet). Once it runs: SIGTERM
or SIGINT asks the lifecycle to stop, one more while it stops skips the grace, a third
abandons the stop (exit 1, within ``ABANDON_S`` even if a handler ignores its
cancellation); SIGHUP reloads the settings.

``watching_signals`` wraps the whole run (``Worker.run``) in the watcher's nursery and the
start scope: the resources the start opens (trio-asyncio's loop is a nursery) are entered
and left inside both, in the same task. Only the watcher cancels the start scope, and only
before ``begin()``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator

import structlog
import trio

from gochatd.config.reload import Reloader
from gochatd.worker.lifecycle import Lifecycle

#: After the third stop signal the root scope is cancelled; a process still running this
#: long after (a handler that ignores its cancellation) exits 1 there and then.
ABANDON_S = 2.0
#: Exit code of a start abandoned by Ctrl-C: the shell's for SIGINT, as the CLI's.
INTERRUPTED = 130


class SignalWatch:
    def __init__(self, lifecycle: Lifecycle, reloader: Reloader,
                 log: structlog.typing.FilteringBoundLogger) -> None:
        self.lifecycle = lifecycle
        self.reloader = reloader
        self.log = log
        #: Wraps the whole run; cancelled by a stop signal before ``begin()``.
        self.start_scope = trio.CancelScope()
        #: The signal that abandoned the start, if one did.
        self.stopped_by: signal.Signals | None = None
        self._running = False

    def begin(self) -> bool:
        """The start is done: from now on a signal stops the running daemon. False if a
        stop signal came first (the start scope is cancelled: leave it)."""
        if self.start_scope.cancel_called:
            return False
        self._running = True
        return True

    @property
    def exit_code_before_start(self) -> int:
        return INTERRUPTED if self.stopped_by is signal.SIGINT else 0

    def stopped_before_start(self) -> int:
        """The start was abandoned: say so; the exit code."""
        self.log.info("worker_stopped", forced=False, before_start=True)
        return self.exit_code_before_start

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            task_status.started()
            async for signum in signals:
                if self._on(signal.Signals(signum)):
                    break
            # The stop was abandoned: the root scope is cancelled. Further signals are
            # still ours (received and dropped) until the process ends, bounded.
            await trio.sleep(ABANDON_S)
            self.log.warning("worker_exit_forced", after_s=ABANDON_S)
            sys.stderr.flush()
            os._exit(1)

    def _on(self, sig: signal.Signals) -> bool:
        """Act on one signal; True once a stop was abandoned (the third)."""
        if sig is signal.SIGHUP:
            if self._running:
                self.reloader.reload()
            return False
        if not self._running:
            if self.stopped_by is None:
                self.stopped_by = sig
                self.log.info("stop_requested_while_starting", signal=sig.name)
                self.start_scope.cancel()
            return False
        abandon = self.lifecycle.stop_now
        self.lifecycle.request_stop(force=self.lifecycle.stopping)
        return abandon


@contextlib.asynccontextmanager
async def watching_signals(lifecycle: Lifecycle, reloader: Reloader,
                           log: structlog.typing.FilteringBoundLogger, *,
                           enabled: bool) -> AsyncIterator[SignalWatch]:
    """The body runs in the start scope, with the watcher (if ``enabled``) beside it; a
    start abandoned by a signal leaves the body cancelled and ends here quietly."""
    watch = SignalWatch(lifecycle, reloader, log)
    async with trio.open_nursery() as nursery:
        if enabled:
            await nursery.start(watch.run)
        with watch.start_scope:
            yield watch
        nursery.cancel_scope.cancel()
