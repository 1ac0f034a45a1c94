"""``gochatd bench --smoke``: every scenario runs at a tiny size against real PostgreSQL,
SQLite, Redis and a real ``gochatd serve`` child, and the JSON has every row of the target
table with a measured number. Performance itself is not asserted here: the figures are only
meaningful at full size on a quiet machine."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import redis
from benchmarks.bench.report import ROWS

from tests.support.daemon_process import assert_clean, run_cli

PG_DSN = os.environ.get("GOCHAT_TEST_PG_DSN", "postgresql://root@127.0.0.1:5432/test")
#: The smoke run takes about 35 s on a busy two-core machine, plus 1-2 min for the budget
#: (5 min in all at load 12).
DEADLINE_S = 600


@pytest.mark.slow
def test_bench_smoke_measures_every_row_and_cleans_up(tmp_path: Path, redis_url: str) -> None:
    out = tmp_path / "bench.json"
    result = run_cli(
        ["bench", "--smoke", "--pgbouncer", "--json", str(out), "--database-url", PG_DSN,
         "--redis", redis_url],
        timeout_s=DEADLINE_S,
    )
    assert result.returncode == 0, f"stdout={result.stdout[-4000:]}\nstderr={result.stderr[-4000:]}"
    assert_clean(result.stdout + result.stderr, "bench output")

    doc = json.loads(out.read_text())
    rows = {row["id"]: row for row in doc["rows"]}
    assert set(rows) == {row.id for row in ROWS}
    for row in ROWS:
        got = rows[row.id]
        assert isinstance(got["value"], float) and math.isfinite(got["value"]), got
        assert got["result"] == ("info" if row.check is None else got["result"])
        assert got["result"] in {"pass", "miss", "info"}, got
        assert row.figure in result.stdout, f"row {row.id!r} missing from the printed table"
    figures = doc["figures"]
    # Each backend ran its own throughput run, in the dispatch mode it names.
    assert figures["sqlite.mode"] == "polling"
    assert figures["postgres.mode"] == "polling"
    assert figures["postgres+redis.mode"] == "streams"
    assert figures["pgbouncer.mode"] == "polling"  # through a pgbouncer started for the run
    assert figures["pgbouncer+redis.mode"] == "streams"
    assert figures["postgres+redis-cluster.mode"] == "streams"
    # The idle-in-transaction holder really held a snapshot: dead tuples piled up while it
    # was open and a vacuum could remove them once it ended.
    assert figures["idle_tx.dead_tuples_peak"] > 0
    assert figures["idle_tx.dead_tuples_after_vacuum"] < figures["idle_tx.dead_tuples_peak"]
    assert figures["soak.jobs"] == 2000 and figures["soak.rss_end_mb"] > 0

    # The cost budget (issue 22), on its private servers: pgqueuer only with the peers' venv.
    assert {"streams", "polling"} <= set(figures["budget.systems"])
    per_job, stages = figures["budget.per_job"], figures["budget.stages_p50_ms"]
    assert per_job["streams"]["redis.xadd"] >= 1  # every job XADDed, by the client's script
    assert per_job["polling"]["redis_commands"] == 0
    for mode in ("streams", "polling"):
        assert per_job[mode]["pg_statements"] > 0 and per_job[mode]["pg_xacts"] > 0
        assert per_job[mode]["hops.total"] > 0 and per_job[mode]["cpu_us.pg_backends"] >= 0
        assert 0 < stages[mode]["insert_commit"] < stages[mode]["total"]
        assert figures["budget.one_at_a_time"][mode]["hops.total"] > 0
        assert figures["budget.idle"][mode]["cpu_us.daemons"] >= 0
    assert "xadd" in stages["streams"] and "xadd" not in stages["polling"]
    assert set(figures["budget.scale"]) == {"streams 2x100", "polling 2x100", "streams 8x25",
                                            "polling 8x25"}
    assert "cost budget per job" in result.stdout and "scale with workers" in result.stdout

    # Private stream prefixes are deleted at the end.
    client = redis.Redis.from_url(redis_url)
    try:
        assert list(client.scan_iter("gochatd-bench-*")) == []
    finally:
        client.close()


def test_bench_bad_scenario_is_one_line_and_exit_2() -> None:
    result = run_cli(["bench", "--scenario", "throughput,warp-speed"], timeout_s=30)
    assert result.returncode == 2, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "--scenario" in lines[0], result.stderr
    assert result.stdout == ""
    assert_clean(result.stderr)
