"""The statements that look for waiting jobs of a queue read them through
``background_jobs_claimable_idx`` only, whatever the statistics say (docs/chaos.md,
idle_in_transaction; sql/postgres/0020_claim_only_index.up.sql).

While a transaction held open elsewhere keeps every dead index entry, an index that answers
a waiting status across queues holds an entry for every version of every job that ever
waited. After an ANALYZE that saw few waiting rows, the planner took
``background_jobs_status_idx`` or ``background_jobs_waiting_idx`` for the claim's probes
(ANALYZE counts a partial index's live rows only, so the bloated claim index looked dear)
and walked every dead entry: ~8,000 blocks a claim in the 10-minute run. No other index
answers a waiting status now."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from gochatd.store.queries import load_queries, load_scoped_queries
from tests.support.pg_plans import positional as to_positional

#: The statements that look for a queue's waiting jobs by queue and priority.
BY_QUEUE = ("claim_due_jobs", "claim_delivered_jobs", "pick_due_job_ids",
            "pick_limited_due_job_ids")
ALLOWED = {"background_jobs_claimable_idx", "background_jobs_pkey"}
ARGS: dict[str, Any] = {
    "queue": "default", "queues": ["default"], "limit": 10, "aging_s": 60.0,
    "due_within_s": 7.0, "runnable_any": True, "runnable_types": [],
    "runnable_prefixes": [], "dispatched_only": False, "owner": "w", "lease_s": 30.0,
    "ids": [1, 2, 3], "full": [], "open": ["default"], "tenants": [], "limits": [], "capped_queues": [],
    "queue_limits": [], "scope_only": False, "scope_tenants": [],
}  # any other parameter: NULL


def _indexes(node: dict[str, Any], out: set[str]) -> set[str]:
    """Every way the plan reads ``background_jobs``: an index name, or the scan's type."""
    if node.get("Relation Name") == "background_jobs" and "Scan" in node["Node Type"]:
        out.add(node.get("Index Name") or node["Node Type"])
    for child in node.get("Plans", []):
        _indexes(child, out)
    return out


def _plan(conn: psycopg.Connection[Any], text: str, mode: str) -> set[str]:
    positional, names = to_positional(text)
    conn.execute(f"SET plan_cache_mode = {mode}")
    conn.execute("DEALLOCATE ALL")
    conn.execute(sql.SQL("PREPARE waiting AS {}").format(sql.SQL(positional)))
    args = sql.SQL(", ").join(sql.Literal(ARGS.get(n)) for n in names)
    execute = "EXPLAIN (FORMAT JSON) EXECUTE waiting" + ("({})" if names else "{}")
    row = conn.execute(sql.SQL(execute).format(args)).fetchone()
    assert row is not None
    return _indexes(row[0][0]["Plan"], set())


@pytest.fixture
def held_dead_entries(pg_clean: str) -> Iterator[str]:
    """What the fleet leaves behind under a transaction held open: many finished jobs, every
    waiting version of the jobs run since the hold still indexed, three jobs waiting, and
    statistics that saw those three."""
    holder = psycopg.connect(pg_clean)
    try:
        with psycopg.connect(pg_clean, autocommit=True) as conn:
            conn.execute("INSERT INTO background_jobs (job_type, status, completed_at)"
                         " SELECT 'test:job', 'completed', now()"
                         " FROM generate_series(1, 3000)")
            holder.execute("SELECT txid_current()")
            for _ in range(3):
                conn.execute("INSERT INTO background_jobs (job_type, scheduled_at, created_at)"
                             " SELECT 'test:job', now() - interval '1 minute',"
                             " now() - interval '1 minute' FROM generate_series(1, 2000)")
                conn.execute("UPDATE background_jobs SET status = 'running', locked_by = 'w',"
                             " fence = fence + 1 WHERE status = 'queued'")
                conn.execute("UPDATE background_jobs SET status = 'completed',"
                             " completed_at = now() WHERE status = 'running'")
            conn.execute("INSERT INTO background_jobs (job_type)"
                         " SELECT 'test:job' FROM generate_series(1, 3)")
            conn.execute("ANALYZE background_jobs")
        yield pg_clean
    finally:
        holder.close()


@pytest.mark.parametrize("mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("scoped", [False, True], ids=["plain", "scoped"])
@pytest.mark.parametrize("name", BY_QUEUE)
def test_a_claim_reads_waiting_jobs_through_the_claim_index_only(
    held_dead_entries: str, name: str, scoped: bool, mode: str,
) -> None:
    text = (load_scoped_queries if scoped else load_queries)("postgres")[name]
    with psycopg.connect(held_dead_entries, autocommit=True, prepare_threshold=None) as conn:
        used = _plan(conn, text, mode)
    assert used and used <= ALLOWED, (name, used)


def test_the_statistics_are_the_kind_that_misled_the_planner(held_dead_entries: str) -> None:
    """Under the index set before 0020 these statistics send the claim elsewhere (so the
    test above would fail there)."""
    text = load_queries("postgres")["claim_due_jobs"]
    with psycopg.connect(held_dead_entries, autocommit=True, prepare_threshold=None) as conn:
        conn.execute("BEGIN")
        conn.execute("DROP INDEX background_jobs_status_idx")
        conn.execute("CREATE INDEX background_jobs_status_idx ON background_jobs (status, id)")
        conn.execute("CREATE INDEX background_jobs_waiting_idx ON background_jobs"
                     " (scheduled_at, id) WHERE status IN ('queued', 'retrying')")
        used = _plan(conn, text, "force_custom_plan")
        conn.execute("ROLLBACK")
    assert used & {"background_jobs_status_idx", "background_jobs_waiting_idx"}, used


def test_the_scheduled_listing_and_counts_read_the_deferred_index(
    held_dead_entries: str,
) -> None:
    queries = load_queries("postgres")
    with psycopg.connect(held_dead_entries, autocommit=True, prepare_threshold=None) as conn:
        for name in ("list_scheduled_jobs", "count_scheduled_jobs", "count_delayed_jobs"):
            assert _plan(conn, queries[name], "force_custom_plan") == {
                "background_jobs_deferred_idx"}, name
