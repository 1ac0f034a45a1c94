"""docs/frameworks.md shows the files of docs/recipes/ verbatim (the integration tests run
those files), so the page and the tested code cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_recipe_is_shown_verbatim() -> None:
    page = (DOCS / "frameworks.md").read_text(encoding="utf-8")
    shown = {
        name: code for name, code in re.findall(
            r"<!-- recipe: (recipes/[\w.]+) -->\n```python\n(.*?)```", page, re.S)
    }
    files = {f"recipes/{p.name}" for p in (DOCS / "recipes").glob("*.py")}
    assert set(shown) == files and files
    for name, code in shown.items():
        assert code == (DOCS / name).read_text(encoding="utf-8"), f"{name} differs from the page"
