"""Per-scenario results, the table printed at the end and the JSON report."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ScenarioResult:
    name: str
    summary: str
    ok: bool = False
    violations: list[str] = field(default_factory=list)
    jobs: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    lost: int | None = None
    stale_commits_accepted: int | None = None
    stale_finishes: int = 0
    duplicate_executions: int | None = None
    duplicate_reasons: dict[str, int] = field(default_factory=dict)
    overlapping_executions: int | None = None
    fence_gaps: dict[str, int] = field(default_factory=dict)
    leases_reaped: int = 0
    recovery_s: float | None = None
    recovery_mean_s: float | None = None
    stranded_jobs: int = 0
    stranded_rerun_max_s: float | None = None
    stranded_reaped_max_s: float | None = None
    max_claim_latency_after_s: float | None = None
    p50_claim_latency_after_s: float | None = None
    p99_claim_latency_after_s: float | None = None
    limits: dict[str, Any] = field(default_factory=dict)
    #: Batches, callbacks and chains of the load, and the "callbacks exactly once" verdict.
    workflows: dict[str, Any] = field(default_factory=dict)
    maintenance: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    daemon_exit_codes: dict[str, int | None] = field(default_factory=dict)
    unexpected_exits: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    error: str | None = None
    timing: dict[str, Any] = field(default_factory=dict)


COLUMNS: list[tuple[str, str]] = [
    ("scenario", "name"),
    ("ok", "ok"),
    ("jobs", "jobs"),
    ("faults", "faults"),
    ("lost", "lost"),
    ("stale acc", "stale_commits_accepted"),
    ("stale rej", "stale_finishes"),
    ("dup exec", "duplicate_executions"),
    ("overlap", "overlapping_executions"),
    ("reaped", "leases_reaped"),
    ("batches", "workflows.batches"),
    ("cb runs", "workflows.callback_runs"),
    ("cb viol", "workflows.violations"),
    ("recovery s", "recovery_s"),
    ("reap s", "stranded_reaped_max_s"),
    ("rerun s", "stranded_rerun_max_s"),
    ("max claim s", "max_claim_latency_after_s"),
    ("time s", "duration_s"),
]


def _cell(result: ScenarioResult, attr: str) -> str:
    if "." in attr:  # a figure of a dict field
        name, key = attr.split(".", 1)
        value = getattr(result, name).get(key)
        return "-" if value is None else str(value)
    value = getattr(result, attr)
    if attr == "ok":
        return "yes" if value else "NO"
    if attr == "faults":
        return str(sum(value.values())) if value else "0"
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}" if attr != "duration_s" else f"{value:.1f}"
    return str(value)


def table(results: list[ScenarioResult]) -> str:
    rows = [[title for title, _ in COLUMNS]]
    rows += [[_cell(r, attr) for _, attr in COLUMNS] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = []
    for n, row in enumerate(rows):
        cells = zip(row, widths, strict=True)
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def details(results: list[ScenarioResult]) -> str:
    """Fault kinds, why jobs ran more than once, and every violation."""
    lines = []
    for r in results:
        faults = ", ".join(f"{k} x{v}" for k, v in r.faults.items()) or "none"
        lines.append(f"{r.name}: faults {faults}")
        if r.duplicate_reasons:
            why = "; ".join(f"{k}: {v}" for k, v in sorted(r.duplicate_reasons.items()))
            lines.append(f"  repeated executions: {why}")
        if r.fence_gaps:
            lines.append(f"  fences without execution: {r.fence_gaps}")
        if r.workflows.get("batches") or r.workflows.get("chains"):
            lines.append(f"  workflows: {_workflows(r.workflows)}")
        if r.notes:
            lines.append(f"  notes: {json.dumps(r.notes, sort_keys=True)}")
        for v in r.violations:
            lines.append(f"  VIOLATION: {v}")
    return "\n".join(lines)


def _workflows(w: dict[str, Any]) -> str:
    """One line: batches, callbacks, their runs and why some ran again, chains."""
    why = "; ".join(f"{k}: {v}" for k, v in sorted(w.get("callback_repeats_why", {}).items()))
    return (f"{w['batches']} batches ({w.get('batches_with_failing_member', 0)} with a member "
            f"failing), {w.get('callbacks', 0)} callbacks: {w.get('callbacks_released', 0)} "
            f"released, {w.get('callbacks_completed', 0)} completed, "
            f"{w.get('on_success_cancelled', 0)} on_success cancelled; "
            f"{w.get('callback_runs', 0)} callback runs, {w.get('callback_runs_repeated', 0)} "
            f"repeated{f' ({why})' if why else ''}; {w['chains']} chains "
            f"({w.get('chain_link_runs', 0)} link runs); {w['violations']} violations")


def write_json(path: str, run: dict[str, Any], results: list[ScenarioResult]) -> None:
    doc = {
        "run": run,
        "ok": all(r.ok for r in results),
        "scenarios": [asdict(r) for r in results],
    }
    Path(path).write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n", encoding="utf-8")
