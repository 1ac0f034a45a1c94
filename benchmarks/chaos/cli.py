"""``python -m benchmarks.chaos``: options, signals, the printed table, the JSON report and
the exit code (0: every invariant held; 1: a violation; 2: bad usage; 130: interrupted)."""

from __future__ import annotations

import argparse
import dataclasses
import platform
import signal
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from types import FrameType

from benchmarks.chaos import report, runner
from benchmarks.chaos.report import ScenarioResult
from benchmarks.chaos.scenarios import ORDER
from benchmarks.chaos.settings import (
    DEFAULT_JOBS,
    DEFAULT_PRESSURE,
    DEFAULT_WORKERS,
    SMOKE_JOBS,
    SMOKE_PRESSURE,
    Options,
)
from gochatd.obs.logs import configure_logging


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.chaos",
        description="Inject faults into a fleet of real gochatd daemons and check the invariants.",
    )
    p.add_argument("--scenario", default="all",
                   help=f"'all' or a comma-separated list of: {', '.join(ORDER)}")
    p.add_argument("--jobs", type=int, help=f"main load per scenario (default {DEFAULT_JOBS}; "
                   f"smoke {SMOKE_JOBS})")
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="daemons in the fleet")
    p.add_argument("--seed", type=int, default=1, help="seeds every random choice")
    p.add_argument("--report", metavar="FILE", help="write the results as JSON")
    p.add_argument("--smoke", action="store_true", help="small load, seconds per scenario")
    p.add_argument("--keep", metavar="DIR", help="copy the daemons' logs there before cleaning up")
    p.add_argument("--pressure-minutes", type=float, metavar="M",
                   help=f"each phase of the pressure cells (default {DEFAULT_PRESSURE[0]:g}; "
                   f"smoke {SMOKE_PRESSURE[0]:g}; the issue's full length: 10)")
    p.add_argument("--pressure-rate", type=float, metavar="JOBS_PER_S",
                   help=f"offered load of the pressure cells (default {DEFAULT_PRESSURE[1]:g}; "
                   f"smoke {SMOKE_PRESSURE[1]:g})")
    p.add_argument("--burst-jobs", type=int, metavar="N",
                   help=f"the burst cell's burst (default {DEFAULT_PRESSURE[2]}; "
                   f"smoke {SMOKE_PRESSURE[2]})")
    p.add_argument("--pg-set", action="append", default=[], metavar="NAME=VALUE",
                   help="a postgresql.conf setting for the run's cluster, repeatable "
                   "(shared_preload_libraries=pg_stat_statements: each pressure phase "
                   "reports its top statements)")
    return p


def parse(argv: Sequence[str]) -> Options:
    parser = build_parser()
    args = parser.parse_args(argv)
    names = ORDER if args.scenario == "all" else [s.strip() for s in args.scenario.split(",") if s.strip()]
    unknown = [n for n in names if n not in ORDER]
    if unknown or not names:
        bad = ", ".join(unknown) or repr(args.scenario)
        parser.error(f"unknown scenario {bad}; choose from {', '.join(ORDER)}")
    if args.workers < 2:
        parser.error("--workers must be at least 2 (a fault needs a survivor)")
    jobs = args.jobs if args.jobs is not None else (SMOKE_JOBS if args.smoke else DEFAULT_JOBS)
    if jobs < 10:
        parser.error("--jobs must be at least 10")
    minutes, rate, burst = SMOKE_PRESSURE if args.smoke else DEFAULT_PRESSURE
    minutes = args.pressure_minutes if args.pressure_minutes is not None else minutes
    rate = args.pressure_rate if args.pressure_rate is not None else rate
    burst = args.burst_jobs if args.burst_jobs is not None else burst
    if not (minutes > 0 and rate > 0 and burst >= 10):
        parser.error("--pressure-minutes and --pressure-rate must be positive, --burst-jobs >= 10")
    pg_settings: dict[str, str] = {}
    for item in args.pg_set:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            parser.error(f"--pg-set wants NAME=VALUE, got {item!r}")
        pg_settings[name.strip()] = value.strip()
    return Options(scenarios=list(names), jobs=jobs, workers=args.workers, seed=args.seed,
                   smoke=args.smoke, report=args.report, keep=args.keep,
                   pressure_s=minutes * 60, pressure_rate=rate, burst_jobs=int(burst),
                   pg_settings=pg_settings)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse(sys.argv[1:] if argv is None else argv)
    configure_logging("error", "console")  # the runner's own enqueue client stays quiet
    # Both, explicitly: a background job may have inherited SIGINT ignored.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, _raise_interrupt)
    began = time.monotonic()
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    print(f"chaos: {len(opts.scenarios)} scenarios, {opts.jobs} jobs, {opts.workers} workers, "
          f"seed {opts.seed}{', smoke' if opts.smoke else ''}", flush=True)

    def progress(result: ScenarioResult) -> None:
        state = "ok" if result.ok else f"FAILED ({len(result.violations)} violations)"
        print(f"chaos: {result.name}: {state} in {result.duration_s:.1f}s", flush=True)

    try:
        results = runner.run(opts, progress)
    except KeyboardInterrupt:
        print("chaos: interrupted; everything started was stopped and removed", file=sys.stderr)
        return 130
    total = round(time.monotonic() - began, 1)
    print()
    print(report.table(results))
    print()
    print(report.details(results))
    print(f"\nchaos: total {total:.1f}s")
    if opts.report:
        run_info = {
            "started": stamp, "duration_s": total, "smoke": opts.smoke, "jobs": opts.jobs,
            "workers": opts.workers, "seed": opts.seed, "scenarios": opts.scenarios,
            "timing": dataclasses.asdict(opts.timing),
            "python": platform.python_version(),
        }
        report.write_json(opts.report, run_info, results)
    return 0 if results and all(r.ok for r in results) else 1
