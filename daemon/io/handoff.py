"""Hand one unit of work to a thread that owns a connection, and await it from Trio or asyncio.

psycopg, redis-py and sqlite3 are fastest as synchronous drivers (docs/bench.md: a
synchronous ``SELECT 1`` costs ~13 µs of CPU where the trio-asyncio bridge cost ~200 µs).
A ``Handoff`` keeps up to ``size`` threads; each opens its own connection (lazily, on its
first unit of work) and keeps it for its whole life, so a connection is never used by two
threads. A unit of work is a plain function ``fn(conn) -> T`` (claim a batch, finish a
batch, XADD a batch): the caller pays one thread hop per unit, never one per statement::

    rows = await pool.run(lambda conn: conn.execute(query, params).fetchall())

The awaiting side may be Trio or asyncio (the client runs under both); the thread reports
back through the caller's own loop (``TrioToken.run_sync_soon`` / ``call_soon_threadsafe``).

Cancellation. A Trio caller cancelled while its unit runs asks the connection to stop
(``interrupt``: PostgreSQL's cancel request, from a helper thread) and then waits for the
thread's answer, as a cancelled psycopg query did on the bridge: a unit that finished is
returned (the cancellation arrives at the caller's next checkpoint), one that was stopped
raises ``Cancelled``. A unit that does not answer within ``abandon_s`` of the interrupt
is abandoned: its connection is forced closed (``force_close``). A connection an interrupt
was aimed at is retired after that unit, whatever its end: a cancel request is delivered
asynchronously and could otherwise stop the next caller's statement. A unit cancelled
before a thread took it never runs. A read that may be given up at once (``ABANDON_ON_CANCEL``
set in the caller's context: a handler's ``ctx.dependencies()``) raises ``Cancelled`` as soon
as its caller is cancelled; its thread still interrupts it and retires that connection, and
its answer is dropped: a handler stopped by its lease guard must not wait on the network.

Without an event loop (``gochatd.SyncClient``) the same units run on the caller's own
thread, on a connection lent to it (store/lender.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

import outcome
import sniffio
import trio

from gochatd.errors import ResourceClosed

R = TypeVar("R")
T = TypeVar("T")

_QUEUED, _RUNNING, _DONE, _ABANDONED = range(4)

#: Units handed to a connection thread since the process started, per pool name: the
#: "thread hops" line of the cost budget (``gochatd bench --scenario budget``), shown in
#: ``/v1/status`` as ``handoffs``. One add per unit, under the lock ``_submit`` holds anyway.
HANDED: collections.Counter[str] = collections.Counter()


class _Unit:
    """One unit of work on its way through a thread; its state moves under ``lock``."""

    __slots__ = ("deliver", "done", "fn", "interrupted", "lock", "state", "stop_asked", "worker")

    def __init__(self, fn: Callable[[Any], Any], deliver: Callable[[outcome.Outcome[Any]], None]):
        self.fn = fn
        self.deliver = deliver
        self.lock = threading.Lock()
        self.state = _QUEUED
        self.worker: _Worker[Any] | None = None
        #: The caller was cancelled while the unit ran: it is not run a second time.
        self.stop_asked = False
        #: Made only when someone waits for the unit to end (an interrupt), set by the thread.
        self.done: threading.Event | None = None
        #: An interrupt was aimed at the unit's connection: the thread retires that
        #: connection after the unit, so a late cancel request can never reach the next
        #: caller's statement on it.
        self.interrupted = False

    def finished(self) -> threading.Event:
        """An event set when the thread is done with the unit (call under ``lock``)."""
        if self.done is None:
            self.done = threading.Event()
            if self.state == _DONE:
                self.done.set()
        return self.done


class _Worker(Generic[R]):
    """A thread and the connection it owns."""

    def __init__(self, pool: Handoff[R], index: int) -> None:
        self.pool = pool
        self.inbox: queue.SimpleQueue[_Unit | None] = queue.SimpleQueue()
        self.conn: R | None = None
        self.thread = threading.Thread(
            target=self._main, name=f"{pool.name}-{index}", daemon=True
        )

    def give(self, unit: _Unit | None) -> None:
        self.inbox.put(unit)

    def _main(self) -> None:
        unit = self.inbox.get()
        while unit is not None:
            unit = self._run(unit) or self.inbox.get()
        self._close_conn()

    def _run(self, unit: _Unit) -> _Unit | None:
        """Run one unit; return the next one to run (from the pool's backlog), or None after
        going back to the idle stack. The thread goes idle *before* it answers, so the
        caller's next unit finds it idle instead of starting another thread."""
        with unit.lock:
            if unit.state == _ABANDONED:  # cancelled before it started
                return self.pool._next_for(self)
            unit.state = _RUNNING
            unit.worker = self
        result = self._attempt(unit.fn)
        if isinstance(result, outcome.Error) and self.pool._retry_once(result.error):
            with unit.lock:
                again = unit.state == _RUNNING and not unit.stop_asked
            if again:
                result = self._attempt(unit.fn)  # on a new connection: the old one is closed
        with unit.lock:
            abandoned = unit.state == _ABANDONED
            unit.state = _DONE
            unit.worker = None
            interrupted = unit.interrupted
            if unit.done is not None:
                unit.done.set()
        if interrupted:
            self._close_conn()  # the next unit opens a new one
        following = self.pool._next_for(self)
        if not abandoned:
            unit.deliver(result)
        return following

    def _attempt(self, fn: Callable[[Any], Any]) -> outcome.Outcome[Any]:
        result: outcome.Outcome[Any]
        try:
            if self.conn is not None and not self.pool._usable(self.conn):
                self._close_conn()  # it died while idle: a fresh one, not a failed unit
            if self.conn is None:
                self.conn = self.pool._open()
            result = outcome.Value(fn(self.conn))
        except BaseException as exc:  # handed to the awaiting task, which re-raises it
            result = outcome.Error(exc)
        if self.conn is not None and not self.pool._healthy(self.conn):
            self._close_conn()
        return result

    def _close_conn(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                self.pool._close(conn)

    def interrupt(self, unit: _Unit, abandon_s: float) -> None:
        """Helper thread: ask the unit's connection to stop; force it closed if that is not
        enough. Only while this thread still runs the unit (checked under its lock), and the
        connection is then marked for retirement (``_Unit.interrupted``): a cancel request
        that arrives late (it travels on a connection of its own) or a forced close can only
        reach this unit's statement or a connection no one uses any more."""
        with unit.lock:
            conn = self.conn
            if unit.worker is not self or conn is None:  # it ended (or never started) here
                return
            unit.interrupted = True
            done = unit.finished()
        if self.pool._interrupt is not None:
            with contextlib.suppress(Exception):
                self.pool._interrupt(conn)
        if not done.wait(abandon_s) and self.pool._force_close is not None:
            with contextlib.suppress(Exception):
                self.pool._force_close(conn)


#: Set (True) around a read-only call that its caller may give up at once when cancelled.
ABANDON_ON_CANCEL: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "gochatd_abandon_on_cancel", default=False)


@contextlib.contextmanager
def abandoned_on_cancel() -> Iterator[None]:
    """Calls in the block that their caller may give up at once when cancelled."""
    token = ABANDON_ON_CANCEL.set(True)
    try:
        yield
    finally:
        ABANDON_ON_CANCEL.reset(token)


class Handoff(Generic[R]):
    """Up to ``size`` threads, each owning one connection made by ``open_conn``.

    ``healthy(conn)`` is asked after every unit: False closes the connection (the thread
    opens a new one for its next unit). ``usable(conn)`` is asked before every unit: False
    (the server dropped the connection while it sat idle) opens a new one for this unit.
    ``retry_once(error)``: True when the error says the server refused the unit's statement
    while ending the session (nothing of it took effect); the unit then runs once more on a
    new connection, unless its caller was cancelled meanwhile. ``interrupt(conn)`` stops a
    running unit from another thread; ``force_close(conn)`` breaks its socket when even
    that does not work.
    """

    def __init__(
        self,
        name: str,
        open_conn: Callable[[], R],
        close_conn: Callable[[R], None],
        *,
        size: int = 1,
        healthy: Callable[[R], bool] = lambda conn: True,
        usable: Callable[[R], bool] = lambda conn: True,
        retry_once: Callable[[BaseException], bool] = lambda error: False,
        interrupt: Callable[[R], None] | None = None,
        force_close: Callable[[R], None] | None = None,
        abandon_s: float = 5.0,
    ) -> None:
        if size < 1:
            raise ValueError("a Handoff needs at least one thread")
        self.name = name
        self.size = size
        self.abandon_s = abandon_s
        self._open = open_conn
        self._close = close_conn
        self._healthy = healthy
        self._usable = usable
        self._retry_once = retry_once
        self._interrupt = interrupt
        self._force_close = force_close
        self._lock = threading.Lock()
        self._workers: list[_Worker[R]] = []
        self._idle: list[_Worker[R]] = []  # a stack: the most recently busy thread runs next
        self._backlog: collections.deque[_Unit] = collections.deque()
        self._closed = False

    # -- the thread side -------------------------------------------------------------------

    def _next_for(self, worker: _Worker[R]) -> _Unit | None:
        with self._lock:
            if self._backlog:
                return self._backlog.popleft()
            if not self._closed:
                self._idle.append(worker)
            return None

    def _submit(self, unit: _Unit) -> None:
        with self._lock:
            if self._closed:
                raise ResourceClosed(f"{self.name} is closed")
            HANDED[self.name] += 1
            if self._idle:
                worker = self._idle.pop()
            elif len(self._workers) < self.size:
                worker = _Worker(self, len(self._workers))
                self._workers.append(worker)
                worker.thread.start()
            else:
                self._backlog.append(unit)
                return
        worker.give(unit)

    # -- the caller side -------------------------------------------------------------------

    async def run(self, fn: Callable[[R], T]) -> T:
        """Run ``fn(conn)`` on one of the threads and return what it returns (or raise what
        it raised). One thread hop; see the module docstring for cancellation."""
        if sniffio.current_async_library() == "trio":
            return await self._run_trio(fn)
        return await self._run_asyncio(fn)

    async def _run_trio(self, fn: Callable[[R], T]) -> T:
        token = trio.lowlevel.current_trio_token()
        task = trio.lowlevel.current_task()
        cancelled = False
        give_up = ABANDON_ON_CANCEL.get()

        def deliver(result: outcome.Outcome[Any]) -> None:
            token.run_sync_soon(trio.lowlevel.reschedule, task, result)

        unit = _Unit(fn, deliver)

        def abort(_: Any) -> trio.lowlevel.Abort:
            nonlocal cancelled
            with unit.lock:  # state and worker read together, as the thread wrote them
                if unit.state == _QUEUED:
                    unit.state = _ABANDONED
                    return trio.lowlevel.Abort.SUCCEEDED
                unit.stop_asked = True
                worker = unit.worker
                running = unit.state == _RUNNING
                if give_up and running:
                    unit.state = _ABANDONED  # the thread drops its answer
            cancelled = True
            if running:
                self._interrupt_soon(unit, worker)
            if give_up and running:
                return trio.lowlevel.Abort.SUCCEEDED
            return trio.lowlevel.Abort.FAILED  # the thread's answer is on its way

        await trio.lowlevel.checkpoint_if_cancelled()
        self._submit(unit)
        try:
            result: T = await trio.lowlevel.wait_task_rescheduled(abort)
        except BaseException:
            if cancelled:  # stopped by the interrupt: report the cancellation, not the error
                await trio.lowlevel.checkpoint()
            raise
        return result

    async def _run_asyncio(self, fn: Callable[[R], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def settle(result: outcome.Outcome[T]) -> None:
            if future.done():
                return
            if isinstance(result, outcome.Value):
                future.set_result(result.value)
            elif isinstance(result, outcome.Error):
                future.set_exception(result.error)

        def deliver(result: outcome.Outcome[Any]) -> None:
            loop.call_soon_threadsafe(settle, result)

        unit = _Unit(fn, deliver)
        self._submit(unit)
        try:
            return await future
        except asyncio.CancelledError:
            with unit.lock:
                state, worker = unit.state, unit.worker
                if state != _DONE:
                    unit.state = _ABANDONED
            if state == _RUNNING:
                self._interrupt_soon(unit, worker)
            raise

    def _interrupt_soon(self, unit: _Unit, worker: _Worker[R] | None) -> None:
        """Stop a running unit from a helper thread (the interrupt may block on the network);
        nothing to do for a pool that has no way to stop one."""
        if worker is None or (self._interrupt is None and self._force_close is None):
            return
        threading.Thread(target=worker.interrupt, args=(unit, self.abandon_s), daemon=True,
                         name=f"{self.name}-interrupt").start()

    async def close(self, timeout_s: float = 5.0) -> None:
        """Stop taking work; each thread closes its connection after its unit in hand.
        Threads that do not stop within ``timeout_s`` are left (they are daemon threads)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._workers)
            backlog, self._backlog = list(self._backlog), collections.deque()
            self._idle.clear()
        for unit in backlog:  # never started: tell their callers
            with unit.lock:
                if unit.state == _ABANDONED:
                    continue
                unit.state = _DONE
            unit.deliver(outcome.Error(ResourceClosed(f"{self.name} is closed")))
        for worker in workers:
            worker.give(None)
        await _join(workers, timeout_s)


async def _join(workers: list[_Worker[Any]], timeout_s: float) -> None:
    """Wait (without blocking the loop) until the threads exited, at most ``timeout_s``."""
    if not workers:
        return
    if sniffio.current_async_library() == "trio":
        sleep: Callable[[float], Any] = trio.sleep
        now: Callable[[], float] = trio.current_time
    else:
        sleep, now = asyncio.sleep, asyncio.get_running_loop().time
    deadline = now() + timeout_s
    delay = 0.0005
    while any(w.thread.is_alive() for w in workers) and now() < deadline:
        await sleep(delay)
        delay = min(delay * 2, 0.05)
