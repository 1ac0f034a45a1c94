"""Scenarios that break daemon processes: SIGKILL, repeated SIGKILL, SIGTERM in turn, a
poison job that takes its daemon down, and a daemon whose clock is off by an hour."""

from __future__ import annotations

import dataclasses
import time

from benchmarks.chaos.scenarios.base import Context, Scenario
from benchmarks.chaos.settings import Timing


def _stranded(ctx: Context, pid: int) -> list[int]:
    return [int(r[0]) for r in ctx.db.query(
        "SELECT job_id FROM chaos_executions WHERE pid = %s AND ended_at IS NULL", [pid])]


def crash_recovery(ctx: Context) -> None:
    """SIGKILL one daemon while it runs handlers; the others reap its leases and re-run
    them. The killed daemon stays down for the maintenance probe."""
    ctx.enqueue(ctx.opts.jobs, work_s=(0.1, 0.5))
    ctx.wait_in_flight(0, at_least=min(3, ctx.timing.concurrency))
    pid = ctx.fleet.pid(0)
    at = time.time()
    ctx.fleet.kill9(0)
    ctx.fault("sigkill", pids=[pid], at=at, detail="w0")
    stranded = _stranded(ctx, pid)
    ctx.notes["stranded_jobs"] = len(stranded)
    ctx.check(bool(stranded), "w0 had no handler in flight when it was killed")
    ctx.wait_done()
    ctx.probe_maintenance()


