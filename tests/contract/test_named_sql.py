"""Every named query is plain SQL: it runs as written, with only the driver's parameters.

Checked against real databases migrated to the latest schema: PostgreSQL must ``PREPARE``
each query (parsed, resolved and typed, not run) and SQLite must compile it (``EXPLAIN``).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import psycopg
import pytest
import trio
from benchmarks.bench.queries import bench_queries

from gochatd.store import open_store
from gochatd.store.queries import load_queries, load_scoped_queries

DIALECTS = ("postgres", "sqlite")
_PLACEHOLDER = re.compile(r"\{\w+\}")
_PG_PARAM = re.compile(r"%\((\w+)\)s")
_SQLITE_PARAM = re.compile(r"(?<!:):(\w+)")


def _code(sql: str) -> str:
    """The query without its comment lines (which may name placeholders in prose)."""
    return "\n".join(line for line in sql.splitlines() if not line.lstrip().startswith("--"))


def _all_queries(dialect: str) -> dict[str, str]:
    """Every query as a driver runs it: plain, scoped (markers expanded) and bench."""
    found = {f"{name} (plain)": sql for name, sql in load_queries(dialect).items()}
    found.update({f"{name} (scoped)": sql for name, sql in load_scoped_queries(dialect).items()})
    found.update({f"{name} (bench)": sql for name, sql in bench_queries(dialect).items()})
    return found


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_query_is_a_template(dialect: str) -> None:
    for name, sql in _all_queries(dialect).items():
        assert not _PLACEHOLDER.search(_code(sql)), f"{dialect} {name} has a placeholder"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_scoped_set_is_the_plain_set_plus_the_tenant_clause(dialect: str) -> None:
    plain = load_queries(dialect)
    scoped = load_scoped_queries(dialect)
    assert scoped, "the scoped set is empty"
    assert set(scoped) <= set(plain)
    for name, sql in plain.items():
        assert "scope_" not in sql, f"plain {name} takes the scope"
    for name, sql in scoped.items():
        assert "scope_only" in sql and "scope_tenants" in sql, f"scoped {name} has no scope"
        # The twin differs only by the clause: same parameters otherwise.
        params = _PG_PARAM if dialect == "postgres" else _SQLITE_PARAM
        extra = set(params.findall(_code(sql))) - set(params.findall(_code(plain[name])))
        assert extra == {"scope_only", "scope_tenants"}, (name, extra)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_bench_query_in_the_production_files(dialect: str) -> None:
    for file in ("queries.sql", "migrate.sql"):
        assert not [n for n in load_queries(dialect, file) if n.startswith("bench_")]


def _preparable(sql: str) -> bool:
    code = _code(sql).strip()
    return ";" not in code and code.split(None, 1)[0].upper() in _PREPARABLE


_PREPARABLE = {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH"}


def test_postgres_prepares_every_query(pg_migrated: str) -> None:
    with psycopg.connect(pg_migrated, autocommit=True) as conn:
        for i, (name, sql) in enumerate(sorted(_all_queries("postgres").items())):
            order: list[str] = []

            def number(match: re.Match[str], order: list[str] = order) -> str:
                if match.group(1) not in order:
                    order.append(match.group(1))
                return f"${order.index(match.group(1)) + 1}"

            text = _PG_PARAM.sub(number, sql)
            if not _preparable(text):
                assert name.endswith("(bench)"), f"{name} cannot be prepared"
                continue  # a bench script or VACUUM: not one preparable statement
            try:
                conn.execute(f"PREPARE gochatd_check_{i} AS {text}".encode())
            except psycopg.Error as exc:
                pytest.fail(f"{name}: {exc}")
        conn.execute("DEALLOCATE ALL")


def test_sqlite_compiles_every_query(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"

    async def migrate() -> None:
        store = open_store(f"sqlite:///{path}")
        await store.open()
        await store.migrate()
        await store.close()

    trio.run(migrate)
    conn = sqlite3.connect(path)
    try:
        for name, sql in sorted(_all_queries("sqlite").items()):
            if not _preparable(sql):
                assert name.endswith("(bench)"), f"{name} is not one statement"
                continue
            params = dict.fromkeys(_SQLITE_PARAM.findall(_code(sql)))
            try:
                conn.execute(f"EXPLAIN {sql}", params)
            except sqlite3.Error as exc:
                pytest.fail(f"{name}: {exc}")
    finally:
        conn.close()
