"""The polling claim while a snapshot held elsewhere keeps every dead row version
(store/claim_window.py; docs/chaos.md, active_readers): it looks only at jobs due since its
queue's last complete pass, so its cost does not grow with the jobs run meanwhile; a job
outside every window (a due time long past) is still claimed by the next full pass."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
import trio

from gochatd.store import open_store
from gochatd.store.claim_window import FULL_EVERY_S
from gochatd.store.postgres import PostgresStore
from gochatd.store.queries import load_queries
from tests.support.pg_plans import held_snapshot, index_entries_returned

JOBS = 1500
PASSES_SLACK_S = 3.0


@pytest.fixture
async def pg_store(pg_clean: str) -> AsyncIterator[PostgresStore]:
    store = open_store(pg_clean)
    assert isinstance(store, PostgresStore)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def reader(pg_clean: str) -> Iterator[psycopg.Connection[Any]]:
    yield from held_snapshot(pg_clean)


def _insert_old(url: str, count: int) -> None:
    """Jobs due an hour ago, as a foreign producer may write them."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO background_jobs (job_type, queue, scheduled_at)"
                     " SELECT 'test:job', 'default', now() - interval '1 hour'"
                     " FROM generate_series(1, %s)", (count,))


def _index_entries_read(url: str, due_within_s: float | None) -> int:
    """Entries of the claim index one polling claim of an empty queue reads (dead ones
    included: the index hands them out before the heap says they are dead)."""
    params = {"queue": "default", "limit": 50, "owner": "probe", "lease_s": 30.0,
              "aging_s": 60.0, "dispatched_only": False, "due_within_s": due_within_s,
              "runnable_any": True, "runnable_types": [], "runnable_prefixes": []}
    sql = load_queries("postgres")["claim_due_jobs"]
    with psycopg.connect(url) as conn:  # one transaction: its own statistics
        assert conn.execute(sql, params).fetchall() == []  # the queue is empty
        read = index_entries_returned(conn)
        conn.rollback()
    return read


async def _drain(store: PostgresStore, url: str) -> int:
    claimed = 0
    while batch := await store.claim_due_jobs(["default"], 100, "w1", 30.0):
        claimed += len(batch)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("UPDATE background_jobs SET status = 'completed', completed_at = now()"
                         " WHERE id = ANY(%s)", ([c.id for c in batch],))
    return claimed


async def test_a_windowed_claim_skips_what_a_held_snapshot_keeps(
    pg_store: PostgresStore, pg_clean: str, reader: psycopg.Connection[Any],
) -> None:
    _insert_old(pg_clean, JOBS)
    assert await _drain(pg_store, pg_clean) == JOBS  # their dead versions stay: the reader
    window = pg_store._claim_windows.lookback_s("default")
    assert window is not None and window < 60.0  # the drained pass moved the window up
    full = _index_entries_read(pg_clean, None)
    windowed = _index_entries_read(pg_clean, window)
    assert full >= JOBS  # from the head of the index: every dead version
    assert windowed <= 50, (windowed, full)


async def test_a_job_due_before_the_window_runs_by_the_next_full_pass(
    pg_store: PostgresStore, pg_clean: str,
) -> None:
    _insert_old(pg_clean, 3)
    assert await _drain(pg_store, pg_clean) == 3
    _insert_old(pg_clean, 1)  # outside the window the drain left
    with trio.fail_after(FULL_EVERY_S + PASSES_SLACK_S):
        passes = 0
        while not await pg_store.claim_due_jobs(["default"], 10, "w1", 30.0):
            passes += 1
            await trio.sleep(0.1)
    assert passes >= 1  # the windowed passes did not look that far back
