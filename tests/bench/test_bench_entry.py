"""``gochatd bench`` lives outside the runtime package (benchmarks/bench): the subcommand finds
it in the checkout it was installed from, whatever the working directory, and without one
says so in one line (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tests.support.daemon_process import GOCHATD, assert_clean, child_env


def _run(argv: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # No PYTHONPATH: the repository root must not be importable by any other way.
    env = child_env(None)
    env.pop("PYTHONPATH")
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=30, check=False,
        stdin=subprocess.DEVNULL,
    )


def test_bench_is_found_from_any_directory(tmp_path: Path) -> None:
    # A bad scenario is refused by the bench's own option parser: the package was loaded.
    proc = _run([GOCHATD, "bench", "--scenario", "nonsense"], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.startswith("gochatd: --scenario: expected a comma-separated list of throughput")
    assert proc.stderr.count("\n") == 1
    assert_clean(proc.stderr, "stderr")


def test_bench_without_a_checkout_says_so_in_one_line(tmp_path: Path) -> None:
    # As from an installed wheel: no benchmarks/ beside the package and none on sys.path.
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "import gochatd.cli.bench\n"
        f"gochatd.cli.bench.CHECKOUT = Path({str(tmp_path)!r})\n"
        "from gochatd.cli.program import main\n"
        "sys.exit(main(['bench', '--smoke']))\n"
    )
    proc = _run([sys.executable, "-c", code], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr == (
        "gochatd: bench needs the benchmarks package of a source checkout (benchmarks/bench/); "
        "run it from a clone installed with pip install -e .\n"
    )
