"""``python -m benchmarks.peers``: measure gochatd and its peers in one run.

    python -m benchmarks.peers                          # every system, N=10000, 2 reps
    python -m benchmarks.peers --systems gochatd,pgqueuer --n 2000 --reps 1
    python -m benchmarks.peers --smoke                  # < 60 s: 3 systems, N=300, 1 rep

Repetitions alternate systems (rep 1: A B C, rep 2: A B C), so slow drifts of a shared
machine spread over every system instead of landing on one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from typing import Any

from benchmarks.peers import machine, phases, report, systems, venv

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_OUT = os.path.join(REPO, "docs", "benchmarks.md")
METHOD = os.path.join(HERE, "method.md")
BUDGET_START, BUDGET_END = report.BUDGET_START, report.BUDGET_END


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0])
    extra = [name for name in systems.SYSTEMS if name not in systems.DEFAULT_SYSTEMS]
    ap.add_argument("--systems", help="comma-separated; default: " + ",".join(systems.DEFAULT_SYSTEMS)
                    + "; also: " + ",".join(extra))
    ap.add_argument("--n", type=int, default=None, help="jobs per throughput phase (default 10000)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per system (default 2)")
    ap.add_argument("--lat-n", type=int, default=None, help="idle-latency samples (default 200)")
    ap.add_argument("--lat-spacing-ms", type=float, default=20.0)
    ap.add_argument("--phase-timeout", type=float, default=None, help="seconds (default 300)")
    ap.add_argument("--out", help="the Markdown report (default docs/benchmarks.md; with --smoke, "
                                  "inside the run directory); the raw JSON goes beside it (.json)")
    ap.add_argument("--render-from", metavar="JSON",
                    help="measure nothing: rewrite --out from the raw JSON of an earlier run")
    ap.add_argument("--note", help="a sentence for the report's header (for example: the machine was busy)")
    ap.add_argument("--smoke", action="store_true",
                    help="quick check that the harness works: 3 systems, N=300, 1 rep, 40 idle samples")
    return ap


def _usage_error(msg: str) -> int:
    print(f"python -m benchmarks.peers: {msg}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.render_from:
        return _render_again(args.render_from, os.path.abspath(args.out or DEFAULT_OUT), args.note)
    smoke = args.smoke
    names = (args.systems.split(",") if args.systems else
             systems.SMOKE_SYSTEMS if smoke else systems.DEFAULT_SYSTEMS)
    unknown = [n for n in names if n not in systems.SYSTEMS]
    if unknown:
        return _usage_error(f"unknown system(s) {', '.join(unknown)}; known: {', '.join(systems.SYSTEMS)}")
    n = _default(args.n, 300 if smoke else 10_000)
    reps = _default(args.reps, 1 if smoke else 2)
    lat_n = _default(args.lat_n, 40 if smoke else 200)
    phase_timeout_s: float = args.phase_timeout or (60.0 if smoke else 300.0)
    if min(n, reps, lat_n) < 1:
        return _usage_error("--n, --reps and --lat-n must be at least 1")
    if (args.phase_timeout is not None and args.phase_timeout <= 0) or args.lat_spacing_ms < 0:
        return _usage_error("--phase-timeout must be above 0 and --lat-spacing-ms at least 0")

    run_dir = os.path.join(HERE, "runs", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(run_dir, exist_ok=True)
    out = os.path.abspath(args.out or (os.path.join(run_dir, "benchmarks.md") if smoke else DEFAULT_OUT))
    pip_log = os.path.join(run_dir, "pip.log")
    try:
        python = venv.ensure_venv(REPO, log=pip_log)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"peers: filling benchmarks/peers/.venv failed ({exc}); see {pip_log}", file=sys.stderr)
        return 1
    settings = phases.RunSettings(
        python=python, repo=REPO, run_dir=run_dir, n=n, lat_n=lat_n, lat_spacing_ms=args.lat_spacing_ms,
        phase_timeout_s=phase_timeout_s,
    )
    # SIGTERM unwinds like Ctrl-C, so the running rep still stops its workers.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    started, load_at_start = time.time(), machine.load_average()
    infos = {name: _describe(systems.SYSTEMS[name], settings) for name in names}
    rows = []
    for rep in range(1, reps + 1):
        for name in names:
            row = phases.run_rep(systems.SYSTEMS[name], rep, settings)
            rows.append(row)
            print(_progress(row, started), flush=True)
    _write(rows, infos, settings, names, reps, (started, load_at_start), out, argv, args.note or "")
    failed = [r for r in rows if r.get("error")]
    print(f"peers: wrote {os.path.relpath(out, REPO)}; {len(failed)} of {len(rows)} reps failed", flush=True)
    return 1 if failed else 0


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _default(value: int | None, default: int) -> int:
    return default if value is None else value


def _render_again(json_path: str, out: str, note: str | None) -> int:
    try:
        with open(json_path, encoding="utf-8") as f:
            raw = json.load(f)
        run = report.RunInfo(**raw["run"])
        if note is not None:  # kept in the JSON too, so the next re-render has it
            run = dataclasses.replace(run, note=note)
            raw["run"]["note"] = note
            with open(json_path, "w", encoding="utf-8") as f:
                json.dump(raw, f, indent=1)
                f.write("\n")
        rows, infos, facts = raw["rows"], raw["systems"], raw["machine"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return _usage_error(f"--render-from {json_path}: not a results file of this harness ({exc})")
    _write_markdown(out, rows, infos, facts, run)
    print(f"peers: wrote {os.path.relpath(out, REPO)} from {json_path}", flush=True)
    return 0


def _describe(system: systems.System, settings: phases.RunSettings) -> dict[str, str]:
    log = os.path.join(settings.run_dir, f"{system.name}.log")
    adapter = phases.Adapter(system, settings, os.devnull, log)
    try:
        return {k: str(v) for k, v in adapter.call("describe", timeout_s=60).items()}
    except phases.PhaseFailed as exc:
        return {"version": "?", "workers": f"describe failed: {exc}"}


def _progress(row: dict[str, Any], started: float) -> str:
    def f(key: str) -> str:
        v = row.get(key)
        return f"{v:,.1f}" if isinstance(v, float) else "-"

    line = (f"[{time.time() - started:5.0f} s] {row['system']} rep {row['rep']}: "
            f"enqueue {f('enqueue_jobs_s')}, drain {f('drain_jobs_s')}, e2e {f('e2e_jobs_s')}, "
            f"e2e 1 producer {f('e2e1_jobs_s')} jobs/s, "
            f"idle p50/p99 {f('lat_p50_ms')}/{f('lat_p99_ms')} ms")
    return line + (f"  ERROR: {row['error']}" if row.get("error") else "")


def _write(rows: list[dict[str, Any]], infos: dict[str, dict[str, str]], settings: phases.RunSettings,
           names: list[str], reps: int, start: tuple[float, str], out: str, argv: list[str] | None,
           note: str) -> None:
    started, load_at_start = start
    json_path = os.path.splitext(out)[0] + ".json"
    cli_args = sys.argv[1:] if argv is None else argv
    run = report.RunInfo(
        command=" ".join(["python -m benchmarks.peers", *map(shlex.quote, cli_args)]),
        started=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)), wall_s=time.time() - started,
        n=settings.n, reps=reps, lat_n=settings.lat_n, lat_spacing_ms=settings.lat_spacing_ms,
        json_path=os.path.relpath(json_path, REPO), run_dir=os.path.relpath(settings.run_dir, REPO),
        order=names, load_at_start=load_at_start, note=note,
    )
    facts = machine.machine_facts(settings.python)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    _write_markdown(out, rows, infos, facts, run)
    with open(json_path, "w", encoding="utf-8") as f:
        f.write(report.raw_json(rows, infos, facts, run))


def budget_block(text: str) -> str:
    """The budget's section of a benchmarks.md (benchmarks/bench/budget_md.py), or ""."""
    start, end = text.find(BUDGET_START), text.find(BUDGET_END)
    return text[start:end + len(BUDGET_END)] if 0 <= start < end else ""


def _write_markdown(out: str, rows: list[dict[str, Any]], infos: dict[str, dict[str, str]],
                    facts: dict[str, str], run: report.RunInfo) -> None:
    """The generated tables, then the cost budget's section as ``gochatd bench --scenario
    budget --budget-md`` last wrote it (kept as it is), then the hand-written method."""
    with open(METHOD, encoding="utf-8") as f:
        method = f.read()
    kept = ""
    if os.path.exists(out):
        with open(out, encoding="utf-8") as f:
            kept = budget_block(f.read())
    with open(out, "w", encoding="utf-8") as f:
        f.write(report.render(rows, infos, facts, run) + "\n" + (kept + "\n\n" if kept else "")
                + method)
