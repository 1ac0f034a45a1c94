"""Without opentelemetry the job's path pays one None check (docs/otel.md): every hook
outside daemon/obs/ is ``spans = otel.SPANS`` followed by a test of ``spans`` against None,
and only daemon/obs/ imports opentelemetry (tests/integration/test_otel_absent.py runs a
process without it)."""

from __future__ import annotations

import ast
from pathlib import Path

DAEMON = Path(__file__).resolve().parents[2] / "daemon"

def _hooks() -> dict[str, list[ast.stmt]]:
    """Each ``otel.SPANS`` read outside daemon/obs/, with its function's statements from
    that read on."""
    found: dict[str, list[ast.stmt]] = {}
    for path in sorted(DAEMON.rglob("*.py")):
        if "obs" in path.relative_to(DAEMON).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for index, stmt in enumerate(func.body):  # a hook is a statement of its function
                if any(isinstance(n, ast.Attribute) and n.attr == "SPANS" for n in ast.walk(stmt)):
                    found[f"{path.stem}:{func.name}"] = func.body[index:]  # folders may move
    return found


def _tests_spans_against_none(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Compare) and isinstance(n.left, ast.Name) and n.left.id == "spans"
               and isinstance(n.ops[0], ast.Is | ast.IsNot)
               and isinstance(n.comparators[0], ast.Constant) and n.comparators[0].value is None
               for n in ast.walk(node))


def test_every_hook_is_one_read_and_a_none_check() -> None:
    hooks = _hooks()
    assert sorted(hooks) == [
        "client:enqueue", "client:enqueue_many", "http_handlers:call", "runner:execute",
        "sender:deliver_one", "sync_client:enqueue", "sync_client:enqueue_many", "webhook:deliver",
        "workflows:traced_async", "workflows:traced_sync",
    ]
    for where, (read, test, *_rest) in hooks.items():
        # spans = otel.SPANS
        assert isinstance(read, ast.Assign) and ast.unparse(read) == "spans = otel.SPANS", where
        # then: if spans is None / is not None (or x = a if spans is None else b)
        condition = test.test if isinstance(test, ast.If) else getattr(test, "value", None)
        if isinstance(condition, ast.IfExp):
            condition = condition.test
        assert condition is not None and _tests_spans_against_none(condition), where
        assert ast.unparse(condition) in ("spans is None", "spans is not None"), where


def test_only_daemon_obs_imports_opentelemetry() -> None:
    for path in sorted(DAEMON.rglob("*.py")):
        if "obs" in path.relative_to(DAEMON).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.startswith(("opentelemetry", "gochatd.obs.otel_")) for n in names), path
