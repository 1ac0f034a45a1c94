"""errors.py draws the whole error tree: every GochatdError subclass anywhere in the package
appears in its docstring, under its real parent."""

from __future__ import annotations

import importlib
import pkgutil
import re

import gochatd
from gochatd import errors
from gochatd.errors import GochatdError


def _all_error_classes() -> set[type[GochatdError]]:
    for info in pkgutil.walk_packages(gochatd.__path__, "gochatd."):
        if ".bench" in info.name:
            continue
        importlib.import_module(info.name)
    found: set[type[GochatdError]] = set()
    todo: list[type[GochatdError]] = [GochatdError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub.__module__.startswith("gochatd") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def _drawn_parents() -> dict[str, str]:
    """Each name in the tree -> the name of the line it hangs from."""
    assert errors.__doc__ is not None
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in errors.__doc__.splitlines():
        match = re.match(r"^(\s*)(?:[│ ]*[├└]── )?([A-Z][A-Za-z]+)\s", line + " ")
        if not match or not re.search(r"[├└]── |^    GochatdError", line):
            continue
        depth = line.index(match.group(2))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[match.group(2)] = stack[-1][1]
        stack.append((depth, match.group(2)))
    return parents


def test_every_error_class_is_in_the_tree_under_its_parent() -> None:
    drawn = _drawn_parents()
    classes = _all_error_classes()
    assert len(classes) >= 15, sorted(c.__name__ for c in classes)
    for cls in classes:
        assert cls.__name__ in drawn, f"{cls.__module__}.{cls.__name__} is not drawn in errors.py"
        assert drawn[cls.__name__] == cls.__bases__[0].__name__, cls.__name__


def test_the_tree_names_no_class_that_does_not_exist() -> None:
    names = {cls.__name__ for cls in _all_error_classes()}
    assert set(_drawn_parents()) <= names
