"""``--budget-md FILE``: the budget's tables as a section of docs/benchmarks.md, between
markers that ``python -m benchmarks.peers`` keeps when it rebuilds the rest of the page."""

from __future__ import annotations

from pathlib import Path

from benchmarks.peers.report import BUDGET_END, BUDGET_START

_BEFORE = "## How to reproduce"


def section(table: str, meta: dict[str, str]) -> str:
    return "\n".join([
        BUDGET_START,
        "## The cost budget per job (issue 22)",
        "",
        f"Written by `{meta['command']}` on {meta['date']} ({meta['wall']}); load average "
        f"(1/5/15 min) {meta['load_start']} at the start, {meta['load_end']} at the end. "
        "Measurement only: each later change cites the line it moves, before and after. "
        "Counts (statements, transactions, commands, hops) do not depend on the machine's "
        "other load; CPU, rates and latencies do. "
        "How every line is taken: [bench.md](bench.md#the-cost-budget---scenario-budget).",
        "",
        "```text",
        table,
        "```",
        BUDGET_END,
    ])


def write(path: str, block: str) -> None:
    """Replace the budget's section of ``path``, or add it before "How to reproduce"."""
    file = Path(path)
    text = file.read_text(encoding="utf-8") if file.exists() else ""
    start, end = text.find(BUDGET_START), text.find(BUDGET_END)
    if 0 <= start < end:
        text = text[:start] + block + text[end + len(BUDGET_END):]
    elif (at := text.find(_BEFORE)) >= 0:
        text = text[:at] + block + "\n\n" + text[at:]
    else:
        text = text + ("\n" if text and not text.endswith("\n") else "") + block + "\n"
    file.write_text(text, encoding="utf-8")
