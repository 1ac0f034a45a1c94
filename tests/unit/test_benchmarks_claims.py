"""What the README and docs/bench.md say about the published peers run agrees with the run
docs/benchmarks.md reports (a generated page: its header lists the systems it compared)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10}


def published_peers() -> set[str]:
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    match = re.search(r"\(order: ([^)]+)\)", text)
    assert match is not None, "docs/benchmarks.md names the systems it compared"
    systems = {s.strip() for s in match.group(1).split(",")}
    return {s for s in systems if not s.startswith("gochatd")}


def test_the_readme_names_the_peers_of_the_published_run() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    [row] = [line for line in readme.splitlines() if line.startswith("| [docs/benchmarks.md]")]
    peers = published_peers()
    assert peers and all(peer in row for peer in peers), row
    before_colon = row.split("|")[2].split(":")[0]
    for word, n in NUMBERS.items():  # "beside nine other queues" must count this run's
        if re.search(rf"\b{word}\b", before_colon):
            assert n == len(peers), row


def test_bench_md_counts_the_published_run_right() -> None:
    text = (ROOT / "docs" / "bench.md").read_text(encoding="utf-8")
    section = text[text.index("## Beside the peers"):]
    section = section[: section.index("\n## ", 3)]
    for peer in published_peers():
        assert peer in section
    assert "published run" in section
