"""``FinishWatch``: wakes the callers waiting for jobs (``Client.wait``, ``SyncClient.wait``,
the gateway's long-poll) when PostgreSQL announces that a job reached a final state.

A waiting client writes a row in ``gochatd_job_waiters`` (``announce``) before it reads the
job, and removes it when it stops waiting (``withdraw``); a trigger (sql/postgres/0018) sends
``NOTIFY gochatd_job_finished, '<id>'`` for a row that becomes completed, dead or cancelled
while somebody waits for it (a fleet that never waits sends none). The watch LISTENs on a
connection of its own, in a thread of its own, opened at a client's first wait and kept
until the client closes: a client that never waits opens nothing. Each waiter registers its
job id and a thread-safe wake-up *before* it reads the row, so a finish committed between
the read and the wait still wakes it. A notification is only a wake-up: the waiter reads
the row, which decides.
A lost connection wakes every waiter (they read again) and is opened again with backoff;
the waiters' bounded fallback re-read (``wait.py``) covers anything not announced.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

from gochatd.errors import StoreUnavailable
from gochatd.store.pg_connect import connect

CHANNEL = "gochatd_job_finished"
_POLL_S = 0.5  # how often the thread looks at its stop flag between notifications
_BACKOFF_MAX_S = 5.0

Wake = Callable[[], None]


class FinishWatch:
    """LISTEN ``gochatd_job_finished``; call the wake-ups registered for the announced ids."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._lock = threading.Lock()
        self._waiters: dict[int, dict[int, Wake]] = {}
        self._tokens = itertools.count()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: This watch's name in ``gochatd_job_waiters``, and the connection that writes there.
        self._name = uuid.uuid4().hex
        self._writer: psycopg.Connection[Any] | None = None
        self._writer_lock = threading.Lock()

    def open(self) -> None:
        """Blocking (run it in a thread): connect and LISTEN, then start the thread. Raises
        ``StoreUnavailable`` when the server cannot be reached."""
        conn = self._listen()
        self._thread = threading.Thread(target=self._main, args=(conn,),
                                        name="gochatd-wait-listen", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop listening: the thread closes its connection within ``_POLL_S``."""
        self._stop.set()
        self._wake_all()
        with self._writer_lock:
            writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def announce(self, job_id: int) -> bool:
        """Blocking: tell the database this client waits for ``job_id`` (before reading it), so
        its final state is NOTIFYed. False when that failed: the waiter then has only its
        fallback re-read."""
        return self._write("INSERT INTO gochatd_job_waiters (job_id, waiter) VALUES (%s, %s)"
                           " ON CONFLICT DO NOTHING", job_id)

    def withdraw(self, job_id: int) -> None:
        """Blocking: this client no longer waits for ``job_id`` (the trigger may have removed
        the row already)."""
        self._write("DELETE FROM gochatd_job_waiters WHERE job_id = %s AND waiter = %s", job_id)

    def _write(self, sql: str, job_id: int) -> bool:
        with self._writer_lock:
            try:
                if self._writer is None or self._writer.closed:
                    self._writer = connect(self._dsn)
                self._writer.execute(sql, (job_id, self._name))
                return True
            except (StoreUnavailable, psycopg.Error, OSError):
                if self._writer is not None:
                    self._writer.close()
                self._writer = None
                return False

    def register(self, job_id: int, wake: Wake) -> tuple[int, int]:
        token = next(self._tokens)
        with self._lock:
            self._waiters.setdefault(job_id, {})[token] = wake
        return job_id, token

    def unregister(self, handle: tuple[int, int]) -> None:
        job_id, token = handle
        with self._lock:
            waiting = self._waiters.get(job_id)
            if waiting is not None:
                waiting.pop(token, None)
                if not waiting:
                    del self._waiters[job_id]

    def _listen(self) -> psycopg.Connection[Any]:
        conn = connect(self._dsn)
        try:
            conn.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _main(self, conn: psycopg.Connection[Any] | None) -> None:
        backoff_s = 0.1
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = self._listen()
                    self._wake_all()  # what finished while nobody listened was not announced
                with conn:
                    backoff_s = 0.1
                    while not self._stop.is_set():
                        for notify in conn.notifies(timeout=_POLL_S):
                            self._wake(notify.payload)
            except (StoreUnavailable, psycopg.Error, OSError):
                self._wake_all()
                self._stop.wait(backoff_s)
                backoff_s = min(backoff_s * 2, _BACKOFF_MAX_S)
            conn = None

    def _wake(self, payload: str) -> None:
        try:
            job_id = int(payload)
        except ValueError:  # someone else's NOTIFY on the channel
            return
        with self._lock:
            wakes = list(self._waiters.get(job_id, {}).values())
        for wake in wakes:
            wake()

    def _wake_all(self) -> None:
        with self._lock:
            wakes = [w for waiting in self._waiters.values() for w in waiting.values()]
        for wake in wakes:
            wake()
