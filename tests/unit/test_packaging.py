"""``pip install .`` (the README's first command) ships every subpackage of daemon/: a folder
with an ``__init__.py`` that pyproject.toml does not list would be left out of the wheel."""

from __future__ import annotations

import tomllib

from tests.support.daemon_process import REPO_ROOT


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    folders = {
        "gochatd." + ".".join(path.parent.relative_to(REPO_ROOT / "daemon").parts)
        for path in (REPO_ROOT / "daemon").rglob("__init__.py")
        if path.parent != REPO_ROOT / "daemon"
    }
    assert folders, "no subpackages found: the walk is wrong"
    assert folders - listed == set()
