"""The I/O layer without an event loop (``gochatd.SyncClient``).

``run_here(coro)`` drives a coroutine of the I/O layer (a store or streams operation) on the
calling thread. Every ``Handoff.run`` it awaits then runs its unit right there, on a
connection the ``Handoff``'s ``Lender`` lends (at most ``size`` lent at once; a thread that
finds none free waits for one to come back), so the coroutine never suspends: no loop and
no helper thread is involved, and the store's SQL is the same one the daemon runs.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from gochatd.errors import ResourceClosed

R = TypeVar("R")
T = TypeVar("T")

#: True while ``run_here`` drives a coroutine: units run on the calling thread.
CALLER_RUNS: contextvars.ContextVar[bool] = contextvars.ContextVar("gochatd_caller_runs",
                                                                   default=False)


def run_here(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` (a store or streams operation) to its end on this thread, without an
    event loop: each unit of work it hands off runs here, on a lent connection. A coroutine
    that waits for anything else (a sleep, a lock) cannot run this way: RuntimeError."""
    token = CALLER_RUNS.set(True)
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    finally:
        CALLER_RUNS.reset(token)
    coro.close()
    raise RuntimeError("this operation needs an event loop (use gochatd.Client)")


class Lender(Generic[R]):
    """The caller-runs side of a ``Handoff``: connections lent to calling threads, at most
    ``size`` at once (a thread that finds none free waits for one to come back)."""

    def __init__(self, name: str, size: int, open_conn: Callable[[], R],
                 close_conn: Callable[[R], None], healthy: Callable[[R], bool]) -> None:
        self.name = name
        self.size = size
        self._open = open_conn
        self._close = close_conn
        self._healthy = healthy
        self._cond = threading.Condition()
        self._spare: list[R] = []
        self._lent = 0
        self.closed = False

    def run(self, fn: Callable[[R], T]) -> T:
        conn = self._borrow()
        keep = False
        try:
            result = fn(conn)
            keep = True
            return result
        except Exception:
            keep = True  # the unit's own error: the connection may still be fine
            raise
        finally:
            self._give_back(conn, keep and self._healthy(conn))

    def _borrow(self) -> R:
        with self._cond:
            while True:
                if self.closed:
                    raise ResourceClosed(f"{self.name} is closed")
                if self._spare:
                    self._lent += 1
                    return self._spare.pop()
                if self._lent < self.size:
                    self._lent += 1
                    break
                self._cond.wait()
        try:
            return self._open()
        except BaseException:
            with self._cond:
                self._lent -= 1
                self._cond.notify()
            raise

    def _give_back(self, conn: R, keep: bool) -> None:
        with self._cond:
            self._lent -= 1
            self._cond.notify()
            if keep and not self.closed:
                self._spare.append(conn)
                return
        with contextlib.suppress(Exception):
            self._close(conn)

    def close(self) -> None:
        with self._cond:
            self.closed = True
            spare, self._spare = self._spare, []
            self._cond.notify_all()
        for conn in spare:
            with contextlib.suppress(Exception):
                self._close(conn)

