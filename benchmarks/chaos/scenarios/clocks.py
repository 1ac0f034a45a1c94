"""Clock jumps under libfaketime (``benchmarks.chaos.faketime``).

``host_clock_jump``: every daemon's host clock jumps an hour forward, then two hours back,
then home, with leases held, delayed jobs waiting and a periodic job due every second.
Leases, due times and periodic slots are all decided by the database clock, so nothing
may change: no lease reaped, no delayed job early, no periodic slot early or twice.

``db_clock_jump``: the database server's clock (a private cluster under faketime) jumps an
hour forward, then back. What happens is stated and bounded, not avoided: every live lease
looks expired and is reaped (the job runs again under a new fence; the first run's
finish is rejected), delayed jobs fall due early, the periodic record moves an hour ahead
(one slot, not an hour of them) and, once the clock is back, no slot is enqueued until
the clock reaches that record again. What must hold: no stale finish accepted, no fence
run twice, no periodic slot enqueued twice, nothing lost."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import cast

from benchmarks.chaos.faketime import FakeClock
from benchmarks.chaos.fleet import GOCHATD, read_events
from benchmarks.chaos.postgres import PgCluster
from benchmarks.chaos.redis_server import free_port
from benchmarks.chaos.scenarios.base import Context, OwnCluster, Scenario

HOUR = 3600
#: A periodic job every second, marked in its payload so the checks find its slots.
PERIODIC = {"GOCHAT_PERIODIC": json.dumps({"chaos:work": {
    "every": "1s", "queue": "maint", "payload": {"work_s": 0.01, "periodic": True}}})}


def _periodic(ctx: Context, since: float = 0.0) -> tuple[int, int, int]:
    """(slots enqueued, slots enqueued twice, slots enqueued before their time), the last
    two by the database clock; ``since``: inserted after that real time (the audit's). A
    slot is the job's ``scheduled_at`` as inserted (a retry or a run-now moves it later)."""
    rows = ctx.db.query(
        "SELECT t.scheduled_at, extract(epoch FROM j.created_at)::float8"
        " FROM background_jobs j JOIN chaos_transitions t ON t.job_id = j.id"
        " AND t.old_status IS NULL WHERE j.payload->>'periodic' = 'true' AND t.at > %s", [since])
    slots = [float(r[0]) for r in rows]
    early = sum(1 for slot, created in rows if float(created) < float(slot) - 0.001)
    return len(slots), len(slots) - len(set(slots)), early


def _delayed_early(ctx: Context, ids: list[int]) -> int:
    """Delayed jobs whose first claim came before their due time (audit clock)."""
    return int(ctx.db.scalar(
        "SELECT count(*) FROM (SELECT job_id, min(at) AS first, min(scheduled_at) AS due"
        " FROM chaos_transitions WHERE job_id = ANY(%s) AND new_status = 'running'"
        " GROUP BY job_id) f WHERE first < due - 0.05", [ids]))


def _reaps(ctx: Context) -> int:
    return int(ctx.db.scalar(
        "SELECT count(*) FROM chaos_transitions WHERE error_class = 'lease_expired'"
        " AND old_status = 'running' AND job_id <> ALL(%s)", [sorted(ctx.ghosts)]))


def _jumped_events(ctx: Context, began: float) -> tuple[int, int]:
    """Daemon log events stamped half an hour or more ahead of, and behind, the real time:
    proof that the daemons' clocks really jumped."""
    now = time.time()
    ahead = behind = 0
    for daemon in ctx.fleet.daemons:
        for log in daemon.logs:
            for event in read_events(log):
                stamp = event.get("timestamp")
                if not isinstance(stamp, str):
                    continue
                at = datetime.fromisoformat(stamp).timestamp()
                ahead += at > now + HOUR / 2
                behind += at < began - HOUR / 2
    return ahead, behind


def host_clock_jump(ctx: Context) -> None:
    began = time.time()
    clock = FakeClock(ctx.fleet.workdir / "host-clock.faketime")
    for daemon in ctx.fleet.daemons:
        daemon.env.update(clock.env(exact=False))
    ctx.fleet.start()
    lease, smoke = ctx.timing.lease_s, ctx.opts.smoke
    hold_s = 2.0 if smoke else 10.0
    delay_s = 2 * hold_s + 4.0  # due while the clocks are off
    delayed = ctx.enqueue(max(5, ctx.opts.jobs // 10), work_s=(0.02, 0.05), effect=False,
                          delay_s=delay_s, queue="maint")
    ctx.enqueue(ctx.opts.jobs // 2, work_s=(0.5 * lease, 1.5 * lease))
    ctx.wait_in_flight(0, at_least=1)
    for offset in (HOUR, -HOUR, 0):
        fault = ctx.fault("host_clock_jump", detail=f"{offset:+d}s")
        clock.set(offset)
        ctx.hold(hold_s)  # the jump's own duration
        ctx.healed(fault)
    ctx.wait_done()
    slots, twice, early_slots = _periodic(ctx)
    early_delayed, reaped = _delayed_early(ctx, delayed), _reaps(ctx)
    ctx.notes.update(periodic_slots=slots, periodic_slots_twice=twice,
                     periodic_slots_early=early_slots, delayed_jobs=len(delayed),
                     delayed_early=early_delayed, leases_reaped=reaped)
    ahead, behind = _jumped_events(ctx, began)
    ctx.notes.update(daemon_events_an_hour_ahead=ahead, daemon_events_an_hour_behind=behind)
    ctx.check(ahead > 0 and behind > 0, "the daemons' clocks did not jump (faketime not in effect)")
    ctx.check(slots > 0, "no periodic slot was enqueued")
    ctx.check(twice == 0, f"{twice} periodic slots enqueued twice with the host clock jumping")
    ctx.check(early_slots == 0, f"{early_slots} periodic slots enqueued early")
    ctx.check(early_delayed == 0, f"{early_delayed} delayed jobs started early")
    ctx.check(reaped == 0, f"{reaped} live leases were reaped with the host clock jumping")
    ctx.probe_maintenance()


class ClockCluster(PgCluster):
    """A private cluster whose server runs under faketime; ``clock`` moves it."""

    def __init__(self, base: Path) -> None:
        (base / "pg-clock").mkdir(parents=True, exist_ok=True)
        self.clock = FakeClock(base / "pg-clock" / "server.faketime")
        super().__init__(base, free_port(), name="pg-clock", env=self.clock.env(exact=True))

    def start(self) -> None:
        if not (self.data / "PG_VERSION").exists():
            self.init()
            super().start()
            self.create_app_role()
            return
        super().start()


def _real_time_audit(ctx: Context, clock: FakeClock) -> None:
    """The audit trigger records the real time (the server's clock less the offset the
    same file sets), so the invariants can order a handler's end before its commit."""
    offset = f"trim(pg_read_file('{clock.path}'))::float8"
    ctx.db.query(
        "CREATE OR REPLACE FUNCTION chaos_real_now() RETURNS timestamptz"
        " LANGUAGE sql SECURITY DEFINER AS"
        f" $$ SELECT clock_timestamp() - make_interval(secs => {offset}) $$")
    ctx.db.query("GRANT EXECUTE ON FUNCTION chaos_real_now() TO PUBLIC")
    src = str(ctx.db.scalar("SELECT prosrc FROM pg_proc WHERE proname = 'chaos_audit'"))
    ctx.db.query(
        "CREATE OR REPLACE FUNCTION chaos_audit() RETURNS trigger LANGUAGE plpgsql AS $body$"
        + src.replace("clock_timestamp()", "chaos_real_now()") + "$body$")


def db_clock_jump(ctx: Context) -> None:
    cluster = cast(ClockCluster, ctx.cluster)
    clock = cluster.clock
    _real_time_audit(ctx, clock)
    ctx.fleet.start()
    lease, smoke = ctx.timing.lease_s, ctx.opts.smoke
    hold_s = 2.0 if smoke else 10.0
    delayed = ctx.enqueue(max(5, ctx.opts.jobs // 10), work_s=(0.02, 0.05), effect=False,
                          delay_s=4 * hold_s + 30.0, queue="maint")
    ctx.enqueue(max(30, ctx.opts.jobs // 4), work_s=(1.0 * lease, 2.0 * lease))
    ctx.wait_in_flight(0, at_least=2)
    forward = ctx.fault("db_clock_jump", detail=f"{HOUR:+d}s")
    clock.set(HOUR)
    ctx.wait(lambda: _delayed_early(ctx, delayed) == len(delayed), timeout_s=30,
             what="the delayed jobs, due by the jumped clock")
    ctx.hold(hold_s)  # an hour ahead, for a while
    ctx.healed(forward)
    reaped_ahead = _reaps(ctx)
    back = ctx.fault("db_clock_jump", detail="back to +0s")
    clock.set(0)
    back_at = time.time()
    ctx.hold(hold_s)  # back home: the periodic record is an hour ahead
    ctx.healed(back)
    slots_after_back, _, _ = _periodic(ctx, since=back_at + 0.5)
    held = _run_held_jobs_now(ctx)
    ctx.wait_done()
    slots, twice, early_slots = _periodic(ctx)
    ctx.notes.update(
        leases_reaped_clock_ahead=reaped_ahead, delayed_jobs=len(delayed),
        delayed_started_early=_delayed_early(ctx, delayed), periodic_slots=slots,
        periodic_slots_twice=twice, periodic_slots_after_back=slots_after_back,
        jobs_held_by_jump_run_now=held,
        stale_finishes_rejected=len(ctx.fleet.events("stale_finish_rejected")))
    ctx.check(twice == 0, f"{twice} periodic slots enqueued twice across the database clock jumps")
    ctx.check(early_slots == 0, f"{early_slots} periodic slots enqueued before their time")
    ctx.check(slots_after_back == 0,
              f"{slots_after_back} periodic slots enqueued behind the record after the jump back")
    ctx.probe_maintenance()


def _run_held_jobs_now(ctx: Context) -> int:
    """What an operator does after a step back: jobs retried or delayed while the clock was
    ahead are due up to an hour late; ``gochatd jobs bulk run-now`` makes them due now."""
    ids = [int(r[0]) for r in ctx.db.query(
        "SELECT id FROM background_jobs WHERE status IN ('queued', 'retrying')"
        " AND scheduled_at > now() + interval '30 minutes'"
        " AND waits_on = 0")]  # not a job waiting on its dependencies (9999-12-31)
    if not ids:
        return 0
    proc = subprocess.run(
        [GOCHATD, "jobs", "bulk", "run-now", "--ids", ",".join(map(str, ids)),
         "--database-url", ctx.db.app_url, "--redis-url", ctx.db.redis_url],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    ctx.check(proc.returncode == 0, f"gochatd jobs bulk run-now: exit {proc.returncode}: "
                                    f"{proc.stderr.strip()[-300:]}")
    return len(ids)


def _clock_cluster(base: Path) -> OwnCluster:
    return ClockCluster(base)


SCENARIOS = [
    Scenario("host_clock_jump", "the daemons' host clock jumps +1 h, -1 h, back (faketime)",
             host_clock_jump, env=PERIODIC, start_fleet=False),
    Scenario("db_clock_jump", "the database server's clock jumps +1 h, then back (faketime)",
             db_clock_jump, env=PERIODIC, start_fleet=False, own_cluster=_clock_cluster,
             claim_loss_possible=True, overlap_allowed=True, db_clock_jumps=True),
]
