"""Statements that name their jobs by id reach them by the primary key, whatever the
statistics say (docs/chaos.md, active_readers).

psycopg prepares a statement run five times, and PostgreSQL may then keep one generic plan
for it. With few running (or waiting) jobs in the statistics, that plan read
``background_jobs_status_idx`` for ``status = 'running'`` and hash-joined the ids to it.
That index also holds an entry for every dead version of every job that ever ran. Under a
snapshot held elsewhere, none can go, so each finish and each lease extension of a full
run read ~1,500 blocks instead of ~20 (auto_explain). The statements now write the status
test in a form no index answers (``IS NOT DISTINCT FROM``), so the primary key is the only
way in."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from gochatd.store.queries import load_queries, load_scoped_queries
from tests.support.pg_plans import positional as to_positional

#: The statements that name their rows by id in an array (and the plain and scoped text of
#: each).
BY_ID = ("claim_jobs", "claim_delivered_jobs", "finish_jobs", "finish_jobs_with_replies",
         "extend_leases")


def _scans(node: dict[str, Any], out: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """(node type, index) of every scan of ``background_jobs`` as the statement's target."""
    if (node.get("Relation Name") == "background_jobs" and node.get("Alias") == "j"
            and "Scan" in node["Node Type"]):
        out.append((node["Node Type"], node.get("Index Name")))
    for child in node.get("Plans", []):
        _scans(child, out)
    return out


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
    positional, names = to_positional(text)
    with psycopg.connect(few_running, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(sql.SQL("PREPARE by_id AS {}").format(sql.SQL(positional)))
        # Any arguments: a generic plan does not look at them.
        args = sql.SQL(", ").join(sql.Literal(None) for _ in names)
        row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) EXECUTE by_id({})").format(args)
                           ).fetchone()
    assert row is not None
    scans = _scans(row[0][0]["Plan"], [])
    assert scans, f"{name}: no scan of background_jobs found"
    assert all(index == "background_jobs_pkey" for _, index in scans), (name, scans)
