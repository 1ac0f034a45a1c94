"""Connections lent to calling threads: how ``gochatd.SyncClient`` runs the store's units.

A unit of work is the same plain ``fn(conn)`` the async stores hand to a connection thread
(handoff.py); without an event loop it runs on the caller's own thread, on a connection
lent by a ``Lender`` (at most ``size`` lent at once; a thread that finds none free waits for
one to come back). No loop and no helper thread is involved.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from gochatd.errors import ResourceClosed

R = TypeVar("R")
T = TypeVar("T")


class Lender(Generic[R]):
    """Connections lent to calling threads, at most ``size`` at once (a thread that finds
    none free waits for one to come back). ``healthy(conn)`` is asked after every unit:
    False closes the connection."""

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

