"""Primary failover: the scenario's own primary and streaming standby (``PgPair``); the
daemons, the producer and the handlers' recorder use the multi-host URL with
``target_session_attrs=read-write``. Mid-run, with a producer enqueueing and handlers in
flight, every process of the primary is SIGKILLed; after a pause (the operator, or the
failover tool, deciding) the standby is promoted. Nobody restarts a daemon.

Synchronous standby: nothing a producer saw committed may be lost. Asynchronous standby:
what was committed on the primary but not streamed yet is gone; the scenario counts it
(``jobs_lost_unreplicated``) and the rest of the invariants hold for what is left."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

from benchmarks.chaos.invariants import owner_pid
from benchmarks.chaos.pg_pair import PgPair
from benchmarks.chaos.postgres import APP_ROLE
from benchmarks.chaos.producer import Producer
from benchmarks.chaos.scenarios.base import Context, OwnCluster, Scenario


def _running(ctx: Context) -> int:
    return int(ctx.db.executions(
        "SELECT count(*) FROM chaos_executions WHERE ended_at IS NULL")[0][0])


def _listening(ctx: Context) -> int:
    return int(ctx.db.scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE usename = %s AND query ILIKE 'LISTEN%%'",
        [APP_ROLE]))


def _first_after(ctx: Context, t: float) -> float | None:
    value = ctx.db.executions(
        "SELECT min(started_at) FROM chaos_executions WHERE started_at > %s", [t])[0][0]
    return None if value is None else float(value)


def failover(ctx: Context) -> None:
    pair = cast(PgPair, ctx.cluster)
    smoke = ctx.opts.smoke
    rate = 40.0 if smoke else 60.0
    before_s, down_s, after_s = (1.5, 1.0, 2.0) if smoke else (8.0, 3.0, 10.0)
    lag_s = 0.5 if smoke else 2.0
    producer = Producer(pair.url(ctx.db.name, APP_ROLE), ctx.db.redis_url, rate_per_s=rate,
                        work_s=(0.1, 0.4), seed=f"{ctx.opts.seed}:{ctx.scenario.name}")
    producer.start()
    try:
        ctx.hold(before_s)  # load before the fault
        ctx.wait(lambda: _running(ctx) >= len(ctx.fleet.daemons), timeout_s=30,
                 what="handlers in flight", interval_s=0.02)
        if pair.synchronous:
            killed_at = time.time()
            pids = pair.kill_primary()
            dead_at = time.time()
        else:
            with pair.lagging():  # the standby falls behind, then the primary dies
                ctx.hold(lag_s)
                killed_at = time.time()
                pids = pair.kill_primary()
                dead_at = time.time()
            ctx.notes["standby_lag_s"] = lag_s
        fault = ctx.fault("pg_primary_kill", detail=f"{len(pids)} server processes SIGKILLed")
        ctx.hold(down_s)  # the failover decision
        pair.promote()
        promoted_at = time.time()
        ctx.healed(fault)
        ctx.wait(lambda: producer.acked_after(promoted_at) > 0, timeout_s=60,
                 what="an enqueue acknowledged by the new primary")
        ctx.hold(after_s)  # load after the promotion
    finally:
        produced = producer.stop()
    _account(ctx, pair, produced.acked, killed_at, dead_at)
    _rolled_back(ctx, pair, dead_at)
    ctx.notes["enqueues_refused"] = dict(produced.refused)
    resumed = ctx.wait(lambda: _first_after(ctx, promoted_at), timeout_s=60,
                       what="a job started on the new primary")
    enqueue_back = min(at for _, at, _ in produced.acked if at > promoted_at)
    ctx.notes["outage_s"] = round(promoted_at - killed_at, 2)
    ctx.notes["resume_after_promotion_s"] = round(resumed - promoted_at, 3)
    ctx.notes["enqueue_after_promotion_s"] = round(enqueue_back - promoted_at, 3)
    ctx.check(not ctx.fleet.unexpected_exits(), "a daemon exited across the failover")
    ctx.wait_done()
    try:  # every daemon LISTENs again, on the new primary
        ctx.wait(lambda: _listening(ctx) >= len(ctx.fleet.daemons), timeout_s=30,
                 what="every daemon's LISTEN session on the new primary")
    except AssertionError as exc:
        ctx.check(False, f"LISTEN did not come back after the failover: {exc}")
    ctx.notes["listen_sessions_on_new_primary"] = _listening(ctx)
    ctx.probe_maintenance()


def _account(ctx: Context, pair: PgPair, acked: list[tuple[int, float, float]],
             killed_at: float, dead_at: float) -> None:
    """Acknowledged jobs missing on the new primary: a violation with a synchronous
    standby, the documented loss with an asynchronous one."""
    ids = [i for i, _, _ in acked]
    present = {int(r[0]) for r in ctx.db.query(
        "SELECT id FROM background_jobs WHERE id = ANY(%s)", [ids])}
    missing = [(i, at) for i, at, _ in acked if i not in present]
    for job_id, _, work in acked:
        if job_id in present:
            ctx.jobs.add(job_id)
            ctx.with_effect.add(job_id)
            ctx.work_s_total += work
    last = max((at for _, at in missing), default=None)
    ctx.notes["jobs_acknowledged"] = len(acked)
    ctx.notes["jobs_lost_unreplicated"] = len(missing)
    if last is not None:
        ctx.notes["lost_window_s"] = round(killed_at - min(at for _, at in missing), 3)
    if pair.synchronous:
        ctx.check(not missing, f"{len(missing)} acknowledged jobs are gone after the failover "
                               f"to a synchronous standby")
    ctx.check(all(at < dead_at for _, at in missing),
              "a job acknowledged after the primary was dead is missing")


def _rolled_back(ctx: Context, pair: PgPair, dead_at: float) -> None:
    """Jobs whose claim on the old primary is not on the new one: a handler ran (the record
    is kept off the failing pair) under a claim the promotion forgot, so the new primary
    hands out that fence again. A synchronous standby forgets none; an asynchronous one
    forgets what it had not received: those jobs are the documented loss, counted and left
    out of the invariants (their fence ran twice, their write may be gone)."""
    ran = ctx.db.executions(
        "SELECT DISTINCT job_id, fence, pid FROM chaos_executions WHERE started_at < %s",
        [dead_at])
    claimed_at: dict[tuple[int, int, int | None], float] = {}
    for j, f, o, at in ctx.db.query(
            "SELECT job_id, fence, locked_by, at FROM chaos_transitions"
            " WHERE new_status = 'running' ORDER BY id"):
        claimed_at.setdefault((int(j), int(f), owner_pid(o)), float(at))
    # Forgotten: no such claim on the new primary, or only one made after the old primary
    # died (the same daemon claimed the job again and got the same fence).
    forgotten = {int(j) for j, f, p in ran
                 if claimed_at.get((int(j), int(f), int(p)), math.inf) > dead_at}
    forgotten -= ctx.ghosts
    ctx.notes["jobs_rolled_back"] = len(forgotten)
    if pair.synchronous:
        ctx.check(not forgotten, f"{len(forgotten)} claims were forgotten by the failover to a "
                                 f"synchronous standby: {sorted(forgotten)[:5]}")
    else:
        ctx.excluded |= forgotten


def _pair(synchronous: bool) -> Callable[[Path], OwnCluster]:
    def make(base: Path) -> OwnCluster:
        return PgPair(base, synchronous=synchronous)

    return make


SCENARIOS = [
    Scenario("pg_failover_sync", "kill -9 the primary, promote its synchronous standby",
             failover, own_cluster=_pair(True),
             claim_loss_possible=True),
    Scenario("pg_failover_async", "kill -9 the primary, promote its asynchronous standby",
             failover, own_cluster=_pair(False),
             claim_loss_possible=True),
]
