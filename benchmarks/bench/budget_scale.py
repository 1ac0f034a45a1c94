"""The budget's "scale with workers" table (issue 22, item 5): the same total concurrency as
2 daemons x 100 or 8 daemons x 25, streams mode against polling mode. The daemons start on
an empty database and are all up (``/v1/status``) before the producer puts a backlog of N
jobs in with ``enqueue_many`` (one XADD batch each with Redis); drain = (N - 1) / (last -
first handler start); CPU and statements per job from the backlog's first enqueue to the
last finish, transactions once every backend has exited (budget.py says why)."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench.budget_env import Meter, Servers
from benchmarks.bench.budget_run import Running, System

#: (daemons, concurrency of each)
SHAPES = ((2, 100), (8, 25))


def measure_scale(servers: Servers, run_dir: Path, jobs: int, rounds: int
                  ) -> dict[str, dict[str, float]]:
    """Per "<mode> <daemons>x<concurrency>": medians over ``rounds`` of drain and per job
    costs; the order of the four runs rotates each round."""
    runs = [(mode, shape) for shape in SHAPES for mode in ("streams", "polling")]
    out: dict[str, list[dict[str, float]]] = {}
    for r in range(rounds):
        for mode, (procs, conc) in runs[r % len(runs):] + runs[:r % len(runs)]:
            key = f"{mode} {procs}x{conc}"
            out.setdefault(key, []).append(
                _one(servers, System(mode, sys.executable), run_dir, f"s{r}{procs}", jobs,
                     procs, conc))
    return {key: {k: statistics.median(row[k] for row in rows) for k in rows[0]}
            for key, rows in out.items()}


def _one(servers: Servers, system: System, run_dir: Path, tag: str, n: int, procs: int,
         conc: int) -> dict[str, float]:
    running = Running(servers, system, run_dir, tag, procs=procs, concurrency=conc)
    try:
        running.wait_status(system.name, 120)
        running.start_producer()
        assert running.producer is not None
        meter = Meter(servers, running.database, {"daemons": [p.pid for p in running.workers]},
                      system.redis)
        time.sleep(1.0)
        x0, r0 = meter.xacts(), meter.read()
        running.ask(f"bulk {n}")
        starts = running.wait_started(n, 300)
        running.wait_finished(120)
        r1 = meter.read()
    finally:
        running.stop()
    xacts, probe = meter.after_exit()
    first, last = min(starts.values()), max(starts.values())
    figures: dict[str, Any] = {
        "drain_jobs_per_s": (n - 1) / (last - first) if last > first else float("nan"),
        "pg_xacts": ((xacts - x0) - (probe - r0.probe_calls)) / n,
        "pg_statements": sum(c - r0.statements.get(q, (0, 0.0))[0]
                             for q, (c, _) in r1.statements.items()) / n,
    }
    for role in ("daemons", "pg_backends", "pg_server", "redis"):
        if role in r1.cpu:
            figures[f"cpu_us.{role}"] = (r1.cpu[role] - r0.cpu.get(role, 0.0)) / n * 1e6
    return figures


_ROWS = (
    ("drain, first -> last handler start (jobs/s)", "drain_jobs_per_s"),
    ("CPU, PostgreSQL backends (µs/job)", "cpu_us.pg_backends"),
    ("CPU, PostgreSQL server processes (µs/job)", "cpu_us.pg_server"),
    ("CPU, worker processes (µs/job)", "cpu_us.daemons"),
    ("CPU, redis-server (µs/job)", "cpu_us.redis"),
    ("PostgreSQL transactions / job", "pg_xacts"),
    ("PostgreSQL statements / job", "pg_statements"),
)


def rows(scale: dict[str, dict[str, float]]) -> list[tuple[str, list[float | None]]]:
    return [(label, [scale[k].get(key) for k in scale]) for label, key in _ROWS]
