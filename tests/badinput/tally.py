"""How many bad inputs each surface tried in this run; printed at the end by conftest.py."""

from __future__ import annotations

from collections import Counter

SURFACES: tuple[str, ...] = ("streams", "sql", "cli", "config", "http")

TRIED: Counter[str] = Counter()


def tried(surface: str, count: int = 1) -> None:
    assert surface in SURFACES, surface
    TRIED[surface] += count


def summary() -> str:
    total = sum(TRIED.values())
    parts = ", ".join(f"{surface} {TRIED[surface]}" for surface in SURFACES)
    return f"bad inputs tried: {total} ({parts})"
