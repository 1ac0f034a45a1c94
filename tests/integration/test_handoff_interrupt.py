"""The hand-off's interrupt on a real PostgreSQL connection: a cancel request that reaches
the server late (it travels on a connection of its own) must never stop the next caller's
statement on the connection the cancelled unit used."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import trio

from gochatd.io.handoff import Handoff, _Unit
from tests.support.wait import wait_until

Conn = psycopg.Connection[Any]


async def _set(event: threading.Event, what: str) -> None:
    async def probe() -> bool:
        return event.is_set()

    await wait_until(probe, timeout_s=30, what=what)


async def test_a_late_interrupt_never_cancels_the_next_callers_query(pg_url: str) -> None:
    interrupting = threading.Event()
    next_running = threading.Event()
    cancel_sent = threading.Event()
    release_first = threading.Event()
    first_started = threading.Event()
    aimed_at: list[Conn] = []
    ran_on: list[Conn] = []

    def late_cancel(conn: Conn) -> None:
        """PostgreSQL's cancel request, as if the network delayed it until the thread had
        moved on to the next caller's unit (on the old code: on the same connection)."""
        aimed_at.append(conn)
        interrupting.set()
        next_running.wait(30)
        try:
            conn.cancel_safe(timeout=10)
        finally:
            cancel_sent.set()

    pool: Handoff[Conn] = Handoff(
        "test-pg", lambda: psycopg.connect(pg_url, autocommit=True), lambda c: c.close(),
        size=1, interrupt=late_cancel, abandon_s=30.0,
    )

    def first(conn: Conn) -> int:
        first_started.set()
        release_first.wait(30)  # finishes on its own: the interrupt came too late for it
        return 1

    def second(conn: Conn) -> str:
        ran_on.append(conn)
        next_running.set()
        # Still running when the late cancel request arrives (sent as this one starts).
        row = conn.execute("SELECT 'done' FROM pg_sleep(2)").fetchone()
        assert row is not None
        return str(row[0])

    scope = trio.CancelScope()

    async def first_caller() -> None:
        with scope:
            await pool.run(first)

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first_caller)
            await _set(first_started, "the first unit running")
            scope.cancel()  # the caller gives up: abort -> interrupt on a helper thread
            await _set(interrupting, "the interrupt under way")
            release_first.set()
        result = await pool.run(second)
        assert cancel_sent.is_set()
        assert result == "done"  # not QueryCanceled
        assert aimed_at[0] is not ran_on[0]  # the interrupted connection was retired
        assert aimed_at[0].closed
    finally:
        release_first.set()
        next_running.set()
        await pool.close()


async def test_an_interrupt_after_the_unit_ended_touches_nothing(pg_url: str) -> None:
    """The race the abort had: a unit that ends while its caller is being cancelled. An
    interrupt that finds the unit no longer running on that thread sends nothing."""
    calls: list[Conn] = []
    pool: Handoff[Conn] = Handoff(
        "test-pg", lambda: psycopg.connect(pg_url, autocommit=True), lambda c: c.close(),
        size=1, interrupt=calls.append,
    )
    try:
        assert await pool.run(lambda c: c.execute("SELECT 1").fetchone()) == (1,)
        [worker] = pool._workers
        ended = _Unit(lambda c: None, lambda r: None)  # never ran here
        worker.interrupt(ended, abandon_s=1.0)
        assert calls == []
        assert await pool.run(lambda c: c.execute("SELECT 2").fetchone()) == (2,)
    finally:
        await pool.close()


async def test_a_read_set_to_abandon_on_cancel_gives_up_at_once(pg_url: str) -> None:
    """``ABANDON_ON_CANCEL`` (a handler's ``ctx.dependencies()``): cancelled while its unit
    hangs (an interrupt that does nothing: a black-holed network), the caller returns at once;
    the unit's late answer is dropped and its connection is not used again. (Without it the
    caller waits for the thread's answer, as every write must: the test above.)"""
    from gochatd.io.handoff import ABANDON_ON_CANCEL

    release = threading.Event()
    started = threading.Event()
    opened: list[Conn] = []

    def connect() -> Conn:
        conn = psycopg.connect(pg_url, autocommit=True)
        opened.append(conn)
        return conn

    pool: Handoff[Conn] = Handoff("test-abandon", connect, lambda c: c.close(), size=1,
                                  interrupt=lambda conn: None, abandon_s=30.0)

    def hang(conn: Conn) -> int:
        started.set()
        release.wait(30)
        return 1

    async def call(give_up: bool, scope: trio.CancelScope) -> None:
        token = ABANDON_ON_CANCEL.set(give_up)
        try:
            with scope:
                await pool.run(hang)
        finally:
            ABANDON_ON_CANCEL.reset(token)

    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(call, True, scope)
        await _set(started, "the unit started")
        scope.cancel()
    assert scope.cancelled_caught and not release.is_set()  # gave up while the unit hung
    release.set()
    assert await pool.run(lambda conn: conn.execute("SELECT 2").fetchone()[0]) == 2
    assert len(opened) == 2  # the abandoned unit's connection was retired

    await pool.close()
