"""Handlers for end-to-end tests, loaded by a real daemon with
``--handlers tests.support.recording_handlers``.

``test:record`` appends one row per execution to ``test_executions`` in the jobs database
(``RECORDING_DATABASE_URL``, else ``GOCHAT_DATABASE_URL``) when it starts, sleeps, and sets
the row's ``ended_at`` only when the handler body ran to its end. A handler cancelled
(lease lost, shutdown) or killed leaves ``ended_at`` NULL.

Payload: ``seconds`` (default 0), ``seconds_by_fence`` ({"1": 30} sleeps 30 s on the first
claim only). ``test:block`` records its start and then sleeps for an hour.
"""

import os
import sqlite3
import threading
import time
from typing import Any

import psycopg
import trio

import gochatd
from gochatd.context import JobContext

PG_TABLE = """
CREATE TABLE IF NOT EXISTS test_executions (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    fence bigint NOT NULL,
    attempt integer NOT NULL,
    pid integer NOT NULL,
    started_at double precision NOT NULL,
    ended_at double precision
)"""

SQLITE_TABLE = """
CREATE TABLE IF NOT EXISTS test_executions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id INTEGER NOT NULL,
    fence INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL
)"""

BLOCK_SECONDS = 3600.0


def sqlite_path(url: str) -> str:
    """``sqlite:////abs/x.db`` -> ``/abs/x.db``, ``sqlite:///rel.db`` -> ``rel.db``."""
    rest = url[len("sqlite://"):]
    return rest[1:] if rest.startswith("/") else rest


class Recorder:
    """Blocking writes, run on worker threads; idle connections are reused."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_pg = url.startswith(("postgresql://", "postgres://"))
        self._idle: list[Any] = []
        self._lock = threading.Lock()

    def _connect(self) -> Any:
        if self.is_pg:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        conn = sqlite3.connect(
            sqlite_path(self.url), timeout=30.0, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute(SQLITE_TABLE)
        return conn

    def _execute(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect()
        try:
            cur = conn.execute(sql, params)
            rows = list(cur.fetchall()) if cur.description else []
        except BaseException:
            conn.close()
            raise
        with self._lock:
            self._idle.append(conn)
        return rows

    def started(self, job_id: int, fence: int, attempt: int) -> int:
        mark = "%s" if self.is_pg else "?"
        rows = self._execute(
            "INSERT INTO test_executions (job_id, fence, attempt, pid, started_at) "
            f"VALUES ({mark}, {mark}, {mark}, {mark}, {mark}) RETURNING id",
            (job_id, fence, attempt, os.getpid(), time.time()),
        )
        return int(rows[0][0])

    def ended(self, row_id: int) -> None:
        mark = "%s" if self.is_pg else "?"
        self._execute(
            f"UPDATE test_executions SET ended_at = {mark} WHERE id = {mark}",
            (time.time(), row_id),
        )


_recorder: Recorder | None = None


def recorder() -> Recorder:
    global _recorder
    if _recorder is None:
        url = os.environ.get("RECORDING_DATABASE_URL") or os.environ.get("GOCHAT_DATABASE_URL")
        if not url:
            raise gochatd.NonRetryable("set RECORDING_DATABASE_URL or GOCHAT_DATABASE_URL")
        _recorder = Recorder(url)
    return _recorder


def _seconds(ctx: JobContext) -> float:
    by_fence = ctx.payload.get("seconds_by_fence") or {}
    value = by_fence.get(str(ctx.fence), ctx.payload.get("seconds", 0))
    return float(value)


@gochatd.job("test:record")
async def record(ctx: JobContext) -> None:
    rec = recorder()
    row_id = await trio.to_thread.run_sync(rec.started, ctx.job_id, ctx.fence, ctx.attempt)
    await trio.sleep(_seconds(ctx))
    await trio.to_thread.run_sync(rec.ended, row_id)


@gochatd.job("test:block")
async def block(ctx: JobContext) -> None:
    rec = recorder()
    row_id = await trio.to_thread.run_sync(rec.started, ctx.job_id, ctx.fence, ctx.attempt)
    await trio.sleep(BLOCK_SECONDS)
    await trio.to_thread.run_sync(rec.ended, row_id)
