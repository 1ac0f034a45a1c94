"""Statements that name their jobs by id reach them by the primary key, whatever the
statistics say (docs/chaos.md, active_readers).

psycopg prepares a statement run five times, and PostgreSQL may then keep one generic plan
for it. With few running (or waiting) jobs in the statistics, that plan read
``background_jobs_status_idx`` for ``status = 'running'`` and hash-joined the ids to it.
That index also holds an entry for every dead version of every job that ever ran. Under a
snapshot held elsewhere, none can go, so each finish and each lease extension of a full
run read ~1,500 blocks instead of ~20 (auto_explain). The statements now write the status
test in a form no index answers (``IS NOT DISTINCT FROM``), so the primary key is the only
way in.

A database whose table has never been analyzed (a new one, or autovacuum not round yet
after a first big enqueue) has no statistics at all: the planner then judged the status
and type tests to leave one row of thousands, scanned the whole table as the outer side of
a nested loop and compared every row with every id of the batch (50-80 ms a claim of 100,
500,000 comparisons, in the first drain of a fresh database). The claims therefore name
their ids as ``id = ANY(...)`` on the table itself, not as a join: the plan of a batch then
reads each row once at most, by the primary key or, where the planner finds the table small
enough, by one scan that looks each row up in the hashed ids. The finishes, which need each
id's own values, keep the join: without statistics the planner hashes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from gochatd.store.queries import load_queries, load_scoped_queries
from tests.conftest import migrate_database
from tests.support.pg_plans import positional as to_positional

#: The statements that name their rows by id in an array (and the plain and scoped text of
#: each).
BY_ID = ("claim_jobs", "claim_delivered_jobs", "finish_jobs", "finish_jobs_with_replies",
         "extend_leases")


def _target_scans(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every scan of ``background_jobs`` as the statement's target (alias ``j``)."""
    if (node.get("Relation Name") == "background_jobs" and node.get("Alias") == "j"
            and "Scan" in node["Node Type"]):
        yield node
    for child in node.get("Plans", []):
        yield from _target_scans(child)


def _index_of(scan: dict[str, Any]) -> str | None:
    """The index a scan reads; a bitmap heap scan's is the index of its bitmap."""
    if scan["Node Type"] != "Bitmap Heap Scan":
        return scan.get("Index Name")
    bitmaps = {c.get("Index Name") for c in scan.get("Plans", [])}
    return bitmaps.pop() if len(bitmaps) == 1 else f"bitmaps {sorted(map(str, bitmaps))}"


