"""The cost budget's section of docs/benchmarks.md: ``gochatd bench --scenario budget
--budget-md`` writes it between its markers, and ``python -m benchmarks.peers``, which
rebuilds the rest of that page, keeps it as it is."""

from __future__ import annotations

from pathlib import Path

from benchmarks.bench import budget_md
from benchmarks.peers.cli import budget_block
from benchmarks.peers.report import BUDGET_END, BUDGET_START

META = {"command": "gochatd bench --scenario budget", "date": "2026-12-06 12:00 UTC",
        "wall": "200 s", "load_start": "1.00 / 1.00 / 1.00", "load_end": "2.00 / 2.00 / 2.00"}


def test_the_section_goes_before_how_to_reproduce_then_is_replaced(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\n## Results\n\nrows\n\n## How to reproduce\n\nsteps\n")
    budget_md.write(str(page), budget_md.section("TABLE ONE", META))
    text = page.read_text()
    assert text.index("## Results") < text.index(BUDGET_START) < text.index("TABLE ONE")
    assert text.index(BUDGET_END) < text.index("## How to reproduce")
    assert "load average (1/5/15 min) 1.00 / 1.00 / 1.00 at the start" in text

    budget_md.write(str(page), budget_md.section("TABLE TWO", META))
    text = page.read_text()
    assert "TABLE ONE" not in text and text.count(BUDGET_START) == 1
    assert text.endswith("## How to reproduce\n\nsteps\n")
    # What the peers harness carries over when it writes the page again.
    kept = budget_block(text)
    assert kept.startswith(BUDGET_START) and kept.endswith(BUDGET_END) and "TABLE TWO" in kept
    assert budget_block("# a page without the section\n") == ""


def test_a_page_without_the_heading_gets_the_section_at_the_end(tmp_path: Path) -> None:
    page = tmp_path / "new.md"
    budget_md.write(str(page), budget_md.section("TABLE", META))
    assert page.read_text().startswith(BUDGET_START)
    assert page.read_text().endswith(BUDGET_END + "\n")
