"""Latency under a steady offered load, on one backend, in-process worker:

- claim latency at 50% of the maximum end-to-end rate: jobs are offered at a fixed rate
  (half of this backend's measured e2e rate) and enqueue->claim is read from the rows
  (``locked_at - created_at``, database clock);
- delayed-job lateness: jobs scheduled ``delayed_ahead_s`` ahead, offered at a steady rate;
  lateness is ``locked_at - scheduled_at`` (database clock).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.bench.inprocess import (
    bench_settings,
    concurrent,
    noop_enqueue,
    paced,
    running_worker,
    wait_completed,
)
from benchmarks.bench.options import BenchOptions
from benchmarks.bench.report import Report
from benchmarks.bench.scratch import Probe, drop_streams, scratch_database, stream_prefix
from benchmarks.bench.stats import StartTracker, summary_ms

#: Delayed jobs are offered over about this long, so the scheduler sees a steady stream.
DELAYED_SPREAD_S = 4.0


async def run_latency(opts: BenchOptions, backend: str, report: Report) -> None:
    sizes = opts.sizes
    redis_url = opts.redis_url if backend == "postgres+redis" else ""
    prefix = stream_prefix()
    figures: dict[str, Any] = {}
    tracker = StartTracker()
    try:
        async with scratch_database(backend, opts.pg_server) as url:
            probe = Probe(url)
            settings = bench_settings(url, redis_url, prefix, opts.concurrency)
            try:
                async with running_worker(settings, tracker) as worker:
                    max_rate = report.figures.get(f"{backend}.e2e_jobs_per_s")
                    if not isinstance(max_rate, float):
                        # No throughput run of this backend: measure the max rate here.
                        t0 = time.perf_counter()
                        made = await concurrent(noop_enqueue(worker.client), sizes.jobs,
                                                opts.producers)
                        await wait_completed(worker, made, timeout_s=600)
                        max_rate = made / (time.perf_counter() - t0)
                    rate = max(1.0, max_rate / 2)
                    before = await probe.max_job_id()
                    done = worker.counters["finished_completed"]
                    offered = await paced(noop_enqueue(worker.client), rate, sizes.half_load_s)
                    await wait_completed(worker, done + offered, timeout_s=600)
                    claim, _ = await probe.job_times_ms(after_id=before)
                    figures["half_load_offered_jobs_per_s"] = rate
                    figures.update(summary_ms(claim, "claim_latency_half_load"))

                    before = await probe.max_job_id()
                    done = worker.counters["finished_completed"]
                    enqueue = noop_enqueue(worker.client, delay_s=sizes.delayed_ahead_s)
                    spread_s = 1.0 if opts.smoke else DELAYED_SPREAD_S
                    delayed_rate = sizes.delayed_jobs / spread_s
                    offered = await paced(enqueue, delayed_rate, sizes.delayed_jobs / delayed_rate)
                    await wait_completed(worker, done + offered, timeout_s=120)
                    _, late = await probe.job_times_ms(after_id=before)
                    figures["delayed_ahead_ms"] = sizes.delayed_ahead_s * 1000
                    figures.update(summary_ms(late, "delayed_lateness"))
            finally:
                await probe.close()
    finally:
        if redis_url:
            await drop_streams(redis_url, prefix)
    report.put(backend, figures)

