"""Sustained pressure (issue 26 item 4): the fleet under a steady offered load for
``--pressure-minutes`` per phase while something holds vacuum back, a burst, or an offer
above the fleet's capacity. Each cell reports its figures in the result's notes (rates,
enqueue->start p50/p99, dead tuples and relation sizes before/during/after, RSS)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from benchmarks.chaos.pressure import (
    BulkProducer,
    Offered,
    SnapshotHolders,
    completed_between,
    percentile,
    reset_statements,
    rss_mb,
    start_latencies_ms,
    table_stats,
    top_statements,
)
from benchmarks.chaos.scenarios.base import Context, Scenario
from benchmarks.chaos.settings import Timing

#: The active-readers cell: claim throughput under the readers / clean.
READERS_MIN_RATIO = 0.90
#: Latency cells: p99 under the fault / clean p99 (plus an absolute floor in the smoke run,
#: where a phase is seconds long and one scheduler hiccup is its p99).
P99_MAX_RATIO = 2.0
SMOKE_P99_FLOOR_MS = 150.0
#: After a phase the jobs it offered must all be completed within this long.
CATCH_UP_S = 10.0
SAMPLE_EVERY_S = 5.0


def _polling(workers: int) -> dict[int, dict[str, str]]:
    """The fleet without Redis (PostgreSQL only, as River, pg-boss and Oban run)."""
    return {slot: {"GOCHAT_REDIS_URL": ""} for slot in range(workers)}


def _take(ctx: Context, offered: Offered) -> list[tuple[int, float]]:
    ctx.jobs.update(job_id for job_id, _ in offered.jobs)
    return offered.jobs


def _phase(ctx: Context, name: str, rate: float, seconds: float,
           holders: SnapshotHolders | None = None, queue: str = "default") -> dict[str, Any]:
    """Offer ``rate`` jobs/s for ``seconds`` (holders ticking), then wait for all of them.
    Throughput: jobs completed during the offer / its length."""
    samples: list[dict[str, float]] = []
    pids = [ctx.fleet.pid(s) for s in range(ctx.opts.workers)]
    rss = 0.0
    statements = reset_statements(ctx.db)
    producer = BulkProducer(ctx.db.app_url, None, rate_per_s=rate, queue=queue).start()
    t0 = time.time()
    next_sample = t0
    try:
        while time.time() - t0 < seconds:
            ctx.hold(min(0.5, max(0.0, seconds - (time.time() - t0))))
            if holders is not None:
                holders.tick()
            rss = max(rss, rss_mb(pids))
            if time.time() >= next_sample:
                samples.append({"t_s": round(time.time() - t0, 1), **table_stats(ctx.db)})
                next_sample += SAMPLE_EVERY_S
    finally:
        offered = producer.stop()
    t1 = time.time()
    jobs = _take(ctx, offered)
    ctx.wait_done([j for j, _ in jobs], timeout_s=CATCH_UP_S + seconds)
    done_s = time.time() - t1
    lat = start_latencies_ms(ctx.db, jobs)
    out: dict[str, Any] = {
        "offered": len(jobs), "offered_per_s": round(len(jobs) / seconds, 1),
        "completed_per_s": round(completed_between(ctx.db, t0, t1) / seconds, 1),
        "caught_up_after_s": round(done_s, 2),
        "p50_ms": round(percentile(lat, 50), 1), "p99_ms": round(percentile(lat, 99), 1),
        "rss_max_mb": rss, "dead_tuples_peak": max((s["n_dead_tup"] for s in samples), default=0),
        "stats_end": table_stats(ctx.db),
    }
    if statements:
        out["top_statements"] = top_statements(ctx.db)
    ctx.notes[name] = out
    return out


def _p99_bound(ctx: Context, clean_ms: float) -> float:
    bound = P99_MAX_RATIO * clean_ms
    return max(bound, SMOKE_P99_FLOOR_MS) if ctx.opts.smoke else bound


def active_readers(ctx: Context) -> None:
    """Four overlapping REPEATABLE READ snapshots, each held half a phase and reading:
    nothing a job leaves behind can be vacuumed meanwhile. Claim throughput (completed/s at
    the same offered rate) must stay at 90 % of a clean phase."""
    seconds, rate = ctx.opts.pressure_s, ctx.opts.pressure_rate
    ctx.notes["before"] = table_stats(ctx.db)
    clean = _phase(ctx, "clean", rate, seconds)
    holders = SnapshotHolders(ctx.db.url, readers=4, hold_s=seconds / 2)
    fault = ctx.fault("active_readers", detail=f"4 readers x {seconds / 2:.0f}s")
    holders.start()
    try:
        held = _phase(ctx, "readers", rate, seconds, holders)
    finally:
        holders.stop()
        ctx.healed(fault)
    ctx.notes["snapshots_opened"] = holders.snapshots_opened
    ratio = held["completed_per_s"] / max(clean["completed_per_s"], 1e-9)
    ctx.notes["throughput_ratio"] = round(ratio, 3)
    ctx.check(ratio >= READERS_MIN_RATIO,
              f"claim throughput under readers {ratio:.0%} of clean (bound {READERS_MIN_RATIO:.0%})")
    ctx.db.query("VACUUM background_jobs")  # what autovacuum does once the readers are gone
    ctx.notes["after_vacuum"] = table_stats(ctx.db)
    ctx.probe_maintenance()


def idle_in_transaction(ctx: Context) -> None:
    """One session idle in a transaction that holds a transaction id for a whole phase at
    the offered rate: the fleet keeps up and its p99 enqueue->start stays within 2x clean."""
    seconds, rate = ctx.opts.pressure_s, ctx.opts.pressure_rate
    clean = _phase(ctx, "clean", rate, seconds)
    holder = SnapshotHolders(ctx.db.url, readers=1, hold_s=seconds, idle=True)
    fault = ctx.fault("idle_in_transaction", detail=f"{seconds:.0f}s")
    holder.start()
    try:
        held = _phase(ctx, "idle_tx", rate, seconds, holder)
    finally:
        holder.stop()
        ctx.healed(fault)
    ratio = held["completed_per_s"] / max(clean["completed_per_s"], 1e-9)
    ctx.notes["throughput_ratio"] = round(ratio, 3)
    ctx.notes["p99_ratio"] = round(held["p99_ms"] / max(clean["p99_ms"], 1e-9), 2)
    ctx.check(ratio >= READERS_MIN_RATIO,
              f"did not keep up while idle in transaction: {ratio:.0%} of clean")
    bound = _p99_bound(ctx, clean["p99_ms"])
    ctx.check(held["p99_ms"] <= bound,
              f"p99 enqueue->start {held['p99_ms']:.0f} ms while idle in transaction "
              f"(bound {bound:.0f} ms)")
    ctx.probe_maintenance()


def _drain_rate(ctx: Context, ids: list[int], since: float | None = None) -> float:
    """Jobs/s from ``since`` (default: the first start among ``ids``) to their last end."""
    ctx.wait_done(ids)
    first, last = ctx.db.executions(
        "SELECT min(started_at), max(ended_at) FROM chaos_executions WHERE job_id = ANY(%s)",
        [ids])[0]
    return len(ids) / max(float(last) - (float(first) if since is None else since), 1e-6)


def overload(ctx: Context) -> None:
    """The fleet's clean drain rate first (a backlog enqueued at once); then producers at
    twice that for a phase; then the backlog they built must drain at least at 90 % of the
    clean rate, with dead tuples bounded by the jobs that went through."""
    seconds = ctx.opts.pressure_s
    ctx.notes["before"] = table_stats(ctx.db)
    backlog = ctx.enqueue(max(200, int(ctx.opts.pressure_rate * min(seconds, 20.0))),
                          work_s=(0.0, 0.0), effect=False)
    clean_rate = _drain_rate(ctx, backlog)
    ctx.notes["clean_drain_per_s"] = round(clean_rate, 1)
    fault = ctx.fault("overload", detail=f"{2 * clean_rate:.0f} jobs/s offered")
    offered = _offer_for(ctx, 2 * clean_rate, seconds)
    ctx.healed(fault)
    stop = time.time()
    left = [int(r[0]) for r in ctx.db.query(
        "SELECT id FROM background_jobs WHERE id = ANY(%s) AND status IN ('queued', 'retrying',"
        " 'running')", [[j for j, _ in offered]])]
    ctx.notes["backlog_at_offer_end"] = len(left)
    rate = _drain_rate(ctx, left, stop) if left else float("inf")
    ctx.notes["backlog_drain_per_s"] = round(rate, 1) if left else None
    # Jobs the sweep dispatched again: among them those whose entries the cap trimmed unread.
    ctx.notes["swept_back_jobs"] = sum(int(e.get("jobs", 0))
                                       for e in ctx.fleet.events("sweep_redispatched"))
    # The full run judges 90 %; the smoke's phases last seconds, and back-to-back smoke runs
    # on one quiet machine measured 0.65-1.44 of clean: it checks the mechanism at 75 %.
    share = 0.75 if ctx.opts.smoke else 0.9
    ctx.check(rate >= share * clean_rate,
              f"the backlog drained at {rate:.0f} jobs/s, below {share:.0%} of the clean "
              f"{clean_rate:.0f}")
    after = table_stats(ctx.db)
    ctx.notes["after"] = after
    processed = len(backlog) + len(offered)
    ctx.check(ctx.notes["during"]["dead_tuples_peak"] <= 3 * processed,
              f"{ctx.notes['during']['dead_tuples_peak']:.0f} dead tuples for {processed} jobs")
    ctx.probe_maintenance()


def _capped_streams(t: Timing) -> Timing:
    """A stream cap below the backlog the offer builds (smoke: about 1,400; full: tens of
    thousands), as ``stream_maxlen`` is below a long overload's: ``MAXLEN`` trims entries
    nobody read, and the sweep must bring their jobs back (at 10 minutes with the default
    cap, 80,083 jobs once stayed queued for good behind an empty stream)."""
    return dataclasses.replace(t, stream_maxlen=OVERLOAD_STREAM_MAXLEN)


#: ``worker.redis.stream_maxlen`` of the fleet in ``overload``.
OVERLOAD_STREAM_MAXLEN = 1_000


def _offer_for(ctx: Context, rate: float, seconds: float) -> list[tuple[int, float]]:
    producer = BulkProducer(ctx.db.app_url, ctx.db.redis_url, rate_per_s=rate).start()
    peak, t0 = 0.0, time.time()
    try:
        while time.time() - t0 < seconds:
            ctx.hold(min(SAMPLE_EVERY_S, max(0.0, seconds - (time.time() - t0))))
            peak = max(peak, table_stats(ctx.db)["n_dead_tup"])
    finally:
        offered = producer.stop()
    ctx.notes["during"] = {"offered": len(offered.jobs), "dead_tuples_peak": peak,
                           "stats_end": table_stats(ctx.db)}
    return _take(ctx, offered)


def burst(ctx: Context) -> None:
    """A burst of ``--burst-jobs`` in ``default`` while a trickle arrives in ``high``: the
    burst drains with every daemon's RSS bounded, and the trickle's p99 enqueue->start stays
    within 2x its p99 before the burst."""
    seconds = min(ctx.opts.pressure_s, 30.0)
    clean = _phase(ctx, "trickle_clean", TRICKLE_PER_S, seconds, queue="high")
    pids = [ctx.fleet.pid(s) for s in range(ctx.opts.workers)]
    rss_before = rss = rss_mb(pids)
    fault = ctx.fault("burst", detail=f"{ctx.opts.burst_jobs} jobs")
    t0 = time.time()
    ids = ctx.enqueue(ctx.opts.burst_jobs, work_s=(0.0, 0.0), effect=False)
    enqueued_s = time.time() - t0
    producer = BulkProducer(ctx.db.app_url, ctx.db.redis_url, rate_per_s=TRICKLE_PER_S,
                            queue="high").start()
    try:
        deadline = time.monotonic() + ctx.drain_timeout_s() + len(ids) / 20.0
        while ctx.db.unfinished(ids) > 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the burst of {len(ids)} jobs did not drain")
            ctx.hold(1.0)
            rss = max(rss, rss_mb(pids))
    finally:
        offered = producer.stop()
        trickle = _take(ctx, offered)
        ctx.healed(fault)
    drained_s = time.time() - t0
    ctx.wait_done([j for j, _ in trickle])
    lat = start_latencies_ms(ctx.db, trickle)
    p99 = percentile(lat, 99)
    ctx.notes["burst"] = {
        "jobs": len(ids), "enqueued_in_s": round(enqueued_s, 1), "drained_in_s": round(drained_s, 1),
        "drain_per_s": round(len(ids) / drained_s, 1), "rss_before_mb": rss_before,
        "rss_max_mb": rss, "trickle_jobs": len(trickle), "trickle_p99_ms": round(p99, 1),
        "trickle_p50_ms": round(percentile(lat, 50), 1),
        "trickle_call_p50_ms": round(percentile(offered.calls_ms, 50), 1),
        "trickle_call_p99_ms": round(percentile(offered.calls_ms, 99), 1),
        "stats_end": table_stats(ctx.db)}
    bound = _p99_bound(ctx, clean["p99_ms"])
    ctx.check(p99 <= bound, f"trickle p99 {p99:.0f} ms during the burst (bound {bound:.0f} ms)")
    ctx.check(rss <= rss_before + RSS_GROWTH_MAX_MB,
              f"a daemon's RSS grew to {rss:.0f} MB during the burst (from {rss_before:.0f})")
    ctx.probe_maintenance()


#: The burst cell's trickle into another queue, jobs/s.
TRICKLE_PER_S = 20.0
#: A daemon's RSS may grow this much while a burst drains (its memory is bounded by its
#: concurrency and batch sizes, not by the backlog).
RSS_GROWTH_MAX_MB = 150.0


SCENARIOS = [
    Scenario("active_readers", "four overlapping REPEATABLE READ snapshots under a steady load",
             active_readers, slot_env=_polling, workflows=False),
    Scenario("idle_in_transaction", "a session idle in a transaction under a steady load",
             idle_in_transaction, slot_env=_polling, workflows=False),
    Scenario("overload", "producers at twice the fleet's capacity", overload,
             timing=_capped_streams, workflows=False),
    Scenario("burst", "a burst of jobs in one queue, a trickle in another", burst,
             workflows=False),
]
