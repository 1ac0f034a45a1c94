"""Full disks.

``pg_disk_full``: the jobs database on a small tmpfs of its own (``benchmarks.chaos.disk``),
filled to the last byte by a ballast file with a producer enqueueing and handlers in
flight, then freed. While full: enqueues are refused with ``StoreUnavailable`` (the CLI
exits 1 with one line), no refused enqueue leaves a row, the daemons keep answering
``/healthz`` and ``/readyz`` says why they are not ready; finishes that cannot be written
are retried and land once space returns; nothing is lost or run twice under one fence.

``redis_maxmemory``: Redis at ``maxmemory`` with ``noeviction``: XADD is refused, the
daemons fall back to polling the database, and nothing is lost."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from benchmarks.chaos.disk import DiskCluster
from benchmarks.chaos.fleet import GOCHATD, HANDLERS
from benchmarks.chaos.postgres import APP_ROLE
from benchmarks.chaos.producer import Producer
from benchmarks.chaos.redis_server import free_port
from benchmarks.chaos.scenarios.base import Context, OwnCluster, Scenario
from gochatd.gateway.keys import hash_key

T = TypeVar("T")


def _admin_env(workers: int) -> dict[int, dict[str, str]]:
    return {0: {"GOCHAT_ADMIN_LISTEN": f"127.0.0.1:{free_port()}"}}


def _probe(ctx: Context, path: str) -> tuple[int, dict[str, Any]]:
    """(status, body) of w0's admin ``path``; (0, {}) when it does not answer."""
    return _http(f"http://{ctx.fleet.daemons[0].env['GOCHAT_ADMIN_LISTEN']}{path}")


GATEWAY_KEY = "gck_chaos_disk_full"


def _start_gateway(ctx: Context) -> str:
    """One more daemon, with the gateway (the fleet runs ``--worker-only``), serving a queue
    nobody enqueues to: its address. Stopped after the fleet (``ctx.cleanups``)."""
    address = f"127.0.0.1:{free_port()}"
    env = {k: v for k, v in ctx.fleet.daemons[0].env.items() if not k.startswith("CHAOS_")}
    env.update(GOCHAT_ADMIN_LISTEN=address, GOCHAT_WORKER_QUEUES="chaos-gateway=1",
               GOCHAT_GATEWAY_KEYS=f"{hash_key(GATEWAY_KEY)}=chaos")
    log = (ctx.fleet.workdir / "gateway.log").open("wb")
    proc = subprocess.Popen([GOCHATD, "serve", "--handlers", HANDLERS], env=env,
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                            cwd=ctx.fleet.workdir, start_new_session=True)

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()

    ctx.cleanups.append(stop)
    ctx.wait(lambda: _http(f"http://{address}/healthz")[0] == 200, timeout_s=30,
             what="the gateway daemon answering")
    return address


def _gateway_enqueue(address: str) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"job_type": "chaos:work", "payload": {"work_s": 0.01}}).encode()
    return _http(f"http://{address}/v1/jobs", body, {
        "Authorization": f"Bearer {GATEWAY_KEY}", "Content-Type": "application/json"})


