"""Modules and functions stay small enough to read: no module in daemon/ or admin/ over
400 lines, no function (or method, nested ones included) over 60 from its ``def`` line to
its last line. The one exception is the OpenAPI document, a literal that reads as data."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.daemon_process import REPO_ROOT

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
#: (module, function) pairs allowed past MAX_FUNCTION_LINES, each with its reason.
ALLOWED_LONG_FUNCTIONS = {
    ("admin/openapi.py", "openapi_document"),  # the OpenAPI literal: data, not logic
}
PACKAGES = ("daemon", "admin")


def oversized(name: str, source: str) -> list[str]:
    """What is over the limits in one module's ``source`` (``name``: its repo path)."""
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{name}: {lines} lines (limit {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(source, filename=name)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > MAX_FUNCTION_LINES and (name, node.name) not in ALLOWED_LONG_FUNCTIONS:
            found.append(f"{name}:{node.lineno} {node.name}: {length} lines "
                         f"(limit {MAX_FUNCTION_LINES})")
    return found


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (REPO_ROOT / package).rglob("*.py"))


def test_no_module_or_function_is_over_the_limits() -> None:
    modules = _modules()
    assert len(modules) > 100  # the walk found the packages
    found = [problem for path in modules
             for problem in oversized(path.relative_to(REPO_ROOT).as_posix(),
                                      path.read_text(encoding="utf-8"))]
    assert found == [], "split these:\n" + "\n".join(found)


def test_the_allowed_exception_still_exists() -> None:
    """An allow-list entry whose function is gone or short again is removed, not kept."""
    for name, function in ALLOWED_LONG_FUNCTIONS:
        tree = ast.parse((REPO_ROOT / name).read_text(encoding="utf-8"))
        lengths = [n.end_lineno - n.lineno + 1 for n in ast.walk(tree)
                   if isinstance(n, ast.FunctionDef) and n.name == function
                   and n.end_lineno is not None]
        assert lengths and max(lengths) > MAX_FUNCTION_LINES, (name, function)


def test_the_check_sees_a_long_module_and_a_long_function() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))  # def + 60 = 61
    long_function = f"async def handler() -> None:\n{body}"
    assert oversized("daemon/x.py", long_function) == [
        f"daemon/x.py:1 handler: {MAX_FUNCTION_LINES + 1} lines (limit {MAX_FUNCTION_LINES})"]
    just_fits = "def f() -> None:\n" + "".join(f"    x{i} = {i}\n"
                                               for i in range(MAX_FUNCTION_LINES - 1))
    assert oversized("daemon/x.py", just_fits) == []
    long_module = "".join(f"x{i} = {i}\n" for i in range(MAX_MODULE_LINES + 1))
    assert oversized("admin/y.py", long_module) == [
        f"admin/y.py: {MAX_MODULE_LINES + 1} lines (limit {MAX_MODULE_LINES})"]
    assert oversized("admin/y.py", long_module.split("\n", 1)[1]) == []
    # The allow-list names one function in one module, not that name everywhere.
    literal = f"def openapi_document() -> None:\n{body}"
    assert oversized("admin/openapi.py", literal) == []
    assert len(oversized("admin/api.py", literal)) == 1
