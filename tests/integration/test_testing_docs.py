"""docs/testing.md's pytest example, run as written: its block is copied to a file and pytest
runs it in a fresh process (its handler registers in that process's global registry)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def example_block() -> str:
    text = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    section = text.split("\n## A pytest example\n", 1)[1]
    block = section.split("```python\n", 1)[1].split("\n```\n", 1)[0]
    assert block.startswith("# test_invoices.py\n"), block[:40]
    return block + "\n"


def test_the_docs_pytest_example_passes(tmp_path: Path) -> None:
    (tmp_path / "test_invoices.py").write_text(example_block(), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\ntrio_mode = true\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error",
         "test_invoices.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4 passed" in done.stdout, done.stdout[-2000:]
