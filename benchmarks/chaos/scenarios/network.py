"""A slow network (issue 26 item 5): every daemon's PostgreSQL and Redis 20 ms away (the
fault proxy delays each chunk 10 ms each way). Enqueue throughput must scale with the batch
size (one round trip per batch, not per job), no lease may expire while its holder lives
(heartbeats cross the slow link in time), and no timeout may misfire (no daemon gives up on
Redis or on a claim it was still waiting for)."""

from __future__ import annotations

import contextlib
import time

import trio

from benchmarks.chaos.fleet import read_events
from benchmarks.chaos.postgres import APP_ROLE
from benchmarks.chaos.proxy import Mode
from benchmarks.chaos.scenarios.base import Context, Scenario
from gochatd import Client
from gochatd.new_job import NewJob

ONE_WAY_S = 0.010
BATCHES = (1, 10, 100)
#: Throughput of batches of 100 over batches of 1 at least (one round trip per batch).
MIN_SCALING = 5.0
RUNNER_LISTENER = "runner:pg"


def _runner_url(ctx: Context) -> str:
    """The runner's own proxied PostgreSQL listener (delayed like the daemons')."""
    proxy, cluster = ctx.services.proxy, ctx.services.cluster
    with contextlib.suppress(KeyError):
        proxy.stats(RUNNER_LISTENER)
        return cluster.url(ctx.db.name, APP_ROLE, port=ctx.notes["runner_port"])
    port = proxy.add(RUNNER_LISTENER, "127.0.0.1", cluster.port)
    ctx.notes["runner_port"] = port
    return cluster.url(ctx.db.name, APP_ROLE, port=port)


def _enqueue_rate(url: str, batch: int, seconds: float) -> tuple[list[int], float]:
    """Jobs/s of back-to-back ``enqueue_many`` calls of ``batch`` jobs for ``seconds``."""
    ids: list[int] = []

    async def main() -> None:
        async with Client(url) as client:
            end = trio.current_time() + seconds
            while trio.current_time() < end:
                results = await client.enqueue_many(
                    [NewJob("chaos:work", {"work_s": 0.0}) for _ in range(batch)])
                ids.extend(r.job.id for r in results)

    t0 = time.monotonic()
    trio.run(main)
    return ids, len(ids) / (time.monotonic() - t0)


def slow_network(ctx: Context) -> None:
    names = ctx.services.pg_listeners + ctx.services.redis_listeners
    url = _runner_url(ctx)
    ctx.notes.pop("runner_port", None)
    listeners = [*names, RUNNER_LISTENER]
    fault = ctx.fault("slow_network", detail=f"{2 * ONE_WAY_S * 1000:.0f} ms round trip")
    ctx.services.proxy.set_mode(listeners, Mode.DELAY, ONE_WAY_S)
    try:
        seconds = 1.0 if ctx.opts.smoke else 10.0
        rates: dict[str, float] = {}
        for batch in BATCHES:
            ids, rate = _enqueue_rate(url, batch, seconds)
            ctx.jobs.update(ids)
            rates[str(batch)] = round(rate, 1)
            ctx.tick()
        ctx.notes["enqueue_per_s_by_batch"] = rates
        scaling = rates[str(BATCHES[-1])] / max(rates[str(BATCHES[0])], 1e-9)
        ctx.notes["enqueue_scaling"] = round(scaling, 1)
        ctx.check(scaling >= MIN_SCALING,
                  f"enqueue throughput x{scaling:.1f} from batches of 1 to 100 (want x{MIN_SCALING:g})")
        # Jobs that outlive their lease several times: every renewal crosses the slow link.
        long = ctx.enqueue(ctx.opts.workers * 2, work_s=(2.5 * ctx.timing.lease_s,) * 2)
        t0 = time.time()
        ctx.wait_done()
        ctx.notes["drain_s"] = round(time.time() - t0, 1)
        ctx.notes["long_jobs"] = len(long)
    finally:
        ctx.services.proxy.set_mode(listeners, Mode.PASS)
        ctx.healed(fault)
    _check_no_misfire(ctx)
    ctx.probe_maintenance()


def _check_no_misfire(ctx: Context) -> None:
    reaped = int(ctx.db.scalar(
        "SELECT count(*) FROM chaos_transitions WHERE error_class IN ('lease_expired', 'timeout')"))
    ctx.notes["leases_expired_or_timed_out"] = reaped
    ctx.check(reaped == 0, f"{reaped} leases expired or handlers timed out while every "
                           "holder was alive")
    failed: dict[str, int] = {}
    for daemon in ctx.fleet.daemons:
        for log in daemon.logs:
            for event in read_events(log):
                name = str(event.get("event", ""))
                if name.endswith("_failed") or event.get("mode") == "polling":
                    failed[name] = failed.get(name, 0) + 1
    ctx.notes["timeouts_or_failures_logged"] = failed
    ctx.check(not failed, f"daemons gave up over the slow network: {failed}")


SCENARIOS = [
    Scenario("slow_network", "20 ms round trip to PostgreSQL and Redis", slow_network,
             workflows=False),
]
