"""``gochatd bench --smoke --scenario migrate``: a tiny live move SQLite -> PostgreSQL through
every phase, and the tracking-cost variants, against real SQLite and PostgreSQL. The rows
are printed and in the JSON with finite numbers; the counts prove every phase moved what it
should. Performance is not asserted (only meaningful at full size on a quiet machine)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from benchmarks.bench.options import SMOKE
from benchmarks.bench.report import ROWS

from tests.support.daemon_process import assert_clean, run_cli

PG_DSN = os.environ.get("GOCHAT_TEST_PG_DSN", "postgresql://root@127.0.0.1:5432/test")
#: About 3 s on a quiet two-core machine.
DEADLINE_S = 120


def test_bench_migrate_smoke_prints_its_rows(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = run_cli(["bench", "--smoke", "--scenario", "migrate", "--json", str(out),
                      "--database-url", PG_DSN], timeout_s=DEADLINE_S)
    assert result.returncode == 0, f"stdout={result.stdout[-4000:]}\nstderr={result.stderr[-4000:]}"
    assert_clean(result.stdout + result.stderr, "bench output")

    doc = json.loads(out.read_text())
    rows = {row["id"]: row for row in doc["rows"]}
    migrate_rows = [row for row in ROWS if row.scenario == "migrate"]
    assert len(migrate_rows) == 10
    printed = {line.split("  ")[0].rstrip(): line for line in result.stdout.splitlines()}
    for row in migrate_rows:
        got = rows[row.id]
        assert isinstance(got["value"], float) and math.isfinite(got["value"]), got
        assert got["target"] == "report" and got["result"] == "info", got
        line = printed.get(row.figure)
        assert line is not None, f"row {row.id!r} missing from the printed table"
        assert line.endswith("info") and row.unit in line, line
    # The other scenarios did not run.
    assert all(r["result"] == "not run" for r in doc["rows"] if r["scenario"] != "migrate")

    f = doc["figures"]
    jobs = SMOKE.migrate_jobs
    assert f["migrate.jobs"] == jobs and f["migrate.tenants"] == 4
    # Copy moved every seeded row (jobs, replies, one queue pause, two periodic slots);
    # catch-up applied exactly the live writes; validate compared every row (the live writes
    # pruned as many jobs as they added).
    assert f["migrate.copy_rows"] == jobs + jobs // 10 + 3
    assert f["migrate.catch_up_rows"] == f["migrate.live_writes"] > 0
    assert f["migrate.validate_rows"] == f["migrate.copy_rows"]
    assert f["migrate.cutover_final_catch_up_rows"] == f["migrate.cutover_tail_writes"] > 0
    assert f["migrate.cutover_frozen_ms"] > 0
    # Each tracking-cost variant is what it claims: the baseline (as migrated) numbered
    # nothing; the tracking one numbered every row it enqueued (SQLite's insert trigger
    # draws a second number through the update trigger, hence at least).
    enqueued = 20 + SMOKE.migrate_rounds * (SMOKE.migrate_samples
                                            + SMOKE.migrate_batches * SMOKE.migrate_batch)
    for dialect in ("sqlite", "postgres"):
        assert f[f"migrate.{dialect}_shipped_changes_numbered"] == 0
        assert f[f"migrate.{dialect}_tracking_changes_numbered"] >= enqueued
        for variant in ("shipped", "tracking"):
            rounds = f[f"migrate.{dialect}_{variant}_rounds_p50_p99_us"]
            assert len(rounds) == SMOKE.migrate_rounds
            assert all(0 < p50 <= p99 for p50, p99 in rounds), rounds
