"""Scenarios that stress the scheduling rather than break a service: a retry storm and a
flood of high-priority work."""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict

from benchmarks.chaos.scenarios.base import Context, Scenario
from benchmarks.chaos.settings import QUEUES, Timing


def _storm_timing(t: Timing) -> Timing:
    return dataclasses.replace(t, retry_base_s=0.2, retry_cap_s=2.0)


def retry_storm(ctx: Context) -> None:
    """Every job fails twice and then succeeds; a tenth always fails (dead after three
    attempts). No job completes twice, every retry waits a full-jitter backoff:
    uniform(0, min(cap, base * 2^(attempt-1))), so retries spread instead of coming back
    in one wave."""
    n = ctx.opts.jobs
    storm = ctx.enqueue(n, work_s=(0.02, 0.08), fail_times=2)
    doomed = ctx.enqueue(max(3, n // 10), work_s=(0.02, 0.08), fail_times=99, max_attempts=3)
    ctx.fault("injected_failures", detail=f"{2 * len(storm) + 3 * len(doomed)} failures")
    ctx.wait_done()
    rows = ctx.db.query(
        "SELECT attempts, scheduled_at - at FROM chaos_transitions"
        " WHERE old_status = 'running' AND new_status = 'retrying' AND error_class = 'ChaosFailure'")
    delays: dict[int, list[float]] = defaultdict(list)
    for attempt, delay in rows:
        delays[int(attempt)].append(float(delay))
    base, cap = ctx.timing.retry_base_s, ctx.timing.retry_cap_s
    spread: dict[str, dict[str, float]] = {}
    for attempt, values in sorted(delays.items()):
        bound = min(cap, base * 2 ** (attempt - 1))
        spread[str(attempt)] = {
            "retries": len(values), "bound_s": bound, "min_s": round(min(values), 3),
            "max_s": round(max(values), 3), "stdev_s": round(statistics.pstdev(values), 3),
        }
        ctx.check(max(values) <= bound + 0.05,
                  f"attempt {attempt}: a retry waited {max(values):.3f}s, above the {bound}s bound")
        if len(values) >= 10:
            # uniform(0, b) has a standard deviation of b/sqrt(12) ~ 0.29 b
            ctx.check(statistics.pstdev(values) >= 0.15 * bound,
                      f"attempt {attempt}: retry delays not spread (stdev "
                      f"{statistics.pstdev(values):.3f}s for a {bound}s bound)")
    ctx.notes["backoff"] = spread
    ctx.check(sum(len(v) for v in delays.values()) == 2 * len(storm) + 2 * len(doomed),
              "not every injected failure was retried exactly once")
    wrong = int(ctx.db.scalar(
        "SELECT count(*) FROM background_jobs WHERE id = ANY(%s) AND attempts <> 3", [storm + doomed]))
    ctx.check(wrong == 0, f"{wrong} jobs did not end after exactly 3 attempts")
    ctx.probe_maintenance()


def priority_starvation(ctx: Context) -> None:
    """A flood of ``high`` (weight 8) with a backlog of ``low`` (weight 2) behind it, all
    enqueued before the fleet starts. While both queues have work, low must get about its
    weight's share of starts (2/10), neither starved nor ahead of high."""
    high_n = max(ctx.opts.jobs, 300)  # enough starts for the share to mean something
    low_n = max(10, high_n // 2)  # outlasts high at a 2/10 share
    high = ctx.enqueue(high_n, work_s=(0.05, 0.15), queue="high")
    low = ctx.enqueue(low_n, work_s=(0.05, 0.15), queue="low")
    ctx.fleet.start()
    ctx.wait_done()
    rows = ctx.db.query("SELECT job_id, started_at FROM chaos_executions ORDER BY started_at")
    high_set, low_set = set(high), set(low)
    starts = [(float(t), int(j)) for j, t in rows if int(j) in high_set | low_set]
    # While both queues still had work waiting: until the last start of either.
    last_high = max(t for t, j in starts if j in high_set)
    last_low = max(t for t, j in starts if j in low_set)
    window = [j for t, j in starts if t < min(last_high, last_low)]
    low_in_window = sum(1 for j in window if j in low_set)
    share = low_in_window / len(window)
    expected = QUEUES["low"] / (QUEUES["low"] + QUEUES["high"])
    ctx.notes["low_share_while_high_backlogged"] = round(share, 3)
    ctx.notes["low_share_expected"] = round(expected, 3)
    ctx.notes["low_started_in_window"] = low_in_window
    tolerance = 0.12 if ctx.opts.smoke else 0.08
    ctx.check(share >= expected - tolerance,
              f"low starved: {share:.2f} of starts while high was backlogged (weight share {expected:.2f})")
    ctx.check(share <= expected + tolerance,
              f"low ahead of its weight: {share:.2f} of starts (weight share {expected:.2f})")
    ctx.probe_maintenance()


SCENARIOS = [
    Scenario("retry_storm", "many jobs fail and retry at once", retry_storm, timing=_storm_timing),
    Scenario("priority_starvation", "a flood of high with low behind it", priority_starvation,
             start_fleet=False, workflows=False),
]