def _http(url: str, body: bytes | None = None,
          headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """(status, JSON body); (0, {}) when nothing answers."""
    request = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
    except (OSError, ValueError):
        return 0, {}


def _cli_enqueue(ctx: Context, url: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [GOCHATD, "enqueue", "chaos:work", "--payload", '{"work_s": 0.01}',
         "--database-url", url], capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL, check=False,
        env={k: v for k, v in ctx.fleet.daemons[0].env.items() if k != "GOCHAT_ADMIN_LISTEN"})
    return proc.returncode, proc.stdout, proc.stderr


def _running(ctx: Context) -> int:
    return int(ctx.db.executions(
        "SELECT count(*) FROM chaos_executions WHERE ended_at IS NULL")[0][0])


def pg_disk_full(ctx: Context) -> None:
    disk = cast(DiskCluster, ctx.cluster)
    smoke = ctx.opts.smoke
    full_s = 3.0 if smoke else 15.0
    url = disk.url(ctx.db.name, APP_ROLE)
    gateway_at = _start_gateway(ctx)
    producer = Producer(url, ctx.db.redis_url, rate_per_s=30.0 if smoke else 60.0,
                        work_s=(0.1, 0.4), seed=f"{ctx.opts.seed}:{ctx.scenario.name}")
    producer.start()
    probes: list[tuple[int, dict[str, Any]]] = []
    try:
        ctx.enqueue(ctx.opts.jobs // 2, work_s=(0.5, 1.5))
        ctx.wait(lambda: _running(ctx) >= len(ctx.fleet.daemons), timeout_s=30,
                 what="handlers in flight", interval_s=0.02)
        fault = ctx.fault("pg_disk_full", detail=f"{disk.fill()} bytes of ballast")
        full_at = time.time()
        ctx.wait(lambda: sum(producer.out.refused.values()) > 0, timeout_s=30,
                 what="an enqueue refused on the full disk")
        # A write that fits in space PostgreSQL already holds (its WAL segment, a page with
        # room) may still commit on a full disk: try again until one is refused.
        clis = _until_refused(lambda: _cli_enqueue(ctx, url), lambda c: c[0] != 0)
        gateways = _until_refused(lambda: _gateway_enqueue(gateway_at),
                                  lambda g: g[0] not in (200, 201))
        while time.time() < full_at + full_s or len(probes) < 4:
            probes.append(_probe(ctx, "/readyz"))
            ctx.check(_probe(ctx, "/healthz")[0] == 200, "/healthz did not answer 200 on a full disk")
            ctx.hold(0.5)
        refused_while_full = sum(producer.out.refused.values())
        disk.release()
        freed_at = time.time()
        ctx.healed(fault)
        ctx.wait(lambda: producer.acked_after(freed_at) > 0, timeout_s=60,
                 what="an enqueue acknowledged once space returned")
        ctx.wait(lambda: _probe(ctx, "/readyz")[0] == 200, timeout_s=30,
                 what="/readyz ready again once space returned")
        ctx.notes["ready_again_after_s"] = round(time.time() - freed_at, 2)
        ctx.hold(2.0)  # load after the disk was freed
    finally:
        disk.release()
        produced = producer.stop()
    _account(ctx, produced.acked)
    _judge_refusals(ctx, clis, gateways, probes)
    ctx.notes.update(enqueues_refused=dict(produced.refused), refused_while_full=refused_while_full)
    ctx.check(refused_while_full > 0, "no enqueue was refused while the disk was full")
    ctx.check(set(produced.refused) <= {"StoreUnavailable"},
              f"enqueues refused with other errors: {dict(produced.refused)}")
    ctx.wait_done()
    stray = int(ctx.db.scalar(
        "SELECT count(*) FROM background_jobs WHERE NOT (id = ANY(%s))", [sorted(ctx.jobs)]))
    ctx.notes["rows_not_acknowledged"] = stray
    ctx.check(stray == 0, f"{stray} rows in background_jobs that no producer saw committed")
    ctx.probe_maintenance()


#: How long a command on the full disk is tried until it is refused.
REFUSED_WITHIN_S = 15.0


def _until_refused(attempt: Callable[[], T], refused: Callable[[T], bool],
                   within_s: float = REFUSED_WITHIN_S) -> list[T]:
    """``attempt()`` until one is ``refused`` (for at most ``within_s``), every answer in
    order. Space freed while the disk is full (a checkpoint recycling WAL segments) takes
    the producers' writes a moment to fill again: five tries in a row were once all
    accepted, so the tries are bounded by time, not by count."""
    deadline = time.monotonic() + within_s
    answers = [attempt()]
    while not refused(answers[-1]) and time.monotonic() < deadline:
        answers.append(attempt())
    return answers


def _judge_refusals(ctx: Context, clis: list[tuple[int, str, str]],
                    gateways: list[tuple[int, dict[str, Any]]],
                    probes: list[tuple[int, dict[str, Any]]]) -> None:
    """The CLI: exit 1 and one line; the gateway: 503; /readyz: 503 saying why. An enqueue
    that did get through (space PostgreSQL already held) counts as a job like any other;
    the last try of each must be the refusal."""
    for code, out, _ in clis:
        if code == 0:
            ctx.jobs.add(int(json.loads(out)["id"]))
    for status, body in gateways:
        if status in (200, 201):
            ctx.jobs.add(int(body["job"]["id"]))
    code, _, err = clis[-1]
    gateway = gateways[-1]
    lines = [line for line in err.splitlines() if line.strip()]
    ctx.notes.update(cli_exit=code, cli_stderr=err.strip()[:300],
                     tries_until_refused={"cli": len(clis), "gateway": len(gateways)},
                     gateway_while_full=[gateway[0], gateway[1].get("error", {}).get("code")],
                     readyz_while_full=sorted({json.dumps(b, sort_keys=True) for _, b in probes}))
    ctx.check(code == 1 and len(lines) == 1 and "Traceback" not in err,
              f"gochatd enqueue on a full disk: exit {code}, stderr {err!r}")
    ctx.check(gateway[0] == 503, f"the gateway answered {gateway[0]} on a full disk: {gateway[1]}")
    ctx.check(any(s == 503 for s, _ in probes), "/readyz never said not ready on a full disk")


def _account(ctx: Context, acked: list[tuple[int, float, float]]) -> None:
    for job_id, _, work in acked:
        ctx.jobs.add(job_id)
        ctx.with_effect.add(job_id)
        ctx.work_s_total += work
    ctx.notes["jobs_acknowledged"] = len(acked)


def _disk(base: Path) -> OwnCluster:
    return DiskCluster(base)


def _oom_errors(ctx: Context) -> int:
    """Commands Redis refused with OOM since the scenario began (INFO errorstats)."""
    text = ctx.services.redis.command("INFO", "errorstats").decode(errors="replace")
    for line in text.splitlines():
        if line.startswith("errorstat_OOM:"):
            return int(line.split("count=")[1].split(",")[0])
    return 0


def redis_maxmemory(ctx: Context) -> None:
    redis = ctx.services.redis
    full_s = 3.0 if ctx.opts.smoke else 20.0
    redis.command("CONFIG", "RESETSTAT")

    def unlimited() -> None:
        redis.command("CONFIG", "SET", "maxmemory", "0")

    ctx.cleanups.append(unlimited)  # the run's Redis serves the next scenarios
    ctx.enqueue(ctx.opts.jobs // 3, work_s=(0.05, 0.2))
    redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
    fault = ctx.fault("redis_maxmemory", detail="maxmemory 1 byte, noeviction")
    try:
        redis.command("CONFIG", "SET", "maxmemory", "1")  # over it at once: every write refused
        full = ctx.enqueue(ctx.opts.jobs // 3, work_s=(0.05, 0.2))
        ctx.wait_done(full, timeout_s=60 + full_s)
        ctx.hold(max(0.0, full_s - (time.time() - fault.at)))  # the fault's own length
        refused = _oom_errors(ctx)
    finally:
        unlimited()
    ctx.healed(fault)
    ctx.enqueue(ctx.opts.jobs // 3, work_s=(0.05, 0.2))
    ctx.wait_done()
    polled = [d.slot for d in ctx.fleet.daemons
              if any(fault.at < at and mode == "polling" for at, mode in ctx.mode_changes(d.slot))]

    def on_streams() -> bool:
        return all((ctx.mode_changes(d.slot) or [(0.0, "")])[-1][1] == "streams"
                   for d in ctx.fleet.daemons)

    try:
        ctx.wait(on_streams, timeout_s=15, what="every daemon back on streams")
    except AssertionError as exc:
        ctx.check(False, f"not every daemon returned to streams: {exc}")
    ctx.notes.update(redis_oom_refusals=refused, slots_polling=polled,
                     jobs_enqueued_while_full=len(full))
    ctx.check(refused > 0, "Redis refused no command at maxmemory")
    ctx.check(bool(polled), "no daemon fell back to polling while Redis refused writes")
    ctx.probe_maintenance()


SCENARIOS = [
    Scenario("pg_disk_full", "the database's disk (a tmpfs) filled to the last byte, then freed",
             pg_disk_full, own_cluster=_disk, slot_env=_admin_env, claim_loss_possible=True),
    Scenario("redis_maxmemory", "Redis at maxmemory with noeviction: XADD refused",
             redis_maxmemory),
]
