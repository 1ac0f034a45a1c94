"""``gochatd bench``: every row of issue 5's target table, measured on scratch databases, printed
as a table (figure, target, measured, pass/miss) and, with ``--json``, written as JSON.

    options.py         scenarios, backends, sizes (``--smoke``: all of them, small)
    report.py          the target table and the outputs
    throughput.py      enqueue (1/call, bulk), drain, end-to-end, idle latency  (per backend)
    latency.py         claim latency at 50% of max, delayed-job lateness        (one backend)
    daemon_process.py  CPU per job and RSS of a real ``gochatd serve``; the 1M-job soak
    runtimes.py        SyncClient / asyncio / Trio producers, asyncio and thread handlers (one backend)
    backlog.py         claim latency and rate with a 1M backlog vs a 10k one    (PostgreSQL)
    idle_tx.py         an idle-in-transaction holder under steady load          (PostgreSQL)
    migrate.py         a live move of 1M jobs SQLite -> PostgreSQL, phase by phase
    migrate_overhead.py  the enqueue cost of 0007's change tracking             (both)
    dashboard.py       the fleet dashboard's queries with 1M jobs               (both)
    budget*.py         issue 22's cost budget per job: streams, polling, pgqueuer (private servers)
    profiling.py       ``--profile``: pyinstrument over one drain
"""

from __future__ import annotations

import argparse
import signal
import time

import trio

from benchmarks.bench.options import BenchOptions, from_args
from benchmarks.bench.report import Report, progress
from benchmarks.bench.scratch import check_redis, pooled_change
from gochatd.errors import ConfigError


async def run_bench(args: argparse.Namespace) -> int:
    try:
        opts = from_args(args)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    sizes = opts.sizes
    report = Report({
        "scenarios": list(opts.scenarios), "backends": list(opts.backends),
        "smoke": opts.smoke, "concurrency": opts.concurrency, "producers": opts.producers,
        "sizes": f"N={sizes.jobs}, soak {sizes.soak_jobs}, backlog {sizes.backlog_small} vs "
                 f"{sizes.backlog_big}, idle-in-tx {sizes.idle_tx_hold_s:g}s at "
                 f"{sizes.idle_tx_rate:g}/s, migrate {sizes.migrate_jobs}"
                 + (", smoke" if opts.smoke else ""),
        "size_values": {k: getattr(sizes, k) for k in sizes.__dataclass_fields__},
    })
    if any(b.endswith("+redis") for b in opts.backends):
        await check_redis(opts.redis_url)
    interrupted = False
    async with trio.open_nursery() as nursery:

        async def on_signal() -> None:
            nonlocal interrupted
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    # Cancelling runs every cleanup: scratch databases, streams, children.
                    interrupted = True
                    nursery.cancel_scope.cancel()

        nursery.start_soon(on_signal)
        for scenario in opts.scenarios:
            t0 = time.perf_counter()
            progress(f"{scenario} ...")
            await _run_scenario(opts, scenario, report)
            report.figures[f"elapsed_s.{scenario}"] = round(time.perf_counter() - t0, 2)
        nursery.cancel_scope.cancel()
    if interrupted:
        progress("interrupted; scratch databases and streams removed")
        return 1
    print(report.render())
    if opts.json_path:
        report.write_json(opts.json_path)
    return 0


async def _run_scenario(opts: BenchOptions, scenario: str, report: Report) -> None:
    if scenario == "throughput":
        from benchmarks.bench.throughput import cluster_vs_single, run_throughput

        for backend in opts.backends:
            progress(f"  throughput on {backend}")
            await run_throughput(opts, backend, report, profile=backend == opts.stream_backend)
        pooled_change(report)
        cluster_vs_single(report)
    elif scenario == "latency":
        from benchmarks.bench.latency import run_latency

        await run_latency(opts, opts.stream_backend, report)
    elif scenario == "daemon":
        from benchmarks.bench.daemon_process import run_daemon

        await run_daemon(opts, opts.stream_backend, report)
    elif scenario == "runtimes":
        from benchmarks.bench.runtimes import run_runtimes

        await run_runtimes(opts, opts.stream_backend, report)
    elif scenario == "soak":
        from benchmarks.bench.daemon_process import run_soak

        await run_soak(opts, opts.stream_backend, report)
    elif scenario == "backlog":
        from benchmarks.bench.backlog import run_backlog

        await run_backlog(opts, report)
    elif scenario == "idle-in-tx":
        from benchmarks.bench.idle_tx import run_idle_tx

        await run_idle_tx(opts, report)
    elif scenario == "migrate":
        from benchmarks.bench.migrate import run_migrate

        await run_migrate(opts, report)
    elif scenario == "dashboard":
        from benchmarks.bench.dashboard import run_dashboard

        await run_dashboard(opts, report)
    elif scenario == "budget":
        from benchmarks.bench.budget import run_budget

        await run_budget(opts, report)


__all__ = ["BenchOptions", "run_bench"]
