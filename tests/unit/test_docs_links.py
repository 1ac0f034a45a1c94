"""Every relative link in README.md and docs/*.md resolves: the file exists and, for a
``#anchor``, the target page has a heading with that GitHub slug. Guards moving sections
between the README and docs/ (issue "A house to live in"); also keeps the README short and
indexing every docs page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.daemon_process import REPO_ROOT

README_MAX_LINES = 300
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"`+[^`]*`+")
LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (``-`` and ``_`` kept),
    each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor; a repeated slug gets ``-1``, ``-2``… as on GitHub."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in _prose_lines(text):
        match = HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, root: Path) -> list[str]:
    """``line: target (why)`` for every relative link of ``page`` that does not resolve."""
    broken: list[str] = []
    for number, line in _prose_lines(page.read_text(encoding="utf-8")):
        for target in LINK.findall(CODE_SPAN.sub("", line)):
            if SCHEME.match(target):
                continue  # http(s), mailto: not checked here
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page.resolve()
            if not dest.is_relative_to(root.resolve()):
                broken.append(f"{number}: {target} (outside the repository)")
            elif not dest.exists():
                broken.append(f"{number}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(
                    dest.read_text(encoding="utf-8")):
                broken.append(f"{number}: {target} (no heading #{anchor})")
    return broken


def _pages() -> list[Path]:
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page, REPO_ROOT) == []


def test_the_pages_do_link_to_each_other() -> None:
    """The check above is not vacuous: the pages hold relative links and anchors."""
    links = [target for page in _pages()
             for _, line in _prose_lines(page.read_text(encoding="utf-8"))
             for target in LINK.findall(CODE_SPAN.sub("", line)) if not SCHEME.match(target)]
    assert len(links) >= 30, links
    assert any("#" in target for target in links), links


def test_a_broken_file_or_anchor_is_reported(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        "# Page A\n\n## Replies (outbox)\n\n## Live migration: `--scenario migrate`\n\n"
        "## Replies (outbox)\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Top\n\n"
        "[ok](docs/a.md) [ok](docs/a.md#replies-outbox) [ok](docs/a.md#replies-outbox-1)\n"
        "[ok](docs/a.md#live-migration---scenario-migrate) [ok](#top) [web](https://x.invalid/y)\n"
        "[gone](docs/b.md) [no anchor](docs/a.md#replies) [here](#nowhere)\n"
        "`[code span](docs/none.md)` [up](../outside.md)\n"
        "```\n[in a fence](docs/fenced.md)\n```\n", encoding="utf-8")
    assert broken_links(readme, tmp_path) == [
        "5: docs/b.md (no such file)",
        "5: docs/a.md#replies (no heading #replies)",
        "5: #nowhere (no heading #nowhere)",
        "6: ../outside.md (outside the repository)",
    ]


@pytest.mark.parametrize(("heading", "expected"), [
    ("Replies (outbox)", "replies-outbox"),
    ("Running several workers against PostgreSQL + Redis",
     "running-several-workers-against-postgresql--redis"),
    ("Live migration: `--scenario migrate`", "live-migration---scenario-migrate"),
    ("Backend migration (`daemon/migrate/`) and the routed store",
     "backend-migration-daemonmigrate-and-the-routed-store"),
    ("Per-tenant concurrency (`tenants.<id>.max_running`)", "per-tenant-concurrency-tenantsidmax_running"),
])
def test_slugs_follow_github(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_the_readme_fits_and_indexes_every_docs_page() -> None:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    linked = {target.partition("#")[0] for _, line in _prose_lines(text)
              for target in LINK.findall(line)}
    pages = {f"docs/{page.name}" for page in (REPO_ROOT / "docs").glob("*.md")}
    assert pages - linked == set()
