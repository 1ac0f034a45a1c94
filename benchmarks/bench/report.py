"""The target table of issue 5, the figures measured against it, and their two outputs: a
printed table (figure, target, measured, pass/miss) and a JSON document.

Every row names the flat figure key it reads (``<backend>.<name>`` or ``<scenario>.<name>``);
scenarios fill ``Report.figures`` and print nothing but ``progress`` lines on stderr."""

from __future__ import annotations

import json
import math
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Check = Callable[[float], bool]


@dataclass(frozen=True, slots=True)
class Row:
    id: str
    figure: str
    target: str
    key: str
    unit: str
    check: Check | None  # None: reported, judged by the reader (documented mechanism)
    scenario: str


def _at_least(limit: float) -> Check:
    return lambda value: value >= limit


def _at_most(limit: float) -> Check:
    return lambda value: value <= limit


def _within(percent: float) -> Check:
    return lambda value: abs(value) <= percent


PG_REDIS = "postgres+redis"

ROWS: tuple[Row, ...] = (
    Row("drain", "drain, backlog of N, first->last", ">= 20,000 jobs/s",
        f"{PG_REDIS}.drain_jobs_per_s", "jobs/s", _at_least(20_000), "throughput"),
    Row("e2e", "end-to-end, 8 producer tasks", ">= 5,000 jobs/s",
        f"{PG_REDIS}.e2e_jobs_per_s", "jobs/s", _at_least(5_000), "throughput"),
    Row("enqueue", "enqueue, 1 job/call, sequential", ">= 2,500 jobs/s",
        f"{PG_REDIS}.enqueue_jobs_per_s", "jobs/s", _at_least(2_500), "throughput"),
    Row("bulk_enqueue", "bulk enqueue (enqueue_many)", ">= 30,000 jobs/s",
        f"{PG_REDIS}.bulk_enqueue_jobs_per_s", "jobs/s", _at_least(30_000), "throughput"),
    Row("idle_p50", "idle enqueue->start p50", "<= 1.5 ms",
        f"{PG_REDIS}.idle_latency_p50_ms", "ms", _at_most(1.5), "throughput"),
    Row("idle_p99", "idle enqueue->start p99", "<= 3 ms",
        f"{PG_REDIS}.idle_latency_p99_ms", "ms", _at_most(3.0), "throughput"),
    Row("claim_p99_half_load", "enqueue->claim p99 at 50% of max e2e", "<= 20 ms",
        f"{PG_REDIS}.claim_latency_half_load_p99_ms", "ms", _at_most(20.0), "latency"),
    Row("delayed_lateness_p99", "delayed-job lateness p99 (claim - due)", "<= 50 ms",
        f"{PG_REDIS}.delayed_lateness_p99_ms", "ms", _at_most(50.0), "latency"),
    Row("sqlite_drain", "SQLite drain", ">= 4,000 jobs/s",
        "sqlite.drain_jobs_per_s", "jobs/s", _at_least(4_000), "throughput"),
    Row("sqlite_e2e", "SQLite end-to-end", ">= 3,000 jobs/s",
        "sqlite.e2e_jobs_per_s", "jobs/s", _at_least(3_000), "throughput"),
    Row("polling_e2e", "PG polling (no Redis) end-to-end", ">= 3,000 jobs/s",
        "postgres.e2e_jobs_per_s", "jobs/s", _at_least(3_000), "throughput"),
    Row("polling_idle_p99", "PG polling idle enqueue->start p99", "<= 20 ms",
        "postgres.idle_latency_p99_ms", "ms", _at_most(20.0), "throughput"),
    *(Row(f"{pooled.replace('+', '_')}_{name}", f"{name}: {pooled} vs {direct} (change)",
          "within 15 %", f"{pooled}.{name}_change_pct", "%", lambda v: v >= -15.0, "throughput")
      for direct, pooled in (("postgres+redis", "pgbouncer+redis"), ("postgres", "pgbouncer"))
      for name in ("drain", "e2e")),
    Row("redis_cluster_drain", "Redis Cluster drain vs single Redis (change)", "within 15 %",
        "redis_cluster.drain_change_pct", "%", _at_least(-15.0), "throughput"),
    Row("redis_cluster_e2e", "Redis Cluster end-to-end vs single Redis (change)",
        "within 15 %", "redis_cluster.e2e_change_pct", "%", _at_least(-15.0), "throughput"),
    Row("daemon_e2e", "end-to-end, 8 producers, gochatd serve process", ">= 5,000 jobs/s",
        "daemon.e2e_jobs_per_s", "jobs/s", _at_least(5_000), "daemon"),
    Row("cpu_per_job", "daemon CPU per job (serve process, e2e)", "<= 150 us",
        "daemon.cpu_us_per_job", "us", _at_most(150.0), "daemon"),
    Row("sync_enqueue", "SyncClient.enqueue, 1 job/call, sequential", ">= 2,500 jobs/s",
        "runtimes.sync_enqueue_jobs_per_s", "jobs/s", _at_least(2_500), "runtimes"),
    Row("asyncio_client", "asyncio Client vs Trio Client, sequential (change)", ">= -10 %",
        "runtimes.asyncio_client_change_pct", "%", _at_least(-10.0), "runtimes"),
    Row("asyncio_handler", "asyncio handler CPU over a Trio handler, per job", "<= 50 us",
        "runtimes.asyncio_handler_overhead_us", "us", _at_most(50.0), "runtimes"),
    Row("thread_handler", "thread handler CPU over a Trio handler, per job", "report",
        "runtimes.thread_handler_overhead_us", "us", None, "runtimes"),
    Row("rss_steady", "daemon RSS, steady (soak peak)", "<= 100 MB",
        "soak.rss_peak_mb", "MB", _at_most(100.0), "soak"),
    Row("rss_growth", "daemon RSS growth, job 100k -> 1M of the soak", "< 5 %",
        "soak.rss_growth_pct", "%", lambda v: v < 5.0, "soak"),
    Row("backlog_claim_latency", "claim p50, 1M backlog vs 10k (change)", "within 20 %",
        "backlog.claim_p50_change_pct", "%", _within(20.0), "backlog"),
    Row("backlog_throughput", "claim+finish rate, 1M backlog vs 10k (change)", "within 20 %",
        "backlog.throughput_change_pct", "%", _within(20.0), "backlog"),
    Row("idle_tx_keeps_up", "idle-in-tx holder: completed / offered", ">= 99 %",
        "idle_tx.completed_pct", "%", _at_least(99.0), "idle-in-tx"),
    Row("idle_tx_p99_ratio", "idle-in-tx holder: p99 latency / clean p99", "<= 2x",
        "idle_tx.p99_ratio", "x", _at_most(2.0), "idle-in-tx"),
    Row("idle_tx_dead_tuples", "idle-in-tx holder: peak n_dead_tup (reclaimed after)",
        "bounded, documented", "idle_tx.dead_tuples_peak", "tuples", None, "idle-in-tx"),
    *(Row(f"dashboard_{dialect}", f"dashboard queries, 1M jobs, {shown} (slowest p50)",
          "<= 50 ms", f"dashboard.{dialect}.slowest_p50_ms", "ms", _at_most(50.0), "dashboard")
      for dialect, shown in (("postgres", "PG"), ("sqlite", "SQLite"))),
    # Issue 7 sets no targets for a live move: these are reported, judged by the reader.
    Row("migrate_copy", "migrate SQLite -> PG: copy", "report",
        "migrate.copy_rows_per_s", "rows/s", None, "migrate"),
    Row("migrate_catch_up", "migrate SQLite -> PG: catch-up", "report",
        "migrate.catch_up_rows_per_s", "rows/s", None, "migrate"),
    Row("migrate_validate", "migrate SQLite -> PG: validate (both sides)", "report",
        "migrate.validate_rows_per_s", "rows/s", None, "migrate"),
    Row("migrate_frozen", "migrate SQLite -> PG: cutover, writes frozen", "report",
        "migrate.cutover_frozen_ms", "ms", None, "migrate"),
    *(row for dialect, shown in (("sqlite", "SQLite"), ("postgres", "PG")) for row in (
        Row(f"tracking_{dialect}_p50_route", f"tracking cost, {shown} enqueue p50 (tracking)",
            "report", f"migrate.{dialect}_tracking_p50_delta_us", "us", None, "migrate"),
        Row(f"tracking_{dialect}_p99_route", f"tracking cost, {shown} enqueue p99 (tracking)",
            "report", f"migrate.{dialect}_tracking_p99_delta_us", "us", None, "migrate"),
        Row(f"tracking_{dialect}_batch_route",
            f"tracking cost, {shown} enqueue_many per job (tracking)", "report",
            f"migrate.{dialect}_tracking_batch_delta_pct", "%", None, "migrate"),
    )),
)


