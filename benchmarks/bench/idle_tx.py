"""``--scenario idle-in-tx`` (PostgreSQL): a steady offered load while another connection
sits idle in a transaction that holds a transaction id, so no dead tuple newer than its
snapshot can be removed by (auto)vacuum or page pruning.

1. clean: ``idle_tx_rate`` jobs/s offered for ``idle_tx_clean_s`` (enqueue_many every
   10 ms); enqueue->start latency per job;
2. held: the holder opens its transaction; the same load for ``idle_tx_hold_s`` while
   pg_stat_user_tables is sampled (n_dead_tup, HOT updates); then the holder rolls back;
3. after: one VACUUM (what autovacuum does on its next visit) and a last sample.

"Keeps up": jobs completed within a grace period after the offer ends / jobs offered."""

from __future__ import annotations

import math
import time
from typing import Any

import trio

from benchmarks.bench.inprocess import bench_settings, running_worker
from benchmarks.bench.options import BenchOptions
from benchmarks.bench.report import Report, progress
from benchmarks.bench.scratch import Probe, drop_streams, scratch_database, stream_prefix
from benchmarks.bench.stats import StartTracker, percentile
from gochatd.client.client import Client
from gochatd.new_job import NewJob
from gochatd.worker.service import Worker

TICK_S = 0.01
CATCH_UP_S = 5.0
PROGRESS_EVERY_S = 60.0


async def offer_bulk(client: Client, tracker: StartTracker, rate: float, duration_s: float) -> int:
    """``rate`` jobs/s as one ``enqueue_many`` per 10 ms tick (a gateway's shape)."""
    ticks = max(1, math.floor(duration_s / TICK_S))
    offered = 0
    t0 = trio.current_time()
    for i in range(ticks):
        await trio.sleep_until(t0 + i * TICK_S)
        size = math.floor(rate * TICK_S * (i + 1)) - math.floor(rate * TICK_S * i)
        if size == 0:
            continue
        at = time.perf_counter()
        results = await client.enqueue_many([NewJob("sys:noop", {}) for _ in range(size)])
        for result in results:
            tracker.enqueued(result.job.id, at)
        offered += size
    return offered


async def _phase(worker: Worker, tracker: StartTracker, rate: float,
                 duration_s: float) -> dict[str, float]:
    tracker.reset_latencies()
    done = worker.counters["finished_completed"]
    offered = await offer_bulk(worker.client, tracker, rate, duration_s)
    lag = offered - (worker.counters["finished_completed"] - done)
    with trio.move_on_after(CATCH_UP_S):
        while worker.counters["finished_completed"] - done < offered:  # noqa: ASYNC110
            await trio.sleep(0.01)
    completed = worker.counters["finished_completed"] - done
    lat = list(tracker.latencies_ms)
    return {"offered": float(offered), "completed": float(completed),
            "completed_pct": completed / offered * 100, "lag_at_offer_end": float(lag),
            "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99)}


async def _sample_stats(probe: Probe, samples: list[dict[str, float]], t0: float,
                        interval_s: float) -> None:
    printed_at = -math.inf
    while True:
        sample = await _stats(probe, time.perf_counter() - t0)
        samples.append(sample)
        if sample["t_s"] - printed_at >= PROGRESS_EVERY_S:
            printed_at = sample["t_s"]
            progress(f"  idle-in-tx: {sample['t_s']:.0f} s held, "
                     f"n_dead_tup {sample['n_dead_tup']:,.0f}")
        await trio.sleep(interval_s)


async def _stats(probe: Probe, at_s: float) -> dict[str, float]:
    rows = await probe.fetch("bench_table_stats")
    live, dead, upd, hot, autovac, vac, size = rows[0] if rows else (0,) * 7
    return {"t_s": round(at_s, 2), "n_live_tup": float(live), "n_dead_tup": float(dead),
            "n_tup_upd": float(upd), "n_tup_hot_upd": float(hot),
            "autovacuum_count": float(autovac), "vacuum_count": float(vac),
            "table_bytes": float(size)}


async def run_idle_tx(opts: BenchOptions, report: Report) -> None:
    sizes = opts.sizes
    # PostgreSQL either way: the holder is a PostgreSQL snapshot.
    backend = "postgres+redis" if "postgres+redis" in opts.backends else "postgres"
    redis_url = opts.redis_url if backend == "postgres+redis" else ""
    prefix = stream_prefix()
    tracker = StartTracker()
    figures: dict[str, Any] = {"backend": backend, "rate": sizes.idle_tx_rate,
                               "hold_s": sizes.idle_tx_hold_s}
    try:
        async with scratch_database("postgres", opts.pg_server) as url:
            holder, probe = Probe(url), Probe(url)
            settings = bench_settings(url, redis_url, prefix, opts.concurrency)
            try:
                async with running_worker(settings, tracker) as worker:
                    figures["table_options"] = (await probe.fetch("bench_table_options"))[0][0]
                    clean = await _phase(worker, tracker, sizes.idle_tx_rate, sizes.idle_tx_clean_s)
                    samples: list[dict[str, float]] = []
                    figures["holder_txid"] = await holder.begin_idle_transaction()
                    try:
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(_sample_stats, probe, samples,
                                               time.perf_counter(), sizes.stats_interval_s)
                            held = await _phase(worker, tracker, sizes.idle_tx_rate,
                                                sizes.idle_tx_hold_s)
                            nursery.cancel_scope.cancel()
                        samples.append(await _stats(probe, sizes.idle_tx_hold_s + CATCH_UP_S))
                    finally:
                        await holder.end_idle_transaction()
                await probe.fetch("bench_vacuum")
                after = await _stats(probe, -1)
            finally:
                await holder.close()
                await probe.close()
    finally:
        if redis_url:
            await drop_streams(redis_url, prefix)
    figures.update({f"clean_{k}": v for k, v in clean.items()})
    figures.update({f"held_{k}": v for k, v in held.items()})
    figures["completed_pct"] = held["completed_pct"]
    figures["p99_ratio"] = held["p99_ms"] / clean["p99_ms"]
    peak = max((s["n_dead_tup"] for s in samples), default=0.0)
    figures["dead_tuples_peak"] = peak
    start = samples[0]["n_dead_tup"] if samples else 0.0
    # Dead versions left per job while nothing could be vacuumed (the clean phase's own dead
    # tuples are in the first sample already).
    figures["dead_tuples_per_job_held"] = (peak - start) / held["offered"]
    figures["dead_tuples_after_vacuum"] = after["n_dead_tup"]
    last = samples[-1] if samples else after
    figures["hot_update_pct"] = (last["n_tup_hot_upd"] / last["n_tup_upd"] * 100
                                 if last["n_tup_upd"] else 0.0)
    figures["stat_samples"] = samples
    report.put("idle_tx", figures)
