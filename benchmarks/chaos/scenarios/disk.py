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
from pathlib import Path
from typing import Any, cast

from benchmarks.chaos.disk import DiskCluster
from benchmarks.chaos.fleet import GOCHATD
from benchmarks.chaos.postgres import APP_ROLE
from benchmarks.chaos.producer import Producer
from benchmarks.chaos.redis_server import free_port
from benchmarks.chaos.scenarios.base import Context, OwnCluster, Scenario


def _admin_env(workers: int) -> dict[int, dict[str, str]]:
    return {0: {"GOCHAT_ADMIN_LISTEN": f"127.0.0.1:{free_port()}"}}


def _probe(ctx: Context, path: str) -> tuple[int, dict[str, Any]]:
    """(status, body) of w0's admin ``path``; (0, {}) when it does not answer."""
    url = f"http://{ctx.fleet.daemons[0].env['GOCHAT_ADMIN_LISTEN']}{path}"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
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
    full_s = 4.0 if smoke else 15.0
    url = disk.url(ctx.db.name, APP_ROLE)
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
        cli = _cli_enqueue(ctx, url)
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
        ctx.hold(2.0)  # load after the disk was freed
    finally:
        disk.release()
        produced = producer.stop()
    _account(ctx, produced.acked)
    code, out, err = cli
    if code == 0:  # it did commit: a job like any other
        ctx.jobs.add(int(json.loads(out)["id"]))
    lines = [line for line in err.splitlines() if line.strip()]
    ctx.notes.update(enqueues_refused=dict(produced.refused),
                     refused_while_full=refused_while_full, cli_exit=code, cli_stderr=err.strip()[:300],
                     readyz_while_full=sorted({json.dumps(b, sort_keys=True) for s, b in probes}))
    ctx.check(refused_while_full > 0, "no enqueue was refused while the disk was full")
    ctx.check(set(produced.refused) <= {"StoreUnavailable"},
              f"enqueues refused with other errors: {dict(produced.refused)}")
    ctx.check(code == 1 and len(lines) == 1 and "Traceback" not in err,
              f"gochatd enqueue on a full disk: exit {code}, stderr {err!r}")
    ctx.check(any(s == 503 for s, _ in probes), "/readyz never said not ready on a full disk")
    ctx.wait_done()
    stray = int(ctx.db.scalar(
        "SELECT count(*) FROM background_jobs WHERE NOT (id = ANY(%s))", [sorted(ctx.jobs)]))
    ctx.notes["rows_not_acknowledged"] = stray
    ctx.check(stray == 0, f"{stray} rows in background_jobs that no producer saw committed")
    ctx.probe_maintenance()


def _account(ctx: Context, acked: list[tuple[int, float, float]]) -> None:
    for job_id, _, work in acked:
        ctx.jobs.add(job_id)
        ctx.with_effect.add(job_id)
        ctx.work_s_total += work
    ctx.notes["jobs_acknowledged"] = len(acked)


def _disk(base: Path) -> OwnCluster:
    return DiskCluster(base)


SCENARIOS = [
    Scenario("pg_disk_full", "the database's disk (a tmpfs) filled to the last byte, then freed",
             pg_disk_full, own_cluster=_disk, slot_env=_admin_env, claim_loss_possible=True),
]