def progress(text: str) -> None:
    """One progress line on stderr (the table and JSON are the results)."""
    print(f"[bench] {text}", file=sys.stderr, flush=True)


class Report:
    def __init__(self, meta: dict[str, Any]) -> None:
        self.meta = meta
        self.figures: dict[str, Any] = {}
        self.notes: list[str] = []
        #: Tables of their own (``--scenario budget``), printed after the target table.
        self.sections: list[str] = []

    def put(self, prefix: str, values: dict[str, Any]) -> None:
        for name, value in values.items():
            self.figures[f"{prefix}.{name}"] = value

    def note(self, text: str) -> None:
        self.notes.append(text)

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for row in ROWS:
            raw = self.figures.get(row.key)
            value = float(raw) if isinstance(raw, int | float) and math.isfinite(raw) else None
            if value is None:
                result = "not run"
            elif row.check is None:
                result = "info"
            else:
                result = "pass" if row.check(value) else "miss"
            out.append({
                "id": row.id, "figure": row.figure, "target": row.target, "key": row.key,
                "value": value, "unit": row.unit,
                "result": result, "scenario": row.scenario,
            })
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "meta": {**self.meta, "finished_at": datetime.now(UTC).isoformat(),
                     "python": platform.python_version(), "machine": platform.machine()},
            "rows": self.rows(), "figures": self.figures, "notes": self.notes,
        }

    def write_json(self, path: str) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2, default=str) + "\n",
                              encoding="utf-8")

    def render(self) -> str:
        rows = self.rows()
        width = max(len(r["figure"]) for r in rows)
        lines = [f"gochatd bench ({self.meta.get('sizes', '')})",
                 f"{'figure':{width}}  {'target':20}  {'measured':>14}  result"]
        for r in rows:
            shown = "-" if r["value"] is None else f"{_fmt(r['value'])} {r['unit']}"
            lines.append(f"{r['figure']:{width}}  {r['target']:20}  {shown:>14}  {r['result']}")
        lines.extend(f"note: {n}" for n in self.notes)
        lines.extend(f"\n{section}" for section in self.sections)
        return "\n".join(lines)


def _fmt(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"
