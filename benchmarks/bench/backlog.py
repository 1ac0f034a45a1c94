"""Claim cost against the size of the backlog (PostgreSQL): a backlog of ``backlog_small``
(10k) and one of ``backlog_big`` (1M) due no-op jobs, each in its own scratch database and
vacuumed+analysed first. Then ``backlog_rounds`` rounds of: one polling claim of 100
(``claim_due_jobs``), one claim of 100 by id (``claim_jobs``, what a stream consumer does)
and one fenced finish of the 200. Each call is timed; the rate is jobs claimed and finished
per second of store time. Talks to the store directly: no daemon, no Redis."""

from __future__ import annotations

import time
import uuid
from typing import Any

from benchmarks.bench.options import BenchOptions
from benchmarks.bench.report import Report
from benchmarks.bench.scratch import Probe, scratch_database
from benchmarks.bench.stats import percentile
from gochatd.model import ClaimedJob, Finish, Outcome
from gochatd.store import JobStore, open_store

BATCH = 100
LEASE_S = 300.0
INSERT_CHUNK = 200_000


async def run_backlog(opts: BenchOptions, report: Report) -> None:
    sizes = opts.sizes
    small = await _measure(opts, sizes.backlog_small)
    big = await _measure(opts, sizes.backlog_big)
    figures: dict[str, Any] = {"small_backlog": sizes.backlog_small,
                               "big_backlog": sizes.backlog_big}
    for name, values in (("small", small), ("big", big)):
        figures.update({f"{name}_{k}": v for k, v in values.items()})
    # The row compares medians: p99 of 50 calls is the slowest one or two, which on a shared
    # machine is noise. Both are in the JSON.
    figures["claim_p50_change_pct"] = _change(small["claim_p50_ms"], big["claim_p50_ms"])
    figures["claim_p99_change_pct"] = _change(small["claim_p99_ms"], big["claim_p99_ms"])
    figures["throughput_change_pct"] = _change(small["jobs_per_s"], big["jobs_per_s"])
    report.put("backlog", figures)


def _change(base: float, other: float) -> float:
    return (other - base) / base * 100


async def _measure(opts: BenchOptions, backlog: int) -> dict[str, float]:
    async with scratch_database("postgres", opts.pg_server) as url:
        store = open_store(url, pool_size=2)
        await store.open()
        probe = Probe(url)
        try:
            await store.migrate()
            left = backlog
            while left > 0:
                await probe.fetch("bench_insert_backlog", count=min(INSERT_CHUNK, left))
                left -= INSERT_CHUNK
            await probe.fetch("bench_vacuum")
            top = await probe.max_job_id()
            return await _rounds(store, opts.sizes.backlog_rounds, top)
        finally:
            await probe.close()
            await store.close()


async def _rounds(store: JobStore, rounds: int, top_id: int) -> dict[str, float]:
    owner = f"bench-{uuid.uuid4().hex[:6]}"
    due_ms: list[float] = []
    by_id_ms: list[float] = []
    finish_ms: list[float] = []
    claimed = 0
    busy_s = 0.0
    next_id = top_id
    for _ in range(rounds):
        t0 = time.perf_counter()
        polled = await store.claim_due_jobs(["default"], BATCH, owner, LEASE_S)
        t1 = time.perf_counter()
        # The newest ids, which the polling claim (oldest first) has not reached.
        ids = list(range(next_id, next_id - BATCH, -1))
        next_id -= BATCH
        streamed = await store.claim_jobs(ids, owner, LEASE_S)
        t2 = time.perf_counter()
        await store.finish_jobs([_completed(c) for c in (*polled, *streamed)])
        t3 = time.perf_counter()
        due_ms.append((t1 - t0) * 1000)
        by_id_ms.append((t2 - t1) * 1000)
        finish_ms.append((t3 - t2) * 1000)
        claimed += len(polled) + len(streamed)
        busy_s += t3 - t0
    claim_ms = due_ms + by_id_ms
    return {
        "claim_p50_ms": percentile(claim_ms, 50), "claim_p99_ms": percentile(claim_ms, 99),
        "claim_due_p99_ms": percentile(due_ms, 99), "claim_by_id_p99_ms": percentile(by_id_ms, 99),
        "finish_p99_ms": percentile(finish_ms, 99), "jobs_per_s": claimed / busy_s,
        "claimed": float(claimed),
    }


def _completed(claimed: ClaimedJob) -> Finish:
    return Finish(claimed.id, claimed.lease_owner, claimed.fence, Outcome.COMPLETED,
                  claimed.job.tenant_id)
