"""Handlers for the chaos fleet, loaded by every daemon with
``--handlers benchmarks.chaos.handlers``.

``chaos:work`` records its execution (job id, fence, attempt, pid, worker, start, end,
outcome) through ``benchmarks.chaos.recorder``, then, as its payload asks:

- ``hold_db_s``  opens its own connection to the jobs database (through the daemon's proxy
                 listener) and holds it in ``pg_sleep`` that long: pool and connection
                 exhaustion;
- ``work_s``     sleeps that long (the job's work);
- ``fail_times`` raises on attempts 1..fail_times (retries), and on every attempt when it
                 is at least the job's max_attempts (dead);
- ``fail_hard``  raises ``NonRetryable`` (dead at once: a batch member failing on purpose);
- ``effect``     then does a real write in the jobs database on its own connection:
                 ``chaos_effects.applied += 1`` for the job (at-least-once side effects).

The end is recorded with outcome ``ok``, ``failed`` or ``cancelled`` (lease lost, shutdown);
a process killed mid-handler leaves no end. ``chaos:exit`` records its start and end
(outcome ``exit``) and then ``os._exit(1)``: the poison job that takes its daemon down.
``chaos:flow`` is a batch callback or a chain link (``benchmarks.chaos.flows``): it records
its execution, then what ``ctx.dependencies()`` gave it, works, writes its effect and
returns ``{"step": n}`` (a chain's next link reads it).

``CHAOS_CLOCK_SKEW_S`` (clock-skew scenario) shifts ``time.time`` of the whole daemon
process by that many seconds; the recorder keeps the real clock.
"""

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import trio

import gochatd
from benchmarks.chaos.faketime import OFFSET_FILE_ENV, read_offset_s
from benchmarks.chaos.recorder import Recorder
from gochatd.context import JobContext

_REAL_TIME: Callable[[], float] = time.time
_REAL_TIME_NS: Callable[[], int] = time.time_ns


def _unfaked_clock() -> Callable[[], float]:
    """Under libfaketime (the clock-jump scenarios) ``time.time`` is the faked host clock;
    the record keeps the real one: the real time at start-up (the fake one less the
    offset the file sets now) moved on by the monotonic clock, which faketime leaves
    alone."""
    offset_file = os.environ.get(OFFSET_FILE_ENV)
    if not offset_file:
        return _REAL_TIME
    wall0 = _REAL_TIME() - read_offset_s(offset_file)
    mono0 = time.monotonic()
    return lambda: wall0 + (time.monotonic() - mono0)


def _apply_clock_skew() -> float:
    skew = float(os.environ.get("CHAOS_CLOCK_SKEW_S") or 0.0)
    if skew:
        skew_ns = int(skew * 1e9)
        time.time = lambda: _REAL_TIME() + skew
        time.time_ns = lambda: _REAL_TIME_NS() + skew_ns
    return skew


CLOCK_SKEW_S = _apply_clock_skew()
_RECORD_CLOCK = _unfaked_clock()


class ChaosFailure(Exception):
    """The failure a ``fail_times`` payload asks for (retryable)."""


class _Connections:
    """The handlers' own connections to the jobs database, through the daemon's proxy
    listener (``GOCHAT_DATABASE_URL``), so a partition cuts them too."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._idle: list[psycopg.Connection[Any]] = []
        self._lock = threading.Lock()

    def _connect(self) -> psycopg.Connection[Any]:
        # Nothing prepared: in scenario pgbouncer_restart this URL is a pooler's.
        return psycopg.connect(self.url, autocommit=True, connect_timeout=3,
                               prepare_threshold=None)

    def effect(self, job_id: int) -> None:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        try:
            conn.execute(
                "INSERT INTO chaos_effects (job_id, applied) VALUES (%s, 1) "
                "ON CONFLICT (job_id) DO UPDATE SET applied = chaos_effects.applied + 1",
                (job_id,),
            )
        except BaseException:
            conn.close()
            raise
        with self._lock:
            self._idle.append(conn)

    def hold(self, seconds: float) -> None:
        with self._connect() as conn:
            conn.execute("SELECT pg_sleep(%s)", (seconds,))


_recorder: Recorder | None = None
_connections: _Connections | None = None


def recorder() -> Recorder:
    global _recorder
    if _recorder is None:
        url = os.environ.get("CHAOS_RECORD_URL") or os.environ["GOCHAT_DATABASE_URL"]
        _recorder = Recorder(url, os.environ.get("CHAOS_WORKER_NAME", "?"), _RECORD_CLOCK)
    return _recorder


def connections() -> _Connections:
    global _connections
    if _connections is None:
        _connections = _Connections(os.environ["GOCHAT_DATABASE_URL"])
    return _connections


@gochatd.job("chaos:work")
async def work(ctx: JobContext) -> None:
    rec = recorder()
    row = await trio.to_thread.run_sync(rec.started, ctx.job_id, ctx.fence, ctx.attempt,
                                        os.getpid())
    outcome = "cancelled"
    try:
        payload = ctx.payload
        hold_s = float(payload.get("hold_db_s") or 0.0)
        if hold_s > 0:
            await trio.to_thread.run_sync(connections().hold, hold_s, abandon_on_cancel=True)
        await trio.sleep(float(payload.get("work_s") or 0.0))
        if payload.get("fail_hard"):
            raise gochatd.NonRetryable("injected non-retryable failure")
        if ctx.attempt <= int(payload.get("fail_times") or 0):
            raise ChaosFailure(f"injected failure on attempt {ctx.attempt}")
        if payload.get("effect"):
            await trio.to_thread.run_sync(connections().effect, ctx.job_id,
                                          abandon_on_cancel=True)
        outcome = "ok"
    except Exception:
        outcome = "failed"
        raise
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(rec.ended, row, outcome)


@gochatd.job("chaos:flow")
async def flow(ctx: JobContext) -> dict[str, Any]:
    rec = recorder()
    row = await trio.to_thread.run_sync(rec.started, ctx.job_id, ctx.fence, ctx.attempt,
                                        os.getpid())
    outcome = "cancelled"
    try:
        deps = await ctx.dependencies()
        seen = [[d.job_id, d.status.value, d.result] for d in deps]
        await trio.to_thread.run_sync(rec.saw, row, seen)
        await trio.sleep(float(ctx.payload.get("work_s") or 0.0))
        if ctx.payload.get("effect"):
            await trio.to_thread.run_sync(connections().effect, ctx.job_id,
                                          abandon_on_cancel=True)
        outcome = "ok"
        return {"step": int(ctx.payload.get("step") or 0)}
    except Exception:
        outcome = "failed"
        raise
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(rec.ended, row, outcome)


@gochatd.job("chaos:exit")
async def poison(ctx: JobContext) -> None:
    rec = recorder()
    row = await trio.to_thread.run_sync(rec.started, ctx.job_id, ctx.fence, ctx.attempt,
                                        os.getpid())
    await trio.to_thread.run_sync(rec.ended, row, "exit")
    os._exit(1)
