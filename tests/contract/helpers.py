"""Helpers shared by the JobStore contract tests.

``raw_sql`` is how a producer written in another language talks to the database: plain
SQL over its own connection, no gochatd code involved.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import trio

from gochatd.model import (
    ClaimedJob,
    EnqueueRequest,
    Finish,
    Job,
    JobStatus,
    Outcome,
    can_transition,
)
from gochatd.store import JobStore, open_store

#: SQLite keeps times as epoch REALs from julianday(): differences are off by ~1e-7 s.
CLOCK_SLACK_S = 0.005


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def sqlite_path(url: str) -> str:
    assert url.startswith("sqlite:///"), url
    return url[len("sqlite:///"):]


def raw_sql_sync(url: str, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run one statement on its own connection and commit. Placeholders are ``?``."""
    if is_postgres(url):
        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(statement.replace("?", "%s"), tuple(params))  # type: ignore[arg-type]
            return list(cur.fetchall()) if cur.description else []
    conn = sqlite3.connect(sqlite_path(url), timeout=30.0, isolation_level=None)
    try:
        cur = conn.execute(statement, tuple(params))
        return list(cur.fetchall())
    finally:
        conn.close()


async def raw_sql(url: str, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """``raw_sql_sync`` off the Trio thread, so the store's tasks keep running meanwhile."""
    return await trio.to_thread.run_sync(raw_sql_sync, url, statement, params)


async def row_count(url: str) -> int:
    rows = await raw_sql(url, "SELECT count(*) FROM background_jobs")
    return int(rows[0][0])


@asynccontextmanager
async def second_store(url: str) -> AsyncIterator[JobStore]:
    """Another store instance on the same database: its own connections."""
    other = open_store(url)
    await other.open()
    try:
        yield other
    finally:
        await other.close()


def assert_edge(before: JobStatus, after: JobStatus) -> None:
    """Every status change a test observes must be an edge of ``TRANSITIONS``."""
    if before != after:
        assert can_transition(before, after), f"illegal transition {before} -> {after}"


async def refetch(store: JobStore, before: Job) -> Job:
    """Re-read ``before``'s row and check that its status change (if any) is legal."""
    after = await store.get_job(before.id)
    assert after is not None, f"job {before.id} vanished"
    assert_edge(before.status, after.status)
    return after


async def enqueue(store: JobStore, job_type: str = "test:job", **kwargs: Any) -> Job:
    payload = kwargs.pop("payload", {"k": job_type})
    result = await store.enqueue(EnqueueRequest(job_type=job_type, payload=payload, **kwargs))
    assert result.created
    assert result.job.status is JobStatus.QUEUED
    return result.job


async def claim_one(store: JobStore, job: Job, owner: str, lease_s: float = 30.0) -> ClaimedJob:
    claimed = await store.claim_jobs([job.id], owner, lease_s)
    assert [c.id for c in claimed] == [job.id], f"could not claim job {job.id}"
    assert_edge(job.status, claimed[0].job.status)
    assert claimed[0].job.status is JobStatus.RUNNING
    return claimed[0]


def finish(claimed: ClaimedJob, outcome: Outcome, **kwargs: Any) -> Finish:
    return Finish(
        job_id=claimed.id, lease_owner=claimed.lease_owner, fence=claimed.fence,
        outcome=outcome, tenant_id=claimed.job.tenant_id, **kwargs,
    )
