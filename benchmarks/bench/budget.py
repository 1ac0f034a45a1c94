"""``--scenario budget``: what one job costs, line by line, in gochatd's streams mode
(PostgreSQL + Redis), its polling mode (PostgreSQL only) and pgqueuer, in one run on private
servers (budget_env.py). Measurement only: issue 22's later changes cite its lines.

Per system and round (systems alternate, their order rotating each round): a fresh database,
2 worker processes (gochatd ``serve --worker-only --concurrency 100``; pgqueuer ``pgq run
--batch-size 50``, as the peers harness), a producer child (budget_producer.py).

1. warm-up: 20 jobs; then 2 s idle;
2. idle path: ``lat_jobs`` jobs one at a time, ``LAT_SPACING_MS`` apart: the stages of each
   (client clock for the enqueue side, database clock for the claim, handler clock for the
   start; all ``CLOCK_REALTIME`` of this one host);
3. cost: after 1.5 s idle, N jobs from 8 producer tasks while the workers run; readings
   before and after (budget_env.Meter): CPU per process, context switches, statements,
   Redis commands, hand-offs to connection threads (``/v1/status`` ``handoffs``); database
   transactions are read once every backend has exited (PostgreSQL reports a backend's
   counts at most once a second and at exit), so they include the daemons' shutdown.

Then the idle cost: one worker process of each system, no jobs, ``idle_s`` seconds after
``idle_settle_s`` (see SIZES), all three at once on their own databases: transactions,
statements and CPU per second."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from benchmarks.bench import budget_md
from benchmarks.bench.budget_env import Meter, Reading, Servers
from benchmarks.bench.budget_render import render
from benchmarks.bench.budget_run import PROCS, Running, System
from benchmarks.bench.budget_scale import measure_scale
from benchmarks.bench.options import BenchOptions
from benchmarks.bench.report import Report, progress
from gochatd.errors import GochatdError

WARMUP_JOBS = 20
LAT_SPACING_MS = 20.0
# The idle window: 30 s, one whole cycle of a daemon's slowest loops (route, pause and reaper
# polls; docs/architecture.md), after a settle that outlasts PostgreSQL 15's late report of an
# idle backend's counts (up to 10 s after its last transaction, PGSTAT_IDLE_INTERVAL): a 2 s
# settle counted the daemon's start-up (its upgrade and first passes, ~60 transactions) as
# 3 idle transactions a second.
SIZES = {False: {"jobs": 2_000, "lat_jobs": 100, "rounds": 3, "idle_s": 30.0,
                 "idle_settle_s": 12.0, "scale_jobs": 3_000, "scale_rounds": 1},
         True: {"jobs": 200, "lat_jobs": 8, "rounds": 1, "idle_s": 2.0,
                "idle_settle_s": 2.0, "scale_jobs": 200, "scale_rounds": 1}}


def peers_python(smoke: bool) -> str | None:
    """The peers' venv python (pgqueuer); a full run creates it as ``python -m
    benchmarks.peers`` does, a smoke run only uses it when it is there."""
    from benchmarks.peers import venv

    python = Path(venv.VENV) / "bin" / "python"
    if smoke:
        return str(python) if (Path(venv.VENV) / "bin" / "pgq").exists() else None
    return venv.ensure_venv(str(Path(__file__).resolve().parents[2]),
                            log=str(Path(tempfile.gettempdir()) / "gochatd-bench-peers-pip.log"))


async def run_budget(opts: BenchOptions, report: Report) -> None:
    sizes = SIZES[opts.smoke]
    pgq_python = await trio.to_thread.run_sync(peers_python, opts.smoke)
    systems = [System("streams", sys.executable), System("polling", sys.executable)]
    if pgq_python is not None:
        systems.append(System("pgqueuer", pgq_python))
    else:
        report.note("budget: pgqueuer not run (no benchmarks/peers/.venv; a full run creates it)")
    load_start, t0 = _load(), time.time()
    servers = Servers()
    try:
        result = await trio.to_thread.run_sync(_measure, servers, systems, sizes,
                                               abandon_on_cancel=True)
    finally:
        with trio.CancelScope(shield=True):  # Ctrl-C: the abandoned thread's servers too
            await trio.to_thread.run_sync(servers.close)
    meta = {"load_start": load_start, "load_end": _load(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)),
            "wall": f"{time.time() - t0:.0f} s",
            "command": "gochatd bench --scenario budget" + (" --smoke" if opts.smoke else "")
            + (f" --budget-md {opts.budget_md}" if opts.budget_md else "")}
    report.put("budget", {"sizes": sizes, "systems": [s.name for s in systems], **meta,
                          **result})
    table = render(result, sizes)
    report.sections.append(f"load average {meta['load_start']} at the start, "
                           f"{meta['load_end']} at the end\n{table}")
    if opts.budget_md:
        budget_md.write(opts.budget_md, budget_md.section(table, meta))


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def _measure(servers: Servers, systems: list[System], sizes: dict[str, Any]
             ) -> dict[str, Any]:
    rounds: dict[str, list[dict[str, float]]] = {s.name: [] for s in systems}
    stages: dict[str, dict[str, list[float]]] = {s.name: {} for s in systems}
    statements: dict[str, list[dict[str, float]]] = {s.name: [] for s in systems}
    try:
        servers.start()
        with tempfile.TemporaryDirectory(prefix="gochatd-bench-budget-run-") as tmp:
            for r in range(sizes["rounds"]):
                order = systems[r % len(systems):] + systems[:r % len(systems)]
                for system in order:
                    progress(f"  budget: round {r + 1}/{sizes['rounds']}, {system.name}")
                    figures, lat, stmts = _round(servers, system, Path(tmp), f"r{r}", sizes)
                    rounds[system.name].append(figures)
                    statements[system.name].append(stmts)
                    for key, values in lat.items():
                        stages[system.name].setdefault(key, []).extend(values)
            progress(f"  budget: idle cost, {sizes['idle_s']:g} s")
            idle = _idle(servers, systems, Path(tmp), sizes["idle_s"], sizes["idle_settle_s"])
            progress(f"  budget: scale with workers, {sizes['scale_jobs']:,} jobs")
            scale = measure_scale(servers, Path(tmp), sizes["scale_jobs"], sizes["scale_rounds"])
    finally:
        servers.close()
    per_job_all = {name: _median(rows) for name, rows in rounds.items()}
    return {
        "per_job": {k: {n: v for n, v in d.items() if not n.startswith("one.")}
                    for k, d in per_job_all.items()},
        "stages_p50_ms": {name: {k: statistics.median(v) for k, v in st.items() if v}
                          for name, st in stages.items()},
        "statements": {name: _median(rows) for name, rows in statements.items()},
        "one_at_a_time": {name: _net_of_idle(
            {k.removeprefix("one."): v for k, v in per_job.items() if k.startswith("one.")},
            idle.get(name, {}), PROCS) for name, per_job in per_job_all.items()},
        "idle": idle,
        "scale": scale,
    }


def _median(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for row in rows for k in row}
    return {k: statistics.median(row.get(k, 0.0) for row in rows) for k in keys}


def _round(servers: Servers, system: System, run_dir: Path, tag: str, sizes: dict[str, Any]
           ) -> tuple[dict[str, float], dict[str, list[float]], dict[str, float]]:
    running = Running(servers, system, run_dir, tag)
    try:
        running.start_producer()
        assert running.producer is not None
        meter = Meter(servers, running.database, {
            "daemons": [p.pid for p in running.workers], "producer": [running.producer.pid]},
            system.redis)
        warm = running.ask(f"e2e {WARMUP_JOBS}")
        running.wait_started(WARMUP_JOBS, 120)
        running.wait_finished(60)
        time.sleep(2.0)  # idle: the next jobs measure wake-up, not queueing
        one, lat, hops = _latency(running, meter, sizes["lat_jobs"], warm["handoffs"])
        time.sleep(1.5)
        figures, stmts = _cost(running, meter, sizes["jobs"], WARMUP_JOBS + sizes["lat_jobs"],
                               hops)
    finally:
        running.stop()
    xacts_end, probe_end = meter.after_exit()
    xacts = (xacts_end - figures.pop("_xacts0")) - (probe_end - figures.pop("_probe_calls"))
    figures["pg_xacts"] = xacts / sizes["jobs"]
    figures.update({f"one.{k}": v for k, v in one.items()})
    return figures, lat, stmts


class _Window:
    """Readings (and the daemons' and producer's hand-off counts) at the start of a window."""

    def __init__(self, running: Running, meter: Meter, producer_hops: dict[str, int]) -> None:
        self.running, self.meter = running, meter
        self.hops = running.handoffs()
        self.producer_hops = producer_hops
        self.reading = meter.read()
        self.t0 = time.monotonic()

    def close(self, n: float, producer_hops: dict[str, int]) -> dict[str, float]:
        """Per job over the window, ended now (``n`` jobs ran in it)."""
        figures = _per_job(self.reading, self.meter.read(), n)
        figures["window_s"], figures["jobs"] = time.monotonic() - self.t0, n
        for name, count in self.running.handoffs().items():
            figures[f"hops.{name}"] = (count - self.hops.get(name, 0)) / n
        for name, count in producer_hops.items():
            figures[f"hops.producer {name}"] = (count - self.producer_hops.get(name, 0)) / n
        figures["hops.total"] = sum(v for k, v in figures.items() if k.startswith("hops."))
        return figures


def _latency(running: Running, meter: Meter, count: int, producer_hops: dict[str, int]
             ) -> tuple[dict[str, float], dict[str, list[float]], dict[str, int]]:
    window = _Window(running, meter, producer_hops)
    answer = running.ask(f"lat {count} {LAT_SPACING_MS}")
    starts = running.wait_started(WARMUP_JOBS + count, 60)
    running.wait_finished(60)
    one = window.close(count, answer["handoffs"])
    rows = answer["rows"]
    times = running.job_times([row[0] for row in rows])
    out: dict[str, list[float]] = {}

    def add(key: str, seconds: float) -> None:
        out.setdefault(key, []).append(seconds * 1000)

    for job_id, t0, t_commit, t_xadd, t_return in rows:
        start, (created, claim) = starts.get(job_id), times.get(job_id, (None, None))
        if start is None or claim is None or created is None:
            continue
        add("insert_starts", created - t0)
        add("insert_commit", t_commit - t0)
        if t_xadd is not None:
            add("xadd", t_xadd - t_commit)
        add("wake_to_claim", claim - (t_xadd if t_xadd is not None else t_commit))
        add("claim_starts", claim - t0)
        add("claim_to_handler", start - claim)
        add("enqueue_returns", t_return - t0)
        add("total", start - t0)
    return one, out, answer["handoffs"]


def _cost(running: Running, meter: Meter, n: int, before: int, producer_hops: dict[str, int]
          ) -> tuple[dict[str, float], dict[str, float]]:
    xacts0 = meter.xacts()
    window = _Window(running, meter, producer_hops)
    enq = running.ask(f"e2e {n}")
    starts = running.wait_started(before + n, 300)
    running.wait_finished(120)
    figures = window.close(n, enq["handoffs"])
    r0, r1 = window.reading, meter.read()
    figures["e2e_jobs_per_s"] = n / (max(starts.values()) - enq["t_first"])
    figures["_xacts0"] = float(xacts0)
    figures["_probe_calls"] = float(r0.probe_calls)  # the probe's statements until the end
    stmts = {q: (c - r0.statements.get(q, (0, 0.0))[0]) / n
             for q, (c, _) in r1.statements.items()}
    stmt_ms = {f"ms:{q}": (t - r0.statements.get(q, (0, 0.0))[1]) / n
               for q, (_, t) in r1.statements.items()}
    return figures, {**{q: v for q, v in stmts.items() if v > 0}, **stmt_ms}


def _per_job(r0: Reading, r1: Reading, n: float) -> dict[str, float]:
    out = {f"cpu_us.{k}": (r1.cpu[k] - r0.cpu.get(k, 0.0)) / n * 1e6 for k in r1.cpu}
    out["cpu_us.total"] = sum(out.values())
    for k in r1.switches:
        out[f"switches.{k}"] = (r1.switches[k] - r0.switches.get(k, 0)) / n
    out["pg_statements"] = sum(c - r0.statements.get(q, (0, 0.0))[0]
                               for q, (c, _) in r1.statements.items()) / n
    out["pg_exec_us"] = sum(t - r0.statements.get(q, (0, 0.0))[1]
                            for q, (_, t) in r1.statements.items()) / n * 1000
    for cmd, calls in r1.redis.items():
        out[f"redis.{cmd}"] = (calls - r0.redis.get(cmd, 0)) / n
    out["redis_commands"] = sum(v for k, v in out.items() if k.startswith("redis."))
    return out


def _wait_connected(running: Running, meter: Meter, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not meter.pg_backend_pids():
        running.check_alive()
        if time.monotonic() > deadline:
            raise GochatdError(f"bench budget: {running.system.name} did not connect")
        time.sleep(0.05)


def _idle(servers: Servers, systems: list[System], run_dir: Path, idle_s: float,
          settle_s: float) -> dict[str, dict[str, float]]:
    """Per system, one worker process's rates per second with no jobs (the ``_per_job``
    keys, "per job" read as "per second"), and ``xacts_per_s``."""
    runs = [Running(servers, s, run_dir, "idle", procs=1) for s in systems]
    try:
        meters = [Meter(servers, r.database, {"daemons": [r.workers[0].pid]}, r.system.redis)
                  for r in runs]
        for running, meter in zip(runs, meters, strict=True):
            if running.system.gochatd:
                running.wait_status(running.system.name, 60)
            else:
                _wait_connected(running, meter, 60)
        time.sleep(settle_s)
        before = [(_Window(r, m, {}), m.xacts()) for r, m in zip(runs, meters, strict=True)]
        t0 = time.monotonic()
        time.sleep(idle_s)
        elapsed = time.monotonic() - t0
        out = {}
        for running, meter, (window, x0) in zip(runs, meters, before, strict=True):
            r0 = window.reading
            out[running.system.name] = {**window.close(elapsed, {}),
                                        "xacts_per_s": (meter.xacts() - x0) / elapsed}
            r1 = meter.read()
            out[running.system.name].update({
                f"stmt:{q}": (c - r0.statements.get(q, (0, 0.0))[0]) / elapsed
                for q, (c, _) in r1.statements.items()
                if c > r0.statements.get(q, (0, 0.0))[0]})
    finally:
        for running in runs:
            running.stop()
    return out


def _net_of_idle(one: dict[str, float], idle: dict[str, float], procs: int) -> dict[str, float]:
    """One-at-a-time figures less what the workers spend idle over the same time (the
    window holds the spacing between the jobs too): ``idle`` is per second per process."""
    per_job_s = one.get("window_s", 0.0) / max(one.get("jobs", 1.0), 1.0)
    return {k: v - idle.get(k, 0.0) * procs * per_job_s if k in idle and
            not k.startswith(("cpu_us.producer", "switches.producer", "hops.producer")) else v
            for k, v in one.items()}
