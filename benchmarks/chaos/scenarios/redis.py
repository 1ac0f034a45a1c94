"""Scenarios that break Redis: a restart that loses every stream and group, a black-hole
partition between every daemon and Redis, and a Redis Cluster master killed mid-run."""

from __future__ import annotations

import time

from benchmarks.chaos.proxy import Mode
from benchmarks.chaos.scenarios.base import Context, Scenario

#: The daemons' Redis socket timeout is ``block_timeout_s + 5``: a black-holed read is
#: noticed only then, so a partition must outlast it for the fallback to show.
REDIS_SOCKET_SLACK_S = 5.0


def _back_to_streams(ctx: Context, since: float) -> bool:
    for daemon in ctx.fleet.daemons:
        if not daemon.alive():
            continue
        if not any(at > since and mode == "streams" for at, mode in ctx.mode_changes(daemon.slot)):
            return False
    return True


def redis_restart(ctx: Context) -> None:
    """Kill redis-server (no persistence) and start it again on the same port: streams and
    the consumer group are gone. Daemons poll meanwhile, recreate the group, return to
    streams; the sweep re-dispatches jobs whose entries were lost."""
    down_s = 1.0 if ctx.opts.smoke else 3.0
    ctx.enqueue(ctx.opts.jobs, work_s=(0.1, 0.4))
    ctx.wait(lambda: ctx.db.started_since(0) >= len(ctx.fleet.daemons), timeout_s=30,
             what="handlers started")
    fault = ctx.fault("redis_restart", detail=f"down {down_s:.0f}s")
    ctx.services.redis.restart(down_s)
    ctx.healed(fault)
    ctx.enqueue(max(10, ctx.opts.jobs // 4), work_s=(0.1, 0.4))
    ctx.wait(lambda: _back_to_streams(ctx, fault.at), timeout_s=30,
             what="every daemon back on streams")
    ctx.wait_done()
    ctx.notes["sweep_redispatched_jobs"] = sum(
        int(e.get("jobs", 0)) for e in ctx.fleet.events("sweep_redispatched"))
    ctx.probe_maintenance()


def redis_partition(ctx: Context) -> None:
    """Black-hole every daemon's Redis connections (30 s; smoke: long enough to outlast
    the Redis socket timeout): reads hang until that timeout, daemons fall back to polling
    the database and keep running jobs, then return to streams after the heal."""
    seconds = (ctx.timing.block_timeout_s + REDIS_SOCKET_SLACK_S + 3.0) if ctx.opts.smoke else 30.0
    ctx.enqueue(ctx.opts.jobs // 2, work_s=(0.1, 0.3))
    ctx.wait(lambda: ctx.db.started_since(0) >= len(ctx.fleet.daemons), timeout_s=30,
             what="handlers started")
    pids = [d.pid for d in ctx.fleet.daemons]
    before = ctx.proxy_counts(ctx.services.redis_listeners)
    fault = ctx.fault("redis_blackhole", pids=pids, detail=f"all workers for {seconds:.0f}s")
    ctx.services.proxy.set_mode(ctx.services.redis_listeners, Mode.BLACKHOLE)
    start = time.time()
    rounds = max(1, int(seconds))
    batch = max(2, ctx.opts.jobs // (2 * rounds))
    for _ in range(rounds):
        ctx.hold(seconds / rounds)  # the partition's own duration; load keeps coming
        ctx.enqueue(batch, work_s=(0.1, 0.3))
    ctx.services.proxy.set_mode(ctx.services.redis_listeners, Mode.PASS)
    ctx.healed(fault)
    end = time.time()
    ctx.note_proxy(before, ctx.services.redis_listeners)
    ran = int(ctx.db.scalar(
        "SELECT count(*) FROM chaos_executions WHERE started_at > %s AND started_at < %s",
        [start + ctx.timing.block_timeout_s + REDIS_SOCKET_SLACK_S + 0.5, end]))
    fell_back = sum(
        1 for d in ctx.fleet.daemons
        if any(start < at < end and mode == "polling" for at, mode in ctx.mode_changes(d.slot)))
    ctx.notes["jobs_started_while_polling"] = ran
    polling_from = start + ctx.timing.block_timeout_s + REDIS_SOCKET_SLACK_S + 1.0
    # Jobs enqueued once the daemons were polling (the backlog from before the fault
    # waits its turn either way), and apart from them workflow jobs released then (their
    # due time set by the release, migration 0019). Too few of them started to judge is a
    # poller that did not keep up too: a poller held by each Redis probe (an unanswered
    # connect waits out the socket timeout) claimed for 1 s in every 6.
    rows = ctx.db.query(
        "SELECT t.at - t.scheduled_at, j.job_type = 'chaos:flow' FROM chaos_transitions AS t"
        " JOIN background_jobs AS j ON j.id = t.job_id WHERE t.new_status = 'running'"
        " AND t.old_status = 'queued' AND t.scheduled_at > %s AND t.at < %s",
        [polling_from, end])
    latency = sorted(float(r[0]) for r in rows if not r[1])
    released = sorted(float(r[0]) for r in rows if r[1])
    for what, seconds in (("new_jobs", latency), ("released_workflow_jobs", released)):
        ctx.notes[f"{what}_started_while_polling"] = len(seconds)
        if seconds:
            median = seconds[len(seconds) // 2]
            ctx.notes[f"{what}_claim_latency_while_polling_p50_s"] = round(median, 3)
            ctx.check(median <= 1.5, f"{what}: claims took {median:.2f}s (median) while "
                      "polling: the fallback is not keeping up")
    ctx.check(len(latency) >= 5, f"only {len(latency)} jobs enqueued while polling started "
              "before the heal: the fallback is not keeping up")
    ctx.notes["daemons_fell_back"] = fell_back
    ctx.check(fell_back == len(ctx.fleet.daemons),
              f"only {fell_back} of {len(ctx.fleet.daemons)} daemons fell back to polling")
    ctx.check(ran > 0, "no job started during the partition once the daemons were polling")
    ctx.wait(lambda: _back_to_streams(ctx, end), timeout_s=30,
             what="every daemon back on streams after the heal")
    ctx.notes["back_on_streams_after_heal_s"] = round(max(
        min(at for at, mode in ctx.mode_changes(d.slot) if at > end and mode == "streams") - end
        for d in ctx.fleet.daemons), 3)
    ctx.wait_done()
    ctx.probe_maintenance()


#: Queues whose streams sit on different masters of the scenario's cluster.
CLUSTER_QUEUES = ("high", "default", "low", "maint")


def redis_cluster_master_kill(ctx: Context) -> None:
    """A 3-master Redis Cluster (no replicas): SIGKILL the master that holds the ``default``
    stream with handlers in flight, keep enqueueing while it is down (longer than the node
    timeout: the others mark it failed), start it again with its nodes.conf (its slots come
    back, its streams are gone). Daemons poll meanwhile and return to streams once the
    cluster says ok; the sweep re-dispatches what the lost streams held."""
    cluster = ctx.redis_cluster
    assert cluster is not None
    down_s = 3.0 if ctx.opts.smoke else 10.0
    ctx.notes["masters_of_queues"] = {q: cluster.node_of(f"gochat:jobs:{q}").port
                                      for q in CLUSTER_QUEUES}
    share = max(4, ctx.opts.jobs // (2 * len(CLUSTER_QUEUES)))
    for queue in CLUSTER_QUEUES:
        ctx.enqueue(share, work_s=(0.1, 0.4), queue=queue)
    ctx.wait(lambda: ctx.db.started_since(0) >= len(ctx.fleet.daemons), timeout_s=30,
             what="handlers started")
    victim = cluster.node_of("gochat:jobs:default")
    fault = ctx.fault("redis_master_kill", pids=[d.pid for d in ctx.fleet.daemons],
                      detail=f"master :{victim.port} down {down_s:.0f}s")
    cluster.kill(victim)
    for queue in CLUSTER_QUEUES:  # load keeps coming; its XADDs to the dead master fail
        ctx.enqueue(max(2, share // 2), work_s=(0.1, 0.3), queue=queue)
    ctx.wait(lambda: all(any(at > fault.at and mode == "polling" for at, mode in
                             ctx.mode_changes(d.slot)) for d in ctx.fleet.daemons if d.alive()),
             timeout_s=30, what="every daemon polling while a master is down")
    ctx.hold(down_s)  # the fault's own duration
    # Daemons may return as soon as the master answers, before every node has cleared its
    # FAIL flag (when ``restart`` returns): count from the start.
    restarted_at = time.time()
    cluster.restart(victim)
    ctx.healed(fault)
    ctx.notes["cluster_ok_after_restart_s"] = round(time.time() - restarted_at, 3)
    for queue in CLUSTER_QUEUES:
        ctx.enqueue(max(2, share // 2), work_s=(0.1, 0.3), queue=queue)
    ctx.wait(lambda: _back_to_streams(ctx, restarted_at), timeout_s=60,
             what="every daemon back on streams after the master restarted")
    ctx.notes["back_on_streams_after_restart_s"] = round(max(
        min(at for at, mode in ctx.mode_changes(d.slot) if at > restarted_at
            and mode == "streams") - restarted_at for d in ctx.fleet.daemons), 3)
    ctx.wait_done()
    ctx.notes["sweep_redispatched_jobs"] = sum(
        int(e.get("jobs", 0)) for e in ctx.fleet.events("sweep_redispatched"))
    ctx.probe_maintenance()


SCENARIOS = [
    Scenario("redis_restart", "restart Redis without persistence: streams and groups gone",
             redis_restart),
    Scenario("redis_partition", "black-hole Redis for every worker, heal", redis_partition),
    Scenario("redis_cluster_master_kill",
             "SIGKILL a Redis Cluster master mid-run, start it again", redis_cluster_master_kill,
             redis_cluster=True),
]
