"""One name per operation: docs/architecture.md's "Names" table against the code, and every
exported counter named as its metric."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gochatd.obs.metrics import EXPORTED_COUNTERS
from gochatd.store.base import JobStore

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*sorted((ROOT / "daemon").rglob("*.py")), *sorted((ROOT / "admin").rglob("*.py"))]
QUERY_FILES = [ROOT / "sql" / backend / "queries.sql" for backend in ("postgres", "sqlite")]
#: Names the code no longer uses for these operations.
RETIRED = ("reaped_leases", "stale_rejections", "finish_rejected_stale", "stale_fence_rejections",
           "retry_job", "retry_dead_jobs", "scheduled_dispatches", "malformed_entries",
           "reclaimed_entries", "stream_entry_malformed", "outbox_reaped")


def names_table() -> list[list[str]]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## Names\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    assert len(rows) >= 10, section
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def ticked(cell: str) -> list[str]:
    """Backticked names in a cell, without a ``{label}`` suffix."""
    return [name.split("{")[0] for name in re.findall(r"`([^`]+)`", cell)]


def code_strings() -> set[str]:
    found: set[str] = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.add(node.value)
    return found


def counted() -> set[str]:
    """Every literal counter name passed to ``inc`` (both arms of a conditional)."""
    found: set[str] = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "inc" and node.args):
                arg = node.args[0]
                arms = [arg.body, arg.orelse] if isinstance(arg, ast.IfExp) else [arg]
                found |= {a.value for a in arms
                          if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return found


def test_every_exported_counter_is_named_as_its_metric_and_counted() -> None:
    incremented = counted()
    for key, (metric, _help) in EXPORTED_COUNTERS.items():
        assert metric == f"gochatd_{key}", (key, metric)
        assert key in incremented, f"/metrics exports {key!r} but nothing counts it"


def test_the_names_table_matches_the_sql_the_store_and_the_code() -> None:
    queries = [set(re.findall(r"^-- name: (\w+)", path.read_text(encoding="utf-8"), re.M))
               for path in QUERY_FILES if path.name == "queries.sql"]
    strings, incremented = code_strings(), counted()
    exported = {f"gochatd_{key}_total" for key in EXPORTED_COUNTERS}
    for operation, sql, events, counters, metrics in names_table():
        for name in ticked(sql):
            assert all(name in q for q in queries), f"{operation}: no query named {name}"
            assert hasattr(JobStore, name), f"{operation}: JobStore has no {name}"
        for event in ticked(events):
            assert event in strings, f"{operation}: nothing logs {event!r}"
        for counter in ticked(counters):
            assert "<" in counter or counter in incremented, f"{operation}: {counter!r}"
        for metric in ticked(metrics):
            assert metric in exported or metric.removesuffix("_total") in strings, metric


def test_retired_names_are_gone_from_the_code_and_the_sql() -> None:
    texts = {path: path.read_text(encoding="utf-8") for path in [*SOURCES, *QUERY_FILES]}
    for old in RETIRED:
        users = [str(p.relative_to(ROOT)) for p, text in texts.items()
                 if re.search(rf"\b{old}\b", text)]
        assert users == [], f"{old} is still used in {users}"
