"""What end-to-end tests look at from outside the daemons: the jobs table and the
``test_executions`` table, read with plain blocking drivers; plus a fast in-process producer."""

import sqlite3
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import trio

from gochatd.client.client import Client
from gochatd.testing import migrate as upgrade  # creates a SQLite file (a client refuses none)
from tests.support.recording_handlers import PG_TABLE, SQLITE_TABLE, sqlite_path


def query(url: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on the jobs database (PostgreSQL or SQLite) and return its rows."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(sqlite_path(url), timeout=30.0, isolation_level=None)
        try:
            lite = conn.execute(sql.replace("%s", "?"), tuple(params))
            return [tuple(r) for r in lite.fetchall()] if lite.description else []
        finally:
            conn.close()
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as pg:
        cur = pg.execute(sql, tuple(params))
        return [tuple(r) for r in cur.fetchall()] if cur.description else []


def reset_executions(url: str) -> None:
    if url.startswith("sqlite:"):
        query(url, SQLITE_TABLE)
        query(url, "DELETE FROM test_executions")
    else:
        query(url, PG_TABLE)
        query(url, "TRUNCATE test_executions RESTART IDENTITY")


@dataclass(frozen=True)
class JobRow:
    id: int
    status: str
    fence: int
    attempts: int


@dataclass(frozen=True)
class Execution:
    job_id: int
    fence: int
    attempt: int
    pid: int
    started_at: float
    ended_at: float | None


def jobs(url: str) -> dict[int, JobRow]:
    rows = query(url, "SELECT id, status, fence, attempts FROM background_jobs ORDER BY id")
    return {int(r[0]): JobRow(int(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in rows}


def status_counts(url: str) -> Counter[str]:
    return Counter(j.status for j in jobs(url).values())


def executions(url: str) -> list[Execution]:
    rows = query(
        url,
        "SELECT job_id, fence, attempt, pid, started_at, ended_at FROM test_executions ORDER BY id",
    )
    return [
        Execution(int(r[0]), int(r[1]), int(r[2]), int(r[3]), float(r[4]),
                  None if r[5] is None else float(r[5]))
        for r in rows
    ]


def enqueue_many(
    database_url: str,
    job_type: str,
    payloads: Sequence[dict[str, Any]],
    redis_url: str = "",
) -> list[int]:
    """Enqueue through ``gochatd.Client`` in this process (much faster than one CLI call
    per job); returns the new ids in order."""

    async def run() -> list[int]:
        if database_url.startswith("sqlite:"):
            await upgrade(database_url)
        async with Client(database_url, redis_url or None) as client:
            return [(await client.enqueue(job_type, dict(p))).id for p in payloads]

    return trio.run(run)

