"""The chaos runner's smoke run as part of the test suite: every scenario against a fleet
of real daemons, a private PostgreSQL cluster and redis-server, in a few minutes."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
#: The smoke run takes about nine minutes on a two-core machine (the pressure cells and the
#: slow network about 30 s each: 6 s phases, a 3,000-job burst).
DEADLINE_S = 900


def _failures(report: Path, out: str) -> str:
    """The failed scenarios' violations first (the whole output is longer than a CI log
    keeps), then the output's progress lines and its tail."""
    lines: list[str] = []
    if report.exists():
        for scenario in json.loads(report.read_text())["scenarios"]:
            if not scenario["ok"]:
                lines.append(f"{scenario['name']}: {scenario['violations']} "
                             f"notes={json.dumps(scenario['notes'])[:1500]}")
    lines += [line for line in out.splitlines() if line.startswith("chaos: ")]
    return "\n".join(lines) + "\n" + out[-3000:]


@pytest.mark.slow
def test_chaos_smoke_all_scenarios_hold_the_invariants(tmp_path: Path) -> None:
    report = tmp_path / "chaos.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.chaos", "--scenario", "all", "--smoke",
         "--report", str(report), "--pg-set", "shared_preload_libraries=pg_stat_statements"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        out, _ = proc.communicate(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the runner cleans up its processes and cluster
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        pytest.fail(f"the chaos smoke run took longer than {DEADLINE_S}s:\n{out[-6000:]}")
    assert proc.returncode == 0, _failures(report, out)
    doc = json.loads(report.read_text())
    assert doc["ok"] is True
    names = [s["name"] for s in doc["scenarios"]]
    assert len(names) >= 13 and len(set(names)) == len(names), names
    for scenario in doc["scenarios"]:
        where = f"{scenario['name']}: {scenario['violations']}"
        assert scenario["ok"] is True, where
        assert scenario["lost"] == 0, where
        assert scenario["stale_commits_accepted"] == 0, where
        assert scenario["jobs"] > 0, where
        assert scenario["maintenance"], where
    by_name = {s["name"]: s for s in doc["scenarios"]}
    # Failover: nothing acknowledged is lost behind a synchronous standby; an asynchronous
    # one loses what it had not received (the scenario holds its WAL sender back).
    assert by_name["pg_failover_sync"]["notes"]["jobs_lost_unreplicated"] == 0
    assert by_name["pg_failover_async"]["notes"]["jobs_lost_unreplicated"] > 0
    assert by_name["pg_disk_full"]["notes"]["cli_exit"] == 1
    assert by_name["redis_maxmemory"]["notes"]["slots_polling"]
    # Pressure: claims keep their pace under long snapshots; a slow link scales with batches.
    assert by_name["active_readers"]["notes"]["throughput_ratio"] >= 0.9
    assert by_name["active_readers"]["notes"]["snapshots_opened"] >= 4
    assert by_name["idle_in_transaction"]["notes"]["throughput_ratio"] >= 0.9
    # --pg-set loaded pg_stat_statements: each pressure phase names its costliest statements.
    top = by_name["idle_in_transaction"]["notes"]["idle_tx"]["top_statements"]
    assert top and all(s["calls"] > 0 for s in top), top
    assert any("background_jobs" in s["query"] for s in top), top
    assert by_name["burst"]["notes"]["burst"]["jobs"] >= 3000
    assert by_name["slow_network"]["notes"]["enqueue_scaling"] >= 5
    assert by_name["slow_network"]["notes"]["leases_expired_or_timed_out"] == 0
    # Callbacks exactly once (issue 25): batches and chains went through kill -9, lease
    # expiry and Redis loss, and the invariant held (its violations fail the scenario above).
    for name in ("crash_recovery", "repeated_kills", "pg_partition", "clock_skew",
                 "redis_restart", "redis_partition"):
        flows = by_name[name]["workflows"]
        assert flows["batches"] > 0 and flows["chains"] > 0, (name, flows)
        assert flows["violations"] == 0 and flows["callbacks_completed"] > 0, (name, flows)
    assert sum(s["workflows"].get("on_success_cancelled", 0) for s in doc["scenarios"]) > 0
    # Every scenario but the priority flood (a load pattern, not a fault) injected faults.
    faults = {s["name"]: sum(s["faults"].values()) for s in doc["scenarios"]}
    assert all(n > 0 for name, n in faults.items() if name != "priority_starvation"), faults
