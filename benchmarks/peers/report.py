"""Medians across reps, ratios vs gochatd, and the Markdown report (``docs/benchmarks.md``)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.peers.systems import BASELINE


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    digits: int
    #: True when bigger is better (throughput); False for latencies
    higher_is_better: bool = True


HEADLINE = [
    Metric("enqueue_jobs_s", "enqueue jobs/s (1 per call, sequential)", 0),
    Metric("drain_jobs_s", "drain jobs/s (first→last)", 0),
    Metric("drain_incl_start_jobs_s", "drain jobs/s (incl. start-up)", 0),
    Metric("e2e_jobs_s", "end-to-end jobs/s (8 producers)", 0),
    Metric("e2e1_jobs_s", "end-to-end jobs/s (1 producer)", 0),
    Metric("lat_p50_ms", "idle p50 ms", 1, higher_is_better=False),
    Metric("lat_p95_ms", "idle p95 ms", 1, higher_is_better=False),
    Metric("lat_p99_ms", "idle p99 ms", 1, higher_is_better=False),
    Metric("worker_cpu_us_per_job", "worker CPU us/job", 0, higher_is_better=False),
    Metric("drain_cpu_us_per_job", "worker CPU us/job, drain", 0, higher_is_better=False),
    Metric("lat_cpu_us_per_job", "worker CPU us/job, idle trickle", 0,
           higher_is_better=False),
]


@dataclass(frozen=True)
class RunInfo:
    command: str
    started: str
    wall_s: float
    n: int
    reps: int
    lat_n: int
    lat_spacing_ms: float
    json_path: str
    run_dir: str
    order: list[str]
    #: the 1/5/15-minute load averages when the run started: a busy machine shows here
    load_at_start: str = ""
    #: --note: what the reader should know about this run (a busy machine, a patched peer)
    note: str = ""


#: Rows of the issues' targets that ``gochatd bench`` measures, not this run: the page only
#: points at them (the same paragraph every time it is generated).
TOPOLOGIES = [
    "Production topologies are measured by `gochatd bench`, each against the direct setup "
    "in the same run: PgBouncer in transaction mode, drain and end to end within 15 % of a "
    "direct connection (`gochatd bench --pgbouncer`): [bench.md](bench.md#pgbouncer); a "
    "3-master Redis Cluster, drain and end to end within 15 % of a single Redis "
    "(`gochatd bench --backend postgres+redis,postgres+redis-cluster`): "
    "[bench.md](bench.md#redis-cluster).",
    "",
]

#: The cost budget's section of benchmarks.md, written by ``gochatd bench --scenario budget
#: --budget-md`` (benchmarks/bench/budget_md.py) and kept as it is when this page is rebuilt.
BUDGET_START = "<!-- budget:start: written by gochatd bench --scenario budget --budget-md -->"
BUDGET_END = "<!-- budget:end -->"


def median_of(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def summarise(rows: list[dict[str, Any]], order: list[str]) -> dict[str, dict[str, float | None]]:
    by_system = {name: [r for r in rows if r["system"] == name] for name in order}
    keys = [m.key for m in HEADLINE] + ["e2e_producer_jobs_s", "e2e_lat_p50_ms", "e2e_lat_p99_ms",
                                        "worker_first_job_s"]
    return {name: {k: median_of(rs, k) for k in keys} for name, rs in by_system.items() if rs}


def _fmt(value: float | None, digits: int) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cells) + " |" for cells in body]
    return [*out, ""]


def _main_table(rows: list[dict[str, Any]], medians: dict[str, dict[str, float | None]],
                infos: dict[str, dict[str, str]]) -> list[str]:
    body = []
    for name, med in medians.items():
        reps = [r for r in rows if r["system"] == name]
        label = f"**{name}**" if name.startswith("gochatd") else name
        cells = [label, infos.get(name, {}).get("version", "?"), str(reps[0]["n"])]
        for m in HEADLINE:
            per_rep = " / ".join(_fmt(r.get(m.key), m.digits) for r in reps)
            cells.append(f"{_fmt(med[m.key], m.digits)} ({per_rep})" if len(reps) > 1 else per_rep)
        dups = sum(r.get(f"duplicates_phase{p}", 0) for r in reps for p in (1, 2, 3, 4))
        cells.append(str(dups))
        errors = "; ".join(f"rep {r['rep']}: {r['error']}" for r in reps if r.get("error"))
        cells.append(errors or "-")
        body.append(cells)
    header = ["system", "version", "N", *[m.title for m in HEADLINE], "duplicates", "errors"]
    return _table(header, body)


def _ratio_table(medians: dict[str, dict[str, float | None]]) -> list[str]:
    base = medians.get(BASELINE)
    if base is None:
        return [f"(no `{BASELINE}` row in this run, so no ratios)", ""]
    metrics = [m for m in HEADLINE if m.key != "lat_p95_ms"]
    body = []
    for name, med in medians.items():
        if name == BASELINE:
            continue
        cells = [name]
        for m in metrics:
            ours, theirs = base[m.key], med[m.key]
            if not ours or not theirs:
                cells.append("-")
            else:
                # Oriented so that > 1 always means gochatd is better on this figure.
                cells.append(f"{(ours / theirs if m.higher_is_better else theirs / ours):.2f}x")
        body.append(cells)
    return _table(["system", *[m.title for m in metrics]], body)


def _targets(medians: dict[str, dict[str, float | None]]) -> list[str]:
    """The rows of the performance issues' target tables (5, 11 and 12) that this comparison
    measures."""
    def get(system: str, key: str) -> float | None:
        return medians.get(system, {}).get(key)

    def best_peer(key: str) -> tuple[str, float] | None:
        peers = [(n, v[key]) for n, v in medians.items() if not n.startswith("gochatd") and v[key]]
        return max(peers, key=lambda p: p[1]) if peers else None  # type: ignore[return-value,arg-type]

    checks: list[tuple[str, str, Callable[[], tuple[str, bool] | None]]] = []

    def at_least(system: str, key: str, floor: float, unit: str = "jobs/s") -> Callable[[], Any]:
        def check() -> tuple[str, bool] | None:
            v = get(system, key)
            return None if v is None else (f"{v:,.0f} {unit}", v >= floor)
        return check

    def at_most(system: str, key: str, ceiling: float) -> Callable[[], Any]:
        def check() -> tuple[str, bool] | None:
            v = get(system, key)
            return None if v is None else (f"{v:.2f} ms", v <= ceiling)
        return check

    def at_most_us(system: str, key: str, ceiling: float) -> Callable[[], Any]:
        def check() -> tuple[str, bool] | None:
            v = get(system, key)
            return None if v is None else (f"{v:,.0f} us", v <= ceiling)
        return check

    def vs_peer(key: str, factor: float, peer: str | None = None,
                ours_system: str = BASELINE) -> Callable[[], Any]:
        def check() -> tuple[str, bool] | None:
            ours = get(ours_system, key)
            found = (peer, get(peer, key)) if peer else best_peer(key)
            if ours is None or found is None or not found[1]:
                return None
            ratio = ours / found[1]
            return f"{ratio:.2f}x {found[0]} ({found[1]:,.0f})", ratio >= factor
        return check

    checks += [
        ("drain (first→last)", "≥ 20,000 jobs/s", at_least(BASELINE, "drain_jobs_s", 20_000)),
        ("drain vs pgqueuer", "≥ 1.2x", vs_peer("drain_jobs_s", 1.2, "pgqueuer")),
        ("end-to-end, 8 producers", "≥ 5,000 jobs/s", at_least(BASELINE, "e2e_jobs_s", 5_000)),
        ("end-to-end, 8 producers vs best peer", "≥ 1.3x", vs_peer("e2e_jobs_s", 1.3)),
        ("end-to-end, 1 producer vs taskiq", "≥ 1x", vs_peer("e2e1_jobs_s", 1.0, "taskiq")),
        ("enqueue, one per call", "≥ 2,500 jobs/s", at_least(BASELINE, "enqueue_jobs_s", 2_500)),
        ("enqueue, one per call vs pgqueuer", "≥ 1.2x",
         vs_peer("enqueue_jobs_s", 1.2, "pgqueuer")),
        ("enqueue, one per call vs taskiq", "≥ 1x", vs_peer("enqueue_jobs_s", 1.0, "taskiq")),
        ("SyncClient enqueue, one per call (gochatd-sync)", "≥ 2,500 jobs/s",
         at_least("gochatd-sync", "enqueue_jobs_s", 2_500)),
        ("SyncClient enqueue, one per call vs pgqueuer", "≥ 1x",
         vs_peer("enqueue_jobs_s", 1.0, "pgqueuer", "gochatd-sync")),
        ("idle latency p50", "≤ 1.5 ms", at_most(BASELINE, "lat_p50_ms", 1.5)),
        ("worker CPU per job, trickle (idle phase)", "≤ 150 us",
         at_most_us(BASELINE, "lat_cpu_us_per_job", 150.0)),
        ("worker CPU per job, drain", "≤ 60 us",
         at_most_us(BASELINE, "drain_cpu_us_per_job", 60.0)),
        ("idle latency p99", "≤ 3 ms", at_most(BASELINE, "lat_p99_ms", 3.0)),
        ("SQLite drain", "≥ 4,000 jobs/s", at_least("gochatd-sqlite", "drain_jobs_s", 4_000)),
        ("SQLite end-to-end", "≥ 3,000 jobs/s", at_least("gochatd-sqlite", "e2e_jobs_s", 3_000)),
        ("PG polling end-to-end", "≥ 3,000 jobs/s", at_least("gochatd-polling", "e2e_jobs_s", 3_000)),
        ("PG polling idle p99", "≤ 20 ms", at_most("gochatd-polling", "lat_p99_ms", 20.0)),
    ]
    body = []
    for figure, target, check in checks:
        result = check()
        if result is None:
            body.append([figure, target, "not measured in this run", "-"])
        else:
            body.append([figure, target, result[0], "met" if result[1] else "**missed**"])
    return _table(["figure (gochatd, medians)", "target", "measured", ""], body)


def _extra_table(rows: list[dict[str, Any]]) -> list[str]:
    body = []
    for r in rows:
        body.append([
            r["system"], str(r["rep"]), _fmt(r.get("worker_first_job_s"), 2),
            _fmt(r.get("e2e_producer_jobs_s"), 0),
            f"{_fmt(r.get('e2e_lat_p50_ms'), 0)} / {_fmt(r.get('e2e_lat_p99_ms'), 0)}",
            f"{_fmt(r.get('lat_mean_ms'), 1)} / {_fmt(r.get('lat_max_ms'), 1)}",
            _fmt(r.get("lat_spacing_ms"), 1),
            "/".join(str(r.get(f"duplicates_phase{p}", "-")) for p in (1, 2, 4, 3)),
            _fmt(r.get("rep_wall_s"), 1),
            f"{r.get('stop_s', '-')} s" + (" SIGKILL" if r.get("sigkilled") else ""),
        ])
    return _table(["system", "rep", "worker launch→first job s", "e2e producer jobs/s",
                   "e2e enqueue→start p50 / p99 ms", "idle mean / max ms", "idle spacing ms",
                   "duplicates (enqueue+drain / e2e 8 / e2e 1 / idle)", "rep wall s", "stop"],
                  body)


def render(rows: list[dict[str, Any]], infos: dict[str, dict[str, str]], facts: dict[str, str],
           run: RunInfo) -> str:
    medians = summarise(rows, run.order)
    out = [
        "# Benchmarks: gochatd beside other Python job queues",
        "",
        "Generated by `python -m benchmarks.peers`; do not edit by hand (rerun it instead). "
        "How each figure is taken and how to reproduce it: see the end of this page.",
        "",
        f"Run started {run.started}, took {run.wall_s / 60:.1f} min. N = {run.n:,} jobs per throughput "
        f"phase, {run.reps} rep(s) per system, systems alternating within each rep "
        f"(order: {', '.join(run.order)}). Idle latency: {run.lat_n} jobs, {run.lat_spacing_ms:g} ms apart."
        + (f" Load average (1/5/15 min) at the start: {run.load_at_start}." if run.load_at_start else ""),
        "",
        *([f"> **Note:** {run.note}", ""] if run.note else []),
        "Command:",
        "",
        "```sh",
        run.command,
        "```",
        "",
        "## Machine",
        "",
        *_table(["", ""], [[k, v] for k, v in facts.items()]),
        "## Results",
        "",
        "Cells: median across reps, then each rep in run order. Duplicates: handler starts of a job "
        "index already started in that phase, summed over the phases and reps.",
        "",
        *_main_table(rows, medians, infos),
        f"## Ratios vs `{BASELINE}` (medians; > 1 means gochatd is better on that figure)",
        "",
        "Throughput: gochatd ÷ system. Latency: system ÷ gochatd.",
        "",
        *_ratio_table(medians),
        "## The performance issues' targets measured here",
        "",
        *_targets(medians),
        *TOPOLOGIES,
        "## Settings, producer API and durability",
        "",
        *_table(["system", "workers", "producer", "durability"],
                [[n, i.get("workers", "?"), i.get("producer", "?"), i.get("durability", "?")]
                 for n, i in infos.items()]),
        "## Every rep",
        "",
        *_extra_table(rows),
        f"Raw figures: `{run.json_path}`. Record files and worker logs of this run: `{run.run_dir}/` "
        "(git-ignored).",
        "",
    ]
    return "\n".join(out) + "\n"


def raw_json(rows: list[dict[str, Any]], infos: dict[str, dict[str, str]], facts: dict[str, str],
             run: RunInfo) -> str:
    return json.dumps({"run": run.__dict__, "machine": facts, "systems": infos, "rows": rows,
                       "medians": summarise(rows, run.order)}, indent=1) + "\n"