def _scans(plan: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(node type, index) of every scan of the target."""
    return [(scan["Node Type"], _index_of(scan)) for scan in _target_scans(plan)]


def _generic_plan(conn: psycopg.Connection[Any], text: str) -> dict[str, Any]:
    """The plan PostgreSQL keeps for ``text`` once it settles on a generic one."""
    positional, names = to_positional(text)
    conn.execute("SET plan_cache_mode = force_generic_plan")
    conn.execute(sql.SQL("PREPARE by_id AS {}").format(sql.SQL(positional)))
    # Any arguments: a generic plan does not look at them.
    args = sql.SQL(", ").join(sql.Literal(None) for _ in names)
    row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE by_id({})").format(args)
                       ).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]["Plan"]
    return plan


@pytest.fixture
def few_running(pg_clean: str) -> str:
    """Statistics that make an index on status look cheap: a few running and waiting jobs
    among many finished ones."""
    with psycopg.connect(pg_clean, autocommit=True) as conn:
        conn.execute("INSERT INTO background_jobs (job_type, queue, status, completed_at)"
                     " SELECT 'test:job', 'default', 'completed', now()"
                     " FROM generate_series(1, 3000)")
        conn.execute("UPDATE background_jobs SET status = 'running', locked_by = 'w',"
                     " lease_expires_at = now() + interval '1 minute'"
                     " WHERE id IN (SELECT id FROM background_jobs ORDER BY id LIMIT 3)")
        conn.execute("UPDATE background_jobs SET status = 'queued', completed_at = NULL"
                     " WHERE id IN (SELECT id FROM background_jobs ORDER BY id DESC LIMIT 3)")
        conn.execute("ANALYZE background_jobs")
    return pg_clean


@pytest.mark.parametrize("scoped", [False, True], ids=["plain", "scoped"])
@pytest.mark.parametrize("name", BY_ID)
def test_a_by_id_statement_reaches_its_jobs_by_the_primary_key_in_a_generic_plan(
    few_running: str, name: str, scoped: bool,
) -> None:
    text = (load_scoped_queries if scoped else load_queries)("postgres")[name]
    with psycopg.connect(few_running, autocommit=True) as conn:
        scans = _scans(_generic_plan(conn, text))
    assert scans, f"{name}: no scan of background_jobs found"
    assert all(index == "background_jobs_pkey" for _, index in scans), (name, scans)


@pytest.fixture
def never_analyzed(pg_scratch: str) -> str:
    """A database of its own whose background_jobs was never analyzed (autovacuum off for
    it): 2,500 waiting and 2,500 running jobs, and no statistics."""
    migrate_database(pg_scratch)
    with psycopg.connect(pg_scratch, autocommit=True) as conn:
        conn.execute("ALTER TABLE background_jobs SET (autovacuum_enabled = off)")
        conn.execute("INSERT INTO background_jobs (job_type, queue, max_attempts)"
                     " SELECT 'test:job', 'default', 25 FROM generate_series(1, 5000)")
        conn.execute("UPDATE background_jobs SET status = 'running', locked_by = 'w',"
                     " fence = 1, attempts = 1, locked_at = now(),"
                     " lease_expires_at = now() + interval '1 minute' WHERE id > 2500")
        row = conn.execute("SELECT reltuples FROM pg_class"
                           " WHERE oid = 'background_jobs'::regclass").fetchone()
        assert row is not None and row[0] < 0, "background_jobs has statistics"
    return pg_scratch


def _unbounded_scans(plan: dict[str, Any]) -> list[str]:
    """Scans of the target that may read more rows than the batch names: neither by the
    primary key nor filtered by the ids (``id = ANY(...)``)."""
    return [f"{scan['Node Type']} {scan.get('Filter', '')}" for scan in _target_scans(plan)
            if _index_of(scan) != "background_jobs_pkey"
            and "(id = ANY (" not in scan.get("Filter", "")]


def _row_by_row_joins(node: dict[str, Any], out: list[str]) -> list[str]:
    """Nested loops that test a join filter on every pair of rows while one side is an
    unbounded scan of the target (every row of the table times every id of the batch)."""
    if (node["Node Type"] == "Nested Loop" and "Join Filter" in node
            and _unbounded_scans(node)):
        out.append(node["Join Filter"])
    for child in node.get("Plans", []):
        _row_by_row_joins(child, out)
    return out


def _batch_args(name: str, ids: list[int]) -> dict[str, Any]:
    """Arguments of a batch of ``ids`` for each parameter a by-id statement takes."""
    n = len(ids)
    per_job = {"ids": ids, "owners": ["w"] * n, "fences": [1] * n,
               "statuses": ["completed"] * n, "delays": [0.0] * n, "refunds": [False] * n,
               "classes": [None] * n, "errors": [None] * n, "results": [None] * n}
    single = {"owner": "w", "lease_s": 30.0, "runnable_any": False,
              "runnable_types": ["test:job"], "runnable_prefixes": [], "queues": ["default"],
              "attempts_kept": 25, "scope_only": False, "scope_tenants": []}
    if name in per_job:
        return {name: per_job[name]}
    if name.startswith("r_"):  # finish_jobs_with_replies: no replies
        return {name: []}
    return {name: single[name]}


@pytest.mark.parametrize("scoped", [False, True], ids=["plain", "scoped"])
@pytest.mark.parametrize("name", BY_ID)
def test_a_by_id_statement_reaches_its_jobs_by_the_primary_key_without_statistics(
    never_analyzed: str, name: str, scoped: bool,
) -> None:
    text = (load_scoped_queries if scoped else load_queries)("postgres")[name]
    _, names = to_positional(text)
    # A batch of 100 of the waiting jobs (claims) or of the running ones (finishes, leases).
    first = 101 if name.startswith("claim") else 2601
    args: dict[str, Any] = {}
    for param in names:
        args.update(_batch_args(param, list(range(first, first + 100))))
    with psycopg.connect(never_analyzed, autocommit=True) as conn:
        # The plan of the first runs (custom: with the batch's values), then the generic one.
        row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) {}").format(sql.SQL(text)), args
                           ).fetchone()
        assert row is not None
        custom = _row_by_row_joins(row[0][0]["Plan"], [])
        if name.startswith("claim"):
            custom += _unbounded_scans(row[0][0]["Plan"])
        generic = _scans(_generic_plan(conn, text))
    assert generic, f"{name}: no scan of background_jobs found"
    assert all(index == "background_jobs_pkey" for _, index in generic), (name, generic)
    assert not custom, (name, custom)
