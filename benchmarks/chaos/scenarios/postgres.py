"""Scenarios that break PostgreSQL: a restart, killed backends, one daemon partitioned
from the database, and connection exhaustion."""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Any

import psycopg

from benchmarks.chaos.postgres import APP_ROLE, MAX_CONNECTIONS, RESERVED
from benchmarks.chaos.proxy import Mode
from benchmarks.chaos.scenarios.base import Context, Scenario
from benchmarks.chaos.settings import Timing
from benchmarks.pgbouncer import PgBouncer, pgbouncer_binary


def _running(ctx: Context) -> int:
    return int(ctx.db.scalar("SELECT count(*) FROM chaos_executions WHERE ended_at IS NULL"))


def postgres_restart(ctx: Context) -> None:
    """``pg_ctl restart -m fast`` with handlers in flight: every connection is cut; the
    daemons ride it out (no exit) and nothing is lost."""
    restarts = 1 if ctx.opts.smoke else 3
    batch = max(10, ctx.opts.jobs // restarts)
    for _ in range(restarts):
        ctx.enqueue(batch, work_s=(0.2, 0.6))
        ctx.wait(lambda: _running(ctx) >= len(ctx.fleet.daemons), timeout_s=30,
                 what="handlers in flight", interval_s=0.02)
        fault = ctx.fault("pg_restart")
        ctx.services.cluster.restart("fast")
        ctx.healed(fault)
    ctx.wait_done()
    ctx.probe_maintenance()


def pg_backend_kill(ctx: Context) -> None:
    """``pg_terminate_backend`` on every session of the daemons (and their handlers'
    connections) over and over."""
    rounds = 3 if ctx.opts.smoke else 8
    every_s = 1.0 if ctx.opts.smoke else 2.0
    batch = max(10, ctx.opts.jobs // (rounds + 1))
    ctx.enqueue(batch, work_s=(0.1, 0.5))
    terminated = 0
    for _ in range(rounds):
        ctx.hold(every_s)  # the fault's own rhythm
        ctx.enqueue(batch, work_s=(0.1, 0.5))
        at = time.time()
        killed = ctx.db.terminate_backends()
        terminated += killed
        ctx.fault("pg_backend_kill", at=at, detail=f"{killed} sessions")
    ctx.notes["sessions_terminated"] = terminated
    ctx.check(terminated > 0, "no daemon session was there to terminate")
    ctx.wait_done()
    ctx.probe_maintenance()


def _late_finishers(ctx: Context, slot: int) -> int:
    """w0's handlers in flight that write nothing of their own (no effect: a workflow job
    always writes one, and reads its dependencies through the daemon): cut off, they end
    at once and their finish waits in the daemon's finisher, the late commit to reject."""
    running = ctx.db.executions(
        "SELECT job_id FROM chaos_executions WHERE pid = %s AND ended_at IS NULL",
        [ctx.fleet.pid(slot)])
    return sum(1 for (job_id,) in running if int(job_id) not in ctx.with_effect)


def pg_partition(ctx: Context) -> None:
    """Black-hole w0's PostgreSQL connections for longer than a lease, then heal. Its
    leases expire and the others re-run its jobs; when the partition heals, w0's held
    completions reach the database and are rejected by fence. A full run then also refuses
    w0's connections (fast failures instead of a hang) for two leases."""
    lease = ctx.timing.lease_s
    phases: list[tuple[Mode, float]] = [(Mode.BLACKHOLE, 2.5 * lease)]
    if not ctx.opts.smoke:
        phases.append((Mode.REFUSE, 2.0 * lease))
    listener = ctx.pg_listener(0)
    before = ctx.proxy_counts([listener])
    for mode, seconds in phases:
        # Half write through w0's own (partitioned) connection and hang there; half finish
        # their handler at once and hang in w0's finisher: those are the late commits.
        ctx.enqueue(ctx.opts.jobs // len(phases), work_s=(0.2, 0.8), effect_share=0.5)
        ctx.wait_in_flight(0, at_least=4)
        ctx.wait(lambda: _late_finishers(ctx, 0) >= 2, timeout_s=30, interval_s=0.02,
                 what="w0 running two handlers that finish without a write of their own")
        pid = ctx.fleet.pid(0)
        fault = ctx.fault(f"pg_{mode.value}", pids=[pid], detail=f"w0 for {seconds:.1f}s")
        ctx.services.proxy.set_mode(listener, mode)
        ctx.hold(seconds)  # the partition's own duration
        ctx.services.proxy.set_mode(listener, Mode.PASS)
        ctx.healed(fault)
    ctx.wait_done()
    try:
        ctx.wait(lambda: ctx.fleet.events("stale_finish_rejected", 0), timeout_s=10,
                 what="w0's late completions rejected")
    except AssertionError as exc:
        ctx.check(False, f"w0's late completions never reached the database: {exc}")
    ctx.notes["w0_late_commits_rejected"] = len(ctx.fleet.events("stale_finish_rejected", 0))
    ctx.note_proxy(before, [listener])
    ctx.probe_maintenance()


def pgbouncer_restart(ctx: Context) -> None:
    """Every daemon on a pgbouncer in transaction mode (odd slots LISTEN on a direct
    ``database_listen_url``, even ones poll); pgbouncer is restarted with handlers in
    flight, cutting every client and server connection at once."""
    binary = pgbouncer_binary()
    if binary is None:
        raise RuntimeError("pgbouncer is required (package pgbouncer)")
    cluster = ctx.services.cluster
    bouncer = PgBouncer(binary, cluster.url(ctx.db.name, APP_ROLE), pool_size=12)
    ctx.cleanups.append(bouncer.stop)  # after the fleet: its graceful stop needs it
    bouncer.start()
    for slot, daemon in enumerate(ctx.fleet.daemons):
        daemon.env["GOCHAT_DATABASE_URL"] = bouncer.url
        if slot % 2:
            daemon.env["GOCHAT_DATABASE_LISTEN_URL"] = cluster.url(
                ctx.db.name, APP_ROLE, port=ctx.services.pg_ports[slot])
    ctx.fleet.start()
    restarts = 1 if ctx.opts.smoke else 3
    batch = max(10, ctx.opts.jobs // restarts)
    for _ in range(restarts):
        ctx.enqueue(batch, work_s=(0.2, 0.6))
        ctx.wait(lambda: _running(ctx) >= len(ctx.fleet.daemons), timeout_s=30,
                 what="handlers in flight", interval_s=0.02)
        fault = ctx.fault("pgbouncer_restart")
        bouncer.restart()
        ctx.healed(fault)
    ctx.wait_done()
    polling = [d for d in range(len(ctx.fleet.daemons))
               if ctx.fleet.events("notifications_off", d)]
    ctx.notes["slots_polling"] = polling
    ctx.check(polling == list(range(0, len(ctx.fleet.daemons), 2)),
              f"slots without a listen URL should poll, and only those: {polling}")
    ctx.probe_maintenance()


def _pool_timing(t: Timing) -> Timing:
    return dataclasses.replace(t, db_pool_size=2, concurrency=12)


def pool_exhaustion(ctx: Context) -> None:
    """A 2-connection pool per daemon, every handler holding a connection of its own in
    ``pg_sleep``, the server's ordinary connection slots nearly all taken (the runner holds
    them) and 20 ms added to every round trip: handlers fail to connect and retry, the
    daemons' pools queue and time out, and the fleet must still finish everything."""
    cluster = ctx.services.cluster
    ctx.services.proxy.set_mode(ctx.services.pg_listeners, Mode.DELAY, 0.02)
    n = max(20, ctx.opts.jobs // 6)
    hogs: list[psycopg.Connection[Any]] = []
    # Enqueued before the slots are taken (the producer is not what is being starved),
    # due only once they are.
    ids = ctx.enqueue(n, work_s=(0.02, 0.05), effect=False, max_attempts=200, delay_s=2.0,
                      extra={"hold_db_s": 0.5})
    try:
        in_use = int(ctx.db.scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"))
        spare = 2 * len(ctx.fleet.daemons)
        want = max(0, MAX_CONNECTIONS - RESERVED - in_use - spare)
        fault = ctx.fault("pool_exhaustion", detail=f"{want} slots taken, {spare} left")
        for _ in range(want):
            try:
                hogs.append(psycopg.connect(cluster.url(ctx.db.name, APP_ROLE), autocommit=True))
            except psycopg.OperationalError:
                break
        ctx.notes["slots_taken"] = len(hogs)
        completions: list[float] = []

        def progress() -> bool:
            done = int(ctx.db.scalar(
                "SELECT count(*) FROM background_jobs WHERE id = ANY(%s) AND status = 'completed'", [ids]))
            if not completions or done != len(completions):
                completions.extend([time.monotonic()] * (done - len(completions)))
            return done == len(ids)

        start = time.monotonic()
        ctx.wait(progress, timeout_s=120 + n, what="every job through the exhausted pool", interval_s=0.2)
        stamps = [start, *completions]
        stall = max((b - a for a, b in itertools.pairwise(stamps)), default=0.0)
        ctx.notes["longest_stall_s"] = round(stall, 2)
        ctx.notes["handler_failures"] = int(ctx.db.scalar(
            "SELECT count(*) FROM chaos_executions WHERE outcome = 'failed'"))
        ctx.check(stall < 20.0, f"no job completed for {stall:.1f}s: the fleet stalled")
        ctx.healed(fault)
    finally:
        for conn in hogs:
            conn.close()
        ctx.services.proxy.set_mode(ctx.services.pg_listeners, Mode.PASS)
    ctx.wait_done()
    ctx.probe_maintenance()


SCENARIOS = [
    Scenario("postgres_restart", "pg_ctl restart -m fast with jobs in flight", postgres_restart,
             claim_loss_possible=True),
    Scenario("pg_backend_kill", "pg_terminate_backend on the workers' sessions, repeatedly",
             pg_backend_kill, claim_loss_possible=True),
    Scenario("pg_partition", "black-hole one worker's PostgreSQL longer than a lease, heal",
             pg_partition, claim_loss_possible=True),
    Scenario("pgbouncer_restart", "the fleet on pgbouncer (transaction mode), restarted mid-run",
             pgbouncer_restart, start_fleet=False, claim_loss_possible=True),
    Scenario("pool_exhaustion", "pool of 2, handlers holding connections, server slots nearly gone",
             pool_exhaustion, timing=_pool_timing, claim_loss_possible=True),
]
