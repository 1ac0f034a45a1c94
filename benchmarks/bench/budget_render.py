"""The printed tables of ``--scenario budget`` (medians over the rounds)."""

from __future__ import annotations

import math
import re
from typing import Any

from benchmarks.bench.budget_scale import rows as scale_rows

_PER_JOB = (
    ("end-to-end, 8 producer tasks (jobs/s)", "e2e_jobs_per_s"),
    ("CPU, worker processes (µs/job)", "cpu_us.daemons"),
    ("CPU, producer process (µs/job)", "cpu_us.producer"),
    ("CPU, PostgreSQL backends of the run (µs/job)", "cpu_us.pg_backends"),
    ("CPU, PostgreSQL server processes (µs/job)", "cpu_us.pg_server"),
    ("CPU, redis-server (µs/job)", "cpu_us.redis"),
    ("CPU, all of the above (µs/job)", "cpu_us.total"),
    ("PostgreSQL transactions / job", "pg_xacts"),
    ("PostgreSQL statements / job (BEGIN, COMMIT included)", "pg_statements"),
    ("PostgreSQL execution time (µs/job)", "pg_exec_us"),
    ("Redis commands / job", "redis_commands"),
    ("thread hops / job (hand-offs to connection threads)", "hops.total"),
    ("context switches / job, worker processes", "switches.daemons"),
    ("context switches / job, producer", "switches.producer"),
)
_STAGES = (
    ("stage: enqueue call -> INSERT committed [1]", "insert_commit"),
    ("stage: XADD, on the store's thread", "xadd"),
    ("stage: -> claim transaction starts: wake-up + hop [2]", "wake_to_claim"),
    ("stage: claim -> handler starts: claim, commit, hop, spawn", "claim_to_handler"),
    ("from the call: INSERT transaction starts (DB clock)", "insert_starts"),
    ("from the call: claim transaction starts (DB clock)", "claim_starts"),
    ("from the call: enqueue call returns", "enqueue_returns"),
    ("from the call: handler starts (handler clock)", "total"),
)
_STAGE_NOTES = (
    "[1] client clock; with Redis the commit is timed where the XADD starts, on the store's "
    "thread; without\n    Redis it is the call's return (pgqueuer, polling: the answer's trip "
    "back is in it).",
    "[2] from the XADD's end, else from [1]'s mark: < 0 when the worker claimed before the "
    "producer had its answer.",
    "All clocks are this host's CLOCK_REALTIME: time.time() in the producer and the handler, "
    "PostgreSQL's now()\n(the transaction's start) for the rows.",
)
_IDLE = (
    ("database transactions / s", "xacts_per_s", 1.0),
    ("statements / s", "pg_statements", 1.0),
    ("Redis commands / s", "redis_commands", 1.0),
    ("thread hops / s", "hops.total", 1.0),
    ("context switches / s", "switches.daemons", 1.0),
    ("CPU of the worker process (ms/s)", "cpu_us.daemons", 1e-3),
    ("CPU of its PostgreSQL backends (ms/s)", "cpu_us.pg_backends", 1e-3),
)
_ONE = (
    ("CPU, worker processes (µs/job)", "cpu_us.daemons"),
    ("CPU, producer process (µs/job)", "cpu_us.producer"),
    ("CPU, PostgreSQL backends (µs/job)", "cpu_us.pg_backends"),
    ("CPU, redis-server (µs/job)", "cpu_us.redis"),
    ("PostgreSQL statements / job", "pg_statements"),
    ("Redis commands / job", "redis_commands"),
    ("thread hops / job", "hops.total"),
    ("context switches / job, worker processes", "switches.daemons"),
    ("context switches / job, producer", "switches.producer"),
)


def _fmt(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def _table(title: str, names: list[str], rows: list[tuple[str, list[float | None]]]) -> list[str]:
    width = max(len(label) for label, _ in rows)
    cols = [max(10, len(n)) for n in names]
    lines = [title, f"{'':{width}}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, cols,
                                                                             strict=True))]
    for label, values in rows:
        lines.append(f"{label:{width}}  " + "  ".join(
            f"{_fmt(v):>{w}}" for v, w in zip(values, cols, strict=True)))
    return lines


def render(result: dict[str, Any], sizes: dict[str, Any]) -> str:
    per_job: dict[str, dict[str, float]] = result["per_job"]
    names = list(per_job)
    rows = [(label, [per_job[n].get(key) for n in names]) for label, key in _PER_JOB]
    extra = sorted({k for n in names for k, v in per_job[n].items()
                    if k.startswith(("hops.", "redis.")) and k != "hops.total" and v >= 0.005})
    rows += [(f"  {k.replace('hops.', 'hops: ').replace('redis.', 'redis: ')}",
              [per_job[n].get(k) for n in names]) for k in extra]
    lines = _table(f"cost budget per job: N={sizes['jobs']} per round, median of "
                   f"{sizes['rounds']} round(s), 2 worker processes each", names, rows)
    stages = result["stages_p50_ms"]
    stage_rows = [(label, [stages[n].get(key) for n in names]) for label, key in _STAGES]
    lines += ["", *_table(f"idle path, p50 ms ({sizes['lat_jobs']} jobs a round, one at a "
                          "time)", names, stage_rows), *_STAGE_NOTES]
    idle = result["idle"]
    idle_rows = [(label, [_scaled(idle[n].get(key), scale) for n in idle])
                 for label, key, scale in _IDLE]
    lines += ["", *_table(f"idle cost of one worker process, no jobs, {sizes['idle_s']:g} s",
                          list(idle), idle_rows)]
    for name in idle:
        per_s = sorted(((v, k[5:]) for k, v in idle[name].items() if k.startswith("stmt:")),
                       reverse=True)[:6]
        lines += [f"  {name} idle, {_fmt(v)}/s: {_short(q, 70)}" for v, q in per_s]
    scale = result["scale"]
    lines += ["", *_table(f"scale with workers: a backlog of {sizes['scale_jobs']:,} "
                          f"(enqueue_many), median of {sizes['scale_rounds']} round(s)",
                          list(scale), scale_rows(scale))]
    one = result["one_at_a_time"]
    one_rows = [(label, [one[n].get(key) for n in names]) for label, key in _ONE]
    extra = sorted({k for n in names for k in one[n] if k.startswith("hops.") and k != "hops.total"})
    one_rows += [(f"  {k.replace('hops.', 'hops: ')}", [one[n].get(k) for n in names])
                 for k in extra]
    lines += ["", *_table("one job at a time (the idle path's jobs), per job, less the workers' "
                          "idle rate over the same time", names, one_rows)]
    for name in names:
        lines += ["", *_statements(name, result["statements"][name])]
    return "\n".join(lines)


def _statements(name: str, stmts: dict[str, float], top: int = 8) -> list[str]:
    timed = sorted(((stmts.get(f"ms:{q}", 0.0) * 1000, c, q) for q, c in stmts.items()
                    if not q.startswith("ms:")), reverse=True)[:top]
    lines = [f"{name}: statements by execution time per job (pg_stat_statements)",
             f"{'µs/job':>8}  {'calls/job':>9}  {'µs/call':>8}  statement"]
    for us, calls, query in timed:
        text = _short(query, 80)
        lines.append(f"{_fmt(us):>8}  {_fmt(calls):>9}  {_fmt(us / calls if calls else None):>8}"
                     f"  {text}")
    return lines


def _short(query: str, width: int) -> str:
    return re.sub(r"\s+", " ", re.sub(r"--[^\n]*", "", query)).strip()[:width]
