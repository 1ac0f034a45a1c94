"""``gochatd bench``'s entry point. The benchmarks live outside the runtime package, in the
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
from typing import cast

from gochatd.errors import ConfigError

#: The checkout's root, if this package is ``daemon/`` of a source checkout.
CHECKOUT = Path(__file__).resolve().parent.parent


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
