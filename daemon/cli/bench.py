"""``gochatd bench``'s parser and entry point. The benchmarks live outside the runtime package, in the
source checkout's ``benchmarks/bench/`` (docs/bench.md); a wheel does not ship them.

The package is taken from the checkout this ``gochatd`` was installed from (an editable
install: ``benchmarks/`` sits next to ``daemon/``), else from ``sys.path``. Without it the
command says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

from gochatd.cli.argtypes import positive_float, positive_int
from gochatd.cli.common import run_async
from gochatd.cli.parsing import add_group
from gochatd.errors import ConfigError
from gochatd.obs.logs import configure_logging

#: The checkout's root, if this package is ``daemon/`` of a source checkout (this file is
#: ``daemon/cli/bench.py``).
CHECKOUT = Path(__file__).resolve().parents[2]


def bench_package_path() -> Path | None:
    """The checkout root that holds ``benchmarks/bench``, or None (an installed wheel)."""
    if (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "benchmarks" / "bench").is_dir():
        return CHECKOUT
    return None


def load_run_bench() -> Callable[[argparse.Namespace], Awaitable[int]]:
    root = bench_package_path()
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        module = importlib.import_module("benchmarks.bench")
    except ModuleNotFoundError as exc:
        if exc.name not in ("benchmarks", "benchmarks.bench"):
            raise
        raise ConfigError(
            "bench needs the benchmarks package of a source checkout (benchmarks/bench/); "
            "run it from a clone installed with pip install -e ."
        ) from None
    return cast(Callable[[argparse.Namespace], Awaitable[int]], module.run_bench)


async def run_bench(args: argparse.Namespace) -> int:
    return await load_run_bench()(args)


def add_parser(sub: Any) -> None:
    bench = add_group(sub, "bench", cmd_bench, help="measure every row of the target table")
    bench.add_argument("--scenario", metavar="S[,S…]",
                       help="throughput, latency, daemon, runtimes, backlog, soak, idle-in-tx, "
                       "migrate or all (default: throughput,latency,daemon,runtimes; with --smoke: all)")
    bench.add_argument("--backend", metavar="B[,B…]", default="all",
                       help="sqlite, postgres (polling), postgres+redis, postgres+redis-cluster "
                       "(a 3-master cluster of its own) or all (default); pgbouncer, "
                       "pgbouncer+redis: through a pgbouncer (not in all)")
    bench.add_argument("--pgbouncer", action="store_true",
                       help="throughput also through a pgbouncer (transaction mode) started "
                       "for the run, beside each PostgreSQL backend (docs/pgbouncer.md)")
    bench.add_argument("--smoke", action="store_true",
                       help="every scenario at a tiny size (a check, not a measurement)")
    bench.add_argument("--jobs", type=positive_int, help="jobs per throughput run (10000)")
    bench.add_argument("--soak-jobs", type=positive_int, help="soak length (1000000)")
    bench.add_argument("--backlog-jobs", type=positive_int, help="big backlog (1000000)")
    bench.add_argument("--migrate-jobs", type=positive_int,
                       help="jobs the migrate scenario moves SQLite -> PostgreSQL (1000000)")
    bench.add_argument("--idle-tx-minutes", type=positive_float,
                       help="how long the idle-in-transaction holder holds (10)")
    bench.add_argument("--idle-tx-rate", type=positive_float,
                       help="jobs/s offered during idle-in-tx (1000)")
    bench.add_argument("--concurrency", type=positive_int, default=50)
    bench.add_argument("--producers", type=positive_int, default=8)
    bench.add_argument("--database-url", help="PostgreSQL server (scratch databases are "
                       "created on it and dropped afterwards)")
    bench.add_argument("--redis", metavar="URL", default="",
                       help="Redis for postgres+redis (default redis://127.0.0.1:6379/0; "
                       "streams use a private prefix, deleted afterwards)")
    bench.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    bench.add_argument("--profile", metavar="FILE",
                       help="write a pyinstrument profile of one drain (needs pyinstrument)")
    bench.add_argument("--budget-md", metavar="FILE",
                       help="budget: write its tables into the section of FILE "
                       "(docs/benchmarks.md) that holds them")


def cmd_bench(args: argparse.Namespace) -> int:
    configure_logging("error", "json")
    return run_async(lambda: run_bench(args))
