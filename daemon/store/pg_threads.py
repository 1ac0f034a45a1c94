"""PostgreSQL connections owned by threads: the ``Handoff`` that runs the store's units of
work, and the ``Listener`` that waits for NOTIFY on a connection of its own.

Both use synchronous psycopg: a statement costs a few tens of µs of CPU here, where the
trio-asyncio bridge cost ~200 µs per crossing (docs/bench.md).
"""

from __future__ import annotations

import os
import select
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
import trio
from psycopg.pq import TransactionStatus

from gochatd.errors import StoreUnavailable
from gochatd.io.handoff import Handoff
from gochatd.store.lender import Lender

Connect = Callable[[], "psycopg.Connection[Any]"]
#: How long a cancelled statement may take to stop before its connection is forced closed.
ABANDON_S = 5.0
_LISTEN_POLL_S = 0.5


def connection_pool(name: str, connect: Connect, size: int) -> Handoff[psycopg.Connection[Any]]:
    return Handoff(
        name, connect, _close, size=size, healthy=_ready_for_next, usable=still_connected,
        retry_once=_session_terminated, interrupt=_cancel,
        force_close=_break_socket, abandon_s=ABANDON_S,
    )


def lend_connections(name: str, connect: Connect, size: int
                     ) -> Lender[psycopg.Connection[Any]]:
    """The same connections, lent to calling threads instead (``SyncClient``)."""
    return Lender(name, size, connect, _close, _ready_for_next)


def _close(conn: psycopg.Connection[Any]) -> None:
    conn.close()


def _ready_for_next(conn: psycopg.Connection[Any]) -> bool:
    """After every unit: keep the connection if it is usable and outside a transaction."""
    if conn.closed or conn.broken:
        return False
    if conn.info.transaction_status != TransactionStatus.IDLE:
        try:
            conn.rollback()
        except psycopg.Error:
            return False
    return True


def still_connected(conn: psycopg.Connection[Any]) -> bool:
    """Before every unit: whether an idle connection is still there. An idle connection has
    nothing to read; anything there is most likely the end of it (a terminated backend's
    FATAL, a server restart's EOF, a pooler closing it), so a readable one must answer an
    empty query. One poll(2) with no timeout (a few µs) unless something arrived: no round
    trip on the hot path. (A peer that vanished without a word is found by the unit itself.)"""
    try:
        if not _poller(conn.pgconn.socket).poll(0):
            return True
        conn.execute("")
    except (psycopg.Error, OSError):  # a closed connection has no socket
        return False
    return not conn.broken


_pollers = threading.local()


def _poller(fd: int) -> select.poll:
    """This thread's poll object for ``fd`` (a thread polls its own connection's socket; a
    poll object watches the descriptor number, so a reused number is still right)."""
    cached: tuple[int, select.poll] | None = getattr(_pollers, "entry", None)
    if cached is not None and cached[0] == fd:
        return cached[1]
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    _pollers.entry = (fd, poller)
    return poller


def _session_terminated(error: BaseException) -> bool:
    """The server ended the session instead of running the statement (57P01: a terminated
    backend, a restart's fast shutdown): the statement did not run and its transaction was
    rolled back, so the unit may run again on a new connection (in a unit of several
    autocommit statements, those before stay done, as they would without the retry). This
    is the race ``still_connected`` cannot close: the backend was told to exit just after
    the check, before it read the statement. A connection that just vanished is ambiguous
    (a commit may have landed) and is not retried."""
    return isinstance(error, psycopg.errors.AdminShutdown)


def _cancel(conn: psycopg.Connection[Any]) -> None:
    """Another thread: ask the server to cancel the statement this connection runs."""
    conn.cancel_safe(timeout=2.0)


def _break_socket(conn: psycopg.Connection[Any]) -> None:
    """Another thread: shut the connection's socket down, so a call blocked on it fails now
    (the socket stays open until its own thread closes the connection)."""
    dup = socket.socket(fileno=os.dup(conn.pgconn.socket))
    try:
        dup.shutdown(socket.SHUT_RDWR)
    finally:
        dup.close()


