"""What PostgreSQL reads for a named statement: the plan tests' shared parts
(tests/integration/test_*_plans.py, test_*_under_snapshot.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import psycopg


def positional(text: str) -> tuple[str, list[str]]:
    """``text`` with its ``%(name)s`` parameters as ``$1, $2, ...`` (for PREPARE), and the
    names in that order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, text), names


def held_snapshot(url: str) -> Iterator[psycopg.Connection[Any]]:
    """A REPEATABLE READ snapshot held open (a fixture's body): no dead version newer than
    it can go."""
    conn = psycopg.connect(url, autocommit=True)  # the BEGIN below is the transaction
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    conn.execute("SELECT count(*) FROM background_jobs").fetchone()
    try:
        yield conn
    finally:
        conn.close()


def index_entries_returned(conn: psycopg.Connection[Any]) -> int:
    """Index entries of ``background_jobs`` this transaction has read so far (dead ones
    included: an index hands them out before the heap says they are dead)."""
    row = conn.execute(
        "SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) FROM pg_index"
        " WHERE indrelid = 'background_jobs'::regclass").fetchone()
    assert row is not None
    return int(row[0] or 0)