def repeated_kills(ctx: Context) -> None:
    """Every few seconds SIGKILL a random daemon and start it again, under load."""
    kills = 3 if ctx.opts.smoke else 10
    every_s = 2.0 if ctx.opts.smoke else 3.0
    batch = max(10, ctx.opts.jobs // (kills + 1))
    ctx.enqueue(batch, work_s=(0.1, 0.4))
    for _ in range(kills):
        ctx.hold(every_s)  # the fault's own rhythm
        ctx.enqueue(batch, work_s=(0.1, 0.4))
        slot = ctx.rng.randrange(len(ctx.fleet.daemons))
        pid = ctx.fleet.pid(slot)
        at = time.time()
        ctx.fleet.kill9(slot)
        ctx.fault("sigkill", pids=[pid], at=at, detail=f"w{slot}")
        ctx.fleet.restart(slot)
    ctx.wait_done()
    ctx.probe_maintenance()


def _rolling_timing(t: Timing) -> Timing:
    # A short grace: the few long jobs are interrupted (attempt refunded) and run again.
    return dataclasses.replace(t, shutdown_grace_s=1.0)


def rolling_restart(ctx: Context) -> None:
    """SIGTERM each daemon in turn under load and start it again: in-flight handlers finish
    within the grace or are interrupted and refunded; nothing is lost, nothing overlaps."""
    per_round = max(10, ctx.opts.jobs // len(ctx.fleet.daemons))
    long_jobs = 2 if ctx.opts.smoke else 4
    for slot in range(len(ctx.fleet.daemons)):
        ctx.enqueue(per_round, work_s=(0.1, 0.4))
        ctx.enqueue(long_jobs, work_s=(2.0, 2.5))
        ctx.wait_in_flight(slot, at_least=2)
        pid = ctx.fleet.pid(slot)
        at = time.time()
        _, code = ctx.fleet.terminate(slot, timeout_s=ctx.timing.shutdown_grace_s + 20)
        ctx.fault("sigterm", pids=[pid], at=at, detail=f"w{slot}")
        ctx.check(code == 0, f"w{slot} exited with {code} after SIGTERM (expected 0)")
        ctx.fleet.restart(slot)
    ctx.wait_done()
    interrupted = int(ctx.db.scalar(
        "SELECT count(*) FROM chaos_transitions WHERE error_class = 'interrupted'"
        " AND old_status = 'running' AND new_status = 'retrying'"))
    ctx.notes["interrupted_and_refunded"] = interrupted
    ctx.probe_maintenance()


def poison_job(ctx: Context) -> None:
    """A handler that kills its own daemon (os._exit). The job goes dead after max_attempts
    (each attempt takes a daemon down; the supervisor restarts it) and the fleet keeps
    working meanwhile."""
    poison_count = 1 if ctx.opts.smoke else 3
    max_attempts = 3
    rounds = 4
    batch = max(10, ctx.opts.jobs // rounds)
    ctx.enqueue(batch, work_s=(0.1, 0.4))
    poison = ctx.enqueue(poison_count, job_type="chaos:exit", effect=False, max_attempts=max_attempts)

    def poison_done() -> bool:
        if len(ctx.jobs) < batch * rounds + poison_count:
            ctx.enqueue(batch, work_s=(0.1, 0.4))  # keep the fleet busy meanwhile
        return ctx.db.unfinished(poison) == 0

    ctx.wait(poison_done, timeout_s=max_attempts * (ctx.timing.recovery_bound_s + 5) * poison_count + 30,
             what="poison jobs dead", interval_s=0.2)
    for death in ctx.fleet.unexpected_exits():
        ctx.fault("poison_exit", pids=[death.pid], at=death.at, detail=f"w{death.slot} {death.cause}")
    rows = ctx.db.query(
        "SELECT id, status, attempts, fence, error_class FROM background_jobs WHERE id = ANY(%s)",
        [poison])
    for job_id, status, attempts, fence, error_class in rows:
        ctx.check(status == "dead" and attempts == max_attempts and fence == max_attempts,
                  f"poison job {job_id}: {status} after {attempts} attempts, {fence} claims "
                  f"({error_class}), expected dead after {max_attempts}")
    crashes = len(ctx.fleet.unexpected_exits())
    runs = ctx.db.query("SELECT pid FROM chaos_executions WHERE outcome = 'exit'")
    ctx.notes["daemon_crashes"] = crashes
    ctx.notes["poison_executions"] = len(runs)
    # Two poison jobs claimed by one daemon take it down once (the second may not even
    # have started: its claim is a fence without execution, "claimed by a daemon that died").
    ctx.check(crashes == len({r[0] for r in runs}),
              f"{crashes} daemon crashes for poison jobs in {len({r[0] for r in runs})} processes")
    ctx.wait_done()
    ctx.probe_maintenance()


def _skew_env(workers: int) -> dict[int, dict[str, str]]:
    """w1 runs an hour ahead and w2 an hour behind (with two daemons: w0 ahead, w1 behind)."""
    ahead, behind = (1, 2) if workers >= 3 else (0, 1)
    return {ahead: {"CHAOS_CLOCK_SKEW_S": "3600"}, behind: {"CHAOS_CLOCK_SKEW_S": "-3600"}}


def clock_skew(ctx: Context) -> None:
    """Daemons whose process clock is an hour off: leases expire by the database clock only.

    Phase 1: handlers run 2.5 leases long on every daemon; the hour-ahead daemon's reaper runs
    throughout, so a reaper trusting its own clock would take every lease at once: none may
    be reaped (not early). Phase 2: every daemon but the hour-behind one is killed holding
    jobs; it is the only reaper left, and a reaper trusting its clock would wait an hour: the
    leases must be reaped between 2/3 of a lease (the last heartbeat) and a lease plus a
    reap interval (plus slack) after the kill (not late)."""
    lease = ctx.timing.lease_s
    workers = len(ctx.fleet.daemons)
    behind = 2 if workers >= 3 else 1
    long_n = workers * min(3, ctx.timing.concurrency)
    ctx.enqueue(long_n, work_s=(2.5 * lease, 2.5 * lease))
    ctx.enqueue(ctx.opts.jobs // 2, work_s=(0.05, 0.2))
    # Every phase-1 job, the short ones too: a victim below must be killed holding one of
    # phase 2's long handlers, not a short one that ends before the kill.
    ctx.wait_done(timeout_s=60 + 10 * lease)
    early = int(ctx.db.scalar(
        "SELECT count(*) FROM chaos_transitions WHERE error_class = 'lease_expired'"
        " AND old_status = 'running' AND new_status <> 'completed'"))
    ctx.notes["phase1_long_jobs"] = long_n
    ctx.notes["phase1_reaped_early"] = early
    ctx.check(early == 0, f"{early} live leases were reaped (early) with skewed daemon clocks")

    victims = [s for s in range(workers) if s != behind]
    ctx.enqueue(workers * ctx.timing.concurrency, work_s=(1.5 * lease, 1.5 * lease))
    for slot in victims:
        ctx.wait_in_flight(slot, at_least=1)
    killed_at: dict[int, float] = {}  # stranded job -> when its daemon was killed
    for slot in victims:
        pid = ctx.fleet.pid(slot)
        at = time.time()
        ctx.fleet.kill9(slot)
        ctx.fault("sigkill", pids=[pid], at=at, detail=f"w{slot}")
        killed_at.update(dict.fromkeys(_stranded(ctx, pid), at))

    if not killed_at:
        ctx.check(False, "clock_skew: the killed daemons held no handler")
        ctx.fleet.start(victims)
        ctx.wait_done()
        return

    def reaped() -> list[tuple[int, float]] | None:
        rows = ctx.db.query(
            "SELECT job_id, min(at) FROM chaos_transitions WHERE job_id = ANY(%s)"
            " AND error_class = 'lease_expired' AND old_status = 'running'"
            " AND new_status <> 'completed' GROUP BY job_id", [list(killed_at)])
        return [(int(r[0]), float(r[1])) for r in rows] if len(rows) == len(killed_at) else None

    rows: list[tuple[int, float]] = ctx.wait(
        reaped, timeout_s=ctx.timing.recovery_bound_s + 20,
        what="the stranded jobs reaped by the hour-behind daemon")
    delays = [at - killed_at[job_id] for job_id, at in rows]
    earliest, latest = min(delays), max(delays)
    ctx.notes["phase2_stranded"] = len(killed_at)
    ctx.notes["phase2_reaped_after_kill_s"] = [round(earliest, 3), round(latest, 3)]
    ctx.check(earliest >= 2 * lease / 3 - 0.2,
              f"a dead daemon's lease was reaped {earliest:.2f}s after the kill: early")
    ctx.check(latest <= lease + ctx.timing.reap_interval_s + 2.0,
              f"a dead daemon's lease was reaped {latest:.2f}s after the kill: late")
    ctx.fleet.start(victims)
    ctx.wait_done()
    ctx.probe_maintenance()


SCENARIOS = [
    Scenario("crash_recovery", "SIGKILL one worker with handlers in flight", crash_recovery),
    Scenario("repeated_kills", "SIGKILL a random worker every few seconds, restart it",
             repeated_kills),
    Scenario("rolling_restart", "SIGTERM each worker in turn under load", rolling_restart,
             timing=_rolling_timing),
    Scenario("poison_job", "a handler that os._exit()s its daemon", poison_job,
             crashes_allowed=True),
    Scenario("clock_skew", "worker clocks an hour ahead and behind", clock_skew,
             slot_env=_skew_env),
]