class Listener:
    """LISTEN on a connection of its own, in a thread of its own; Trio waits for a wake-up.

    It listens on several channels (new work, and the control channels of migration 0016);
    one task at a time waits on each. The thread counts each channel's notifications and
    wakes the waiting tasks through its Trio token, only while one waits, so a wait costs
    no thread hop. A connection that fails is reported once to each channel's waiter (the
    caller logs it and backs off) and opened again with backoff; each reconnect is a
    wake-up of every channel, since anything committed while nobody listened was not
    announced.

    ``listening`` is the first connection, already listening (``listen_connection``), so
    that nothing committed after the store opened goes unannounced.
    """

    def __init__(self, connect: Connect, channels: Sequence[str],
                 listening: psycopg.Connection[Any]) -> None:
        self._connect = connect
        self._channels = tuple(channels)
        self._first: psycopg.Connection[Any] | None = listening
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        #: Replaced (Trio thread) each time it is set: every waiter of the moment wakes.
        self._event = trio.Event()
        self._waiting = 0  # tasks blocked in wait()
        self._wake_pending = False
        self._seq = dict.fromkeys(self._channels, 0)  # notifications counted per channel
        self._failures = 0
        self._failure = ""
        #: Per channel, what its waiter has returned: (notifications, failures).
        self._seen: dict[str, tuple[int, int]] = {}

    async def wait(self, timeout_s: float, channel: str | None = None) -> bool:
        """True when ``channel`` (the first one by default) was notified, or the listener
        reconnected, since this channel's last call; raises ``ConnectionError`` once per
        failed connection attempt."""
        channel = channel or self._channels[0]
        if self._token is None:
            self._token = trio.lowlevel.current_trio_token()
        with trio.move_on_after(timeout_s):
            while True:
                with self._lock:
                    seq, failures, failure = self._seq[channel], self._failures, self._failure
                    event = self._event
                    seen, failures_seen = self._seen.get(channel, (0, 0))
                    if failures == failures_seen and seq == seen:
                        self._waiting += 1
                if failures != failures_seen:
                    self._seen[channel] = (seen, failures)
                    raise ConnectionError(failure)
                if seq != seen:
                    self._seen[channel] = (seq, failures)
                    return True
                try:
                    await event.wait()
                finally:
                    with self._lock:
                        self._waiting -= 1
        return False

    def _wake(self) -> None:  # Trio thread
        with self._lock:
            self._wake_pending = False
        event, self._event = self._event, trio.Event()
        event.set()

    def _signal(self, channel: str | None = None, failure: str | None = None) -> None:
        """Listener thread: a notification on ``channel`` (None: every channel), or a
        failure."""
        with self._lock:
            if failure is not None:
                self._failures += 1
                self._failure = failure
            else:
                for name in self._channels if channel is None else (channel,):
                    if name in self._seq:
                        self._seq[name] += 1
            wake = self._waiting > 0 and not self._wake_pending
            if wake:
                self._wake_pending = True
        token = self._token
        if wake and token is not None:
            try:
                token.run_sync_soon(self._wake)
            except trio.RunFinishedError:
                with self._lock:
                    self._wake_pending = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="gochatd-listen", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        backoff_s = 0.1
        while not self._stop.is_set():
            try:
                conn, self._first = self._first, None
                if conn is None:
                    conn = listen_connection(self._connect, self._channels)
                    self._signal()
                with conn:
                    backoff_s = 0.1
                    while not self._stop.is_set():
                        for notify in conn.notifies(timeout=_LISTEN_POLL_S):
                            self._signal(notify.channel)
            except StoreUnavailable as exc:  # the connect failed (the server's reason)
                self._signal(failure=str(exc))
                self._stop.wait(backoff_s)
                backoff_s = min(backoff_s * 2, 5.0)
            except (psycopg.Error, OSError) as exc:
                self._signal(failure=f"postgres unavailable: {type(exc).__name__}")
                self._stop.wait(backoff_s)
                backoff_s = min(backoff_s * 2, 5.0)

    def close(self) -> None:
        """Stop listening: the thread closes its connection and ends within
        ``_LISTEN_POLL_S``."""
        self._stop.set()
        first, self._first = self._first, None
        if first is not None and self._thread is None:
            first.close()


def listen_connection(connect: Connect, channels: Sequence[str]) -> psycopg.Connection[Any]:
    conn = connect()
    try:
        for channel in channels:
            conn.execute(f"LISTEN {channel}")
    except BaseException:
        conn.close()
        raise
    return conn
