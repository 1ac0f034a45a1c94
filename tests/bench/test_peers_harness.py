"""The peer comparison harness (``python -m benchmarks.peers``), run against gochatd itself.

The full comparison needs the peers' own venv (and PyPI to fill it), so CI does not run it.
What CI checks here needs no network: one rep of the embedded-default row, a real ``gochatd
serve`` child on a SQLite file driven through the same adapter contract and phases as every
peer, using this venv's interpreter; then the report built from that row. Performance is not
asserted: only that each phase measured what it says it measured.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.peers import phases, report, systems
from benchmarks.peers.records import RecordTail, percentile

REPO = Path(__file__).resolve().parents[2]
N = 200
LAT_N = 20


@pytest.mark.slow
def test_one_rep_of_gochatd_sqlite_measures_every_phase(tmp_path: Path) -> None:
    settings = phases.RunSettings(
        python=sys.executable, repo=str(REPO), run_dir=str(tmp_path), n=N, lat_n=LAT_N,
        lat_spacing_ms=5.0, phase_timeout_s=60,
    )
    row = phases.run_rep(systems.SYSTEMS["gochatd-sqlite"], 1, settings)
    log = (tmp_path / "gochatd-sqlite_rep1.log").read_text(errors="replace")
    assert row["error"] is None, f"{row}\n{log[-4000:]}"

    # Every job of every phase started exactly once, and nothing else was recorded.
    tail = RecordTail(str(tmp_path / "gochatd-sqlite_rep1.rec"))
    tail.poll()
    assert tail.bad_lines == 0
    for phase, n in ((1, N), (2, N), (3, LAT_N)):
        assert sorted(s.idx for s in tail.starts[phase]) == list(range(n)), f"phase {phase}"
        assert row[f"duplicates_phase{phase}"] == 0
    # Drain started from a backlog: every phase-1 job was enqueued before the first start.
    assert max(s.t_enq for s in tail.starts[1]) < min(s.t_start for s in tail.starts[1])
    for key in ("enqueue_jobs_s", "drain_jobs_s", "drain_incl_start_jobs_s", "e2e_jobs_s",
                "e2e_producer_jobs_s", "lat_p50_ms", "lat_p99_ms"):
        assert isinstance(row[key], float) and math.isfinite(row[key]) and row[key] > 0, key
    assert row["drain_incl_start_jobs_s"] < row["drain_jobs_s"]  # start-up is included
    assert row["lat_p50_ms"] <= row["lat_p95_ms"] <= row["lat_p99_ms"] <= row["lat_max_ms"]
    assert row["sigkilled"] is False, log[-4000:]  # the daemon stopped on one SIGTERM

    run = report.RunInfo(command="python -m benchmarks.peers --systems gochatd-sqlite", started="now",
                         wall_s=1.0, n=N, reps=1, lat_n=LAT_N, lat_spacing_ms=5.0, json_path="x.json",
                         run_dir="runs/x", order=["gochatd-sqlite"])
    infos = {"gochatd-sqlite": {"version": "0.1.0", "workers": "1 x gochatd serve", "producer": "Client",
                                "durability": "SQLite"}}
    text = report.render([row], infos, {"cores": "2"}, run)
    assert f"| **gochatd-sqlite** | 0.1.0 | {N} |" in text
    sqlite_drain = next(line for line in text.splitlines() if line.startswith("| SQLite drain |"))
    assert f"{row['drain_jobs_s']:,.0f} jobs/s" in sqlite_drain
    assert json.loads(report.raw_json([row], infos, {}, run))["medians"]["gochatd-sqlite"]["e2e_jobs_s"] \
        == row["e2e_jobs_s"]


def test_record_tail_reads_appended_lines_and_counts_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "rec"
    tail = RecordTail(str(path))
    tail.poll()  # no file yet: nothing, no error
    path.write_bytes(b"10.5 10.0 0 1\n10.6 10.1 1 1\n10.7 10.2 1")
    tail.poll()
    assert tail.count(1) == 2  # the unterminated third line waits for its newline
    with path.open("ab") as f:
        f.write(b" 1\ngarbage\n")
    tail.poll()
    assert tail.count(1) == 3 and tail.duplicates(1) == 1 and tail.bad_lines == 1
    assert tail.starts[1][0].latency_ms == pytest.approx(500.0)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([], 99) is None


def test_unknown_system_is_one_line_and_exit_2() -> None:
    result = subprocess.run([sys.executable, "-m", "benchmarks.peers", "--systems", "gochatd,warp"],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result
    assert result.stderr.count("\n") == 1 and "unknown system(s) warp" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_report_takes_medians_and_orients_ratios_so_above_one_favours_gochatd() -> None:
    def row(system: str, rep: int, drain: float, p99: float) -> dict[str, object]:
        return {"system": system, "rep": rep, "n": 1000, "error": None, "drain_jobs_s": drain,
                "lat_p99_ms": p99, "duplicates_phase1": 0}

    rows = [row("gochatd", 1, 19_000.0, 1.0), row("pgqueuer", 1, 9_000.0, 3.0),
            row("gochatd", 2, 21_000.0, 1.0), row("pgqueuer", 2, 11_000.0, 3.0),
            row("gochatd", 3, 40_000.0, 9.0), row("pgqueuer", 3, 10_000.0, 3.0)]
    medians = report.summarise(rows, ["gochatd", "pgqueuer"])
    assert medians["gochatd"]["drain_jobs_s"] == 21_000.0 and medians["gochatd"]["lat_p99_ms"] == 1.0
    run = report.RunInfo(command="c", started="s", wall_s=1.0, n=1000, reps=3, lat_n=1,
                         lat_spacing_ms=1.0, json_path="j", run_dir="r", order=["gochatd", "pgqueuer"])
    text = report.render(rows, {}, {}, run)
    ratio_row = next(line for line in text.splitlines() if line.startswith("| pgqueuer | ") and "x |" in line)
    cells = [c.strip() for c in ratio_row.strip("|").split("|")]
    assert cells[2] == "2.10x"  # drain: gochatd 21,000 / pgqueuer 10,000
    assert cells[7] == "3.00x"  # idle p99: pgqueuer 3 ms / gochatd 1 ms
    target = next(line for line in text.splitlines() if line.startswith("| drain vs pgqueuer |"))
    assert "2.10x pgqueuer (10,000)" in target and target.endswith("| met |")
    assert "| drain (first→last) | ≥ 20,000 jobs/s | 21,000 jobs/s | met |" in text
