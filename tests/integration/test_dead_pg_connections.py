"""PostgreSQL connections that die in the pool (``pg_terminate_backend``, a restart) are
replaced before a unit of work uses them: the claim, the finish and the read after the
kill succeed. A statement the server refused because it was ending the session (57P01) runs
once more on a new connection; any other error is the unit's own and is not repeated."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from gochatd.model import Finish, Outcome
from gochatd.store import open_store
from gochatd.store.pg_threads import connection_pool, still_connected
from tests.integration.helpers import insert_job


def _backends(url: str) -> set[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'").fetchall()
    return {int(r[0]) for r in rows}


def _terminate(url: str, pids: set[int]) -> None:
    """Every one of ``pids`` gone when this returns (the server waits for each exit). A
    backend that ended on its own between the listing and the call (false) is gone too."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid, 10000) FROM unnest(%s::int[]) "
                     "AS t(pid)", (sorted(pids),))
        left = conn.execute("SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s::int[])",
                            (sorted(pids),)).fetchall()
    assert not left, left


async def test_a_store_whose_backends_were_terminated_claims_and_finishes(
    pg_clean: str,
) -> None:
    store = open_store(pg_clean)
    await store.open()
    try:
        job_id = await insert_job(pg_clean)
        backends = _backends(pg_clean)
        assert backends  # the pool's connection and the LISTEN connection
        _terminate(pg_clean, backends)
        [claimed] = await store.claim_due_jobs(["default"], 1, "w", 30.0)
        assert claimed.id == job_id
        applied = await store.finish_jobs(
            [Finish(job_id, "w", claimed.fence, Outcome.COMPLETED, claimed.job.tenant_id)])
        assert applied == {job_id}
        assert not backends & _backends(pg_clean)
    finally:
        await store.close()


def test_still_connected_sees_a_terminated_backend(pg_clean: str) -> None:
    conn = psycopg.connect(pg_clean, autocommit=True)
    try:
        assert still_connected(conn)
        _terminate(pg_clean, {conn.info.backend_pid})
        assert not still_connected(conn)
    finally:
        conn.close()
    assert not still_connected(conn)  # closed: no socket to look at


def _pool(url: str) -> Any:
    return connection_pool("test-pg", lambda: psycopg.connect(url, autocommit=True), 1)


async def test_a_statement_refused_by_a_terminating_session_runs_again(pg_clean: str) -> None:
    """The backend is told to exit after the pool's check: the server answers the statement
    with 57P01 instead of running it, and the unit runs once more on a new connection."""
    pool = _pool(pg_clean)
    pids: list[int] = []

    def unit(conn: psycopg.Connection[Any]) -> int:
        pids.append(conn.info.backend_pid)
        if len(pids) == 1:
            conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        row = conn.execute("SELECT 7").fetchone()
        assert row is not None
        return int(row[0])

    try:
        assert await pool.run(unit) == 7
        assert len(pids) == 2 and pids[0] != pids[1]
    finally:
        await pool.close()


async def test_any_other_error_is_not_repeated(pg_clean: str) -> None:
    pool = _pool(pg_clean)
    calls: list[int] = []

    def unit(conn: psycopg.Connection[Any]) -> None:
        calls.append(1)
        conn.execute("SELECT 1 / 0")

    try:
        with pytest.raises(psycopg.errors.DivisionByZero):
            await pool.run(unit)
        assert calls == [1]
    finally:
        await pool.close()
