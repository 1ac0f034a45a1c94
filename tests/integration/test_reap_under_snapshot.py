"""The reaper while a snapshot held elsewhere keeps every dead row version (loops/reap.py;
docs/chaos.md, idle_in_transaction): its pass and its question "when does the next lease
expire?" read only the leases of its window, so their cost does not grow with the jobs run
meanwhile. Before, both read ``background_jobs_lease_idx`` from its start: one dead entry
per job that ever ran, read by each daemon about once a lease."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from gochatd.store.queries import load_queries
from tests.support.pg_plans import held_snapshot, index_entries_returned

JOBS = 1500
WINDOW_S = 20.0


@pytest.fixture
def reader(pg_clean: str) -> Iterator[psycopg.Connection[Any]]:
    yield from held_snapshot(pg_clean)


def _ran_an_hour_ago(url: str) -> int:
    """Jobs that ran under leases gone an hour ago and completed: each leaves its running
    version's entry in the lease index. Returns the newest id."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO background_jobs (job_type, status, locked_by, fence,"
                     " lease_expires_at) SELECT 'test:job', 'running', 'w', 1,"
                     " now() - interval '1 hour' FROM generate_series(1, %s)", (JOBS,))
        conn.execute("UPDATE background_jobs SET status = 'completed', completed_at = now(),"
                     " lease_expires_at = NULL WHERE status = 'running'")
        row = conn.execute("SELECT max(id) FROM background_jobs").fetchone()
    assert row is not None
    return int(row[0])


def _index_entries_read(url: str, name: str, params: dict[str, Any], mode: str) -> int:
    """Index entries of ``background_jobs`` one statement reads (dead ones included), in a
    custom plan or in the generic plan a statement prepared by psycopg may settle on."""
    with psycopg.connect(url) as conn:  # one transaction: its own statistics
        conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
        rows = conn.execute(load_queries("postgres")[name], params, prepare=True).fetchall()
        assert rows in ([], [(None,)])  # nothing to reap, no lease running
        read = index_entries_returned(conn)
        conn.rollback()
    return read


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
def test_the_reapers_windowed_reads_skip_what_a_held_snapshot_keeps(
    pg_clean: str, reader: psycopg.Connection[Any], mode: str,
) -> None:
    newest = _ran_an_hour_ago(pg_clean)
    with psycopg.connect(pg_clean, autocommit=True) as conn:
        conn.execute("ANALYZE background_jobs")  # no running job: the lease index looks dear
    reap = {"limit": 1000, "attempts_kept": 20, "created_after_id": newest}
    full = _index_entries_read(pg_clean, "reap_expired_leases",
                               {**reap, "expired_within_s": None, "created_after_id": None}, mode)
    windowed = _index_entries_read(pg_clean, "reap_expired_leases",
                                   {**reap, "expired_within_s": WINDOW_S}, mode)
    assert full >= JOBS  # from the start of the lease index: every dead version
    assert windowed <= 50, (windowed, full)
    full = _index_entries_read(pg_clean, "next_lease_expiry_in_s", {"expired_within_s": None}, mode)
    windowed = _index_entries_read(pg_clean, "next_lease_expiry_in_s",
                                   {"expired_within_s": WINDOW_S}, mode)
    assert full >= JOBS
    assert windowed <= 50, (windowed, full)
