"""Each query is written once, with a marker where the tenant scope goes (docs/schema.md,
"The scoped set"); the loader drops the markers for the plain set and expands them for the
scoped one. Proof that this is the same SQL as the hand-written twins it replaced: the frozen
files in data/queries_before_scope_markers/ (main at b2ff0c6).

Compared texts are normalised: full-line ``--`` comments dropped and runs of whitespace made
one space (the expansion lays a clause out on one or two lines where a hand-written twin
wrapped it elsewhere, and one twin, ``waiting_job_types``, had lost its plain query's comment).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gochatd.store.queries import (
    load_queries,
    load_scoped_queries,
    parse_queries,
    plain_sql,
    scoped_sql,
)

DIALECTS = ("postgres", "sqlite")
BEFORE = Path(__file__).parent / "data" / "queries_before_scope_markers"


def normalised(sql: str) -> str:
    code = (line for line in sql.splitlines() if not line.lstrip().startswith("--"))
    return " ".join(" ".join(code).split())


def frozen(dialect: str, filename: str) -> dict[str, str]:
    return parse_queries((BEFORE / dialect / filename).read_text("utf-8"))


@pytest.mark.parametrize("dialect", DIALECTS)
def test_unchanged_queries_expand_to_their_frozen_scoped_twins(dialect: str) -> None:
    before_plain, before_scoped = frozen(dialect, "queries.sql"), frozen(dialect, "queries_scoped.sql")
    plain, scoped = load_queries(dialect), load_scoped_queries(dialect)
    unchanged = [name for name, sql in plain.items() if before_plain.get(name) == sql]
    assert len(unchanged) >= len(before_plain) // 2, "too few queries left to prove anything"
    for name in unchanged:
        if name in before_scoped:
            assert name in scoped, f"{name} lost its scope marker"
            assert normalised(scoped[name]) == normalised(before_scoped[name]), name
        else:
            assert name not in scoped, f"{name} gained a scope it never had"


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_scoped_set_is_the_plain_set_with_markers_expanded(dialect: str) -> None:
    plain, scoped = load_queries(dialect), load_scoped_queries(dialect)
    assert scoped and set(scoped) <= set(plain)
    for name, sql in plain.items():
        assert "/*" not in sql and "scope_" not in sql, f"plain {name} keeps a marker or the scope"
    for name, sql in scoped.items():
        assert "/*" not in sql, f"scoped {name} keeps a marker"
        assert "scope_only" in sql and "scope_tenants" in sql, f"scoped {name} has no scope"


@pytest.mark.parametrize(("marked", "plain", "scoped"), [
    ("SELECT 1 FROM t WHERE a = 1 /* AND scope */", "SELECT 1 FROM t WHERE a = 1",
     "SELECT 1 FROM t WHERE a = 1 AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants)))"
     " = :scope_only)"),
    ("SELECT 1 FROM t /* WHERE scope */ GROUP BY a", "SELECT 1 FROM t GROUP BY a",
     "SELECT 1 FROM t WHERE ((tenant_id IN (SELECT value FROM json_each(:scope_tenants)))"
     " = :scope_only) GROUP BY a"),
    ("SELECT 1 FROM t AS j\nWHERE a = 1\n  /* AND scope(j) */\nORDER BY a",
     "SELECT 1 FROM t AS j\nWHERE a = 1\nORDER BY a",
     "SELECT 1 FROM t AS j\nWHERE a = 1\n  AND ((j.tenant_id IN (SELECT value FROM"
     " json_each(:scope_tenants))) = :scope_only)\nORDER BY a"),
    ("UPDATE t SET a = 1 /* next_change */\nWHERE b = 2\n  /* AND scope */",
     "UPDATE t SET a = 1\nWHERE b = 2",
     "UPDATE t SET a = 1, change_seq = (SELECT value + 1 FROM gochatd_change_counter WHERE id = 1)"
     "\nWHERE b = 2\n  AND ((tenant_id IN (SELECT value FROM json_each(:scope_tenants))) = :scope_only)"),
])
def test_each_marker_form(marked: str, plain: str, scoped: str) -> None:
    assert plain_sql(marked) == plain
    assert scoped_sql(marked, "sqlite") == scoped


def test_postgres_lays_an_own_line_clause_out_on_two_lines() -> None:
    assert scoped_sql("SELECT 1 FROM t\nWHERE a = 1\n    /* AND scope */", "postgres") == (
        "SELECT 1 FROM t\nWHERE a = 1\n"
        "    AND (CASE WHEN %(scope_only)s::bool THEN tenant_id = ANY(%(scope_tenants)s::text[])\n"
        "          ELSE tenant_id <> ALL(%(scope_tenants)s::text[]) END)")
    with pytest.raises(ValueError, match="next_change"):
        scoped_sql("UPDATE t SET a = 1 /* next_change */ WHERE b = 2 /* AND scope */", "postgres")
