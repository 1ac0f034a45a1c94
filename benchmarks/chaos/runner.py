"""Services up once per run (private PostgreSQL cluster, redis-server, fault proxy with one
PostgreSQL and one Redis listener per daemon slot); then per scenario: a fresh database, a
fresh fleet, the scenario, a graceful stop, the invariants, a result. Everything started
is stopped and every temp dir removed, also on failure and Ctrl-C."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from benchmarks.chaos import flows
from benchmarks.chaos.database import ScenarioDb
from benchmarks.chaos.fleet import REPO_ROOT, Fleet
from benchmarks.chaos.invariants import Checker, Expectations, recovery
from benchmarks.chaos.postgres import APP_ROLE, PgCluster
from benchmarks.chaos.proxy import FaultProxy
from benchmarks.chaos.redis_cluster import RedisCluster
from benchmarks.chaos.redis_server import RedisServer, free_port
from benchmarks.chaos.report import ScenarioResult
from benchmarks.chaos.scenarios import SCENARIOS
from benchmarks.chaos.scenarios.base import Context, OwnCluster, Scenario, Services
from benchmarks.chaos.settings import QUEUES, Options, Timing

#: Faults after which a stranded job must be reaped within ``Timing.recovery_bound_s``.
STRANDING_FAULTS = {"sigkill", "poison_exit", "pg_blackhole", "pg_refuse"}


def _common_env(timing: Timing, scenario: Scenario) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GOCHAT_", "CHAOS_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env.update({
        "GOCHAT_ADMIN_LISTEN": "off",
        "GOCHAT_LOG_FORMAT": "json",
        "GOCHAT_LOG_LEVEL": "info",
        "GOCHAT_WORKER_QUEUES": ",".join(f"{q}={w}" for q, w in QUEUES.items()),
    })
    env.update(timing.daemon_env())
    env.update(scenario.env)
    return env


def _slot_env(
    services: Services, db: ScenarioDb, scenario: Scenario, workers: int,
    redis_cluster: RedisCluster | None = None, own: OwnCluster | None = None,
) -> dict[int, dict[str, str]]:
    extra = scenario.slot_env(workers) if scenario.slot_env else {}
    out: dict[int, dict[str, str]] = {}
    for slot in range(workers):
        out[slot] = {
            "GOCHAT_DATABASE_URL": (own.url(db.name, APP_ROLE) if own is not None else
                                    services.cluster.url(db.name, APP_ROLE,
                                                         port=services.pg_ports[slot])),
            "GOCHAT_REDIS_URL": f"redis://127.0.0.1:{services.redis_ports[slot]}/0",
            "CHAOS_RECORD_URL": db.record_url,
            **({"GOCHAT_REDIS_URL": redis_cluster.url, "GOCHAT_REDIS_CLUSTER": "true"}
               if redis_cluster is not None else {}),
            **extra.get(slot, {}),
        }
    return out


def run_scenario(scenario: Scenario, opts: Options, services: Services) -> ScenarioResult:
    timing = scenario.timing(opts.timing) if scenario.timing else opts.timing
    result = ScenarioResult(scenario.name, scenario.summary, timing=dataclasses.asdict(timing))
    workdir = services.base / scenario.name
    workdir.mkdir()
    started = time.monotonic()
    services.proxy.reset()
    services.redis.flushall()
    with contextlib.ExitStack() as stack:
        redis_cluster = None
        if scenario.redis_cluster:
            redis_cluster = RedisCluster(workdir / "redis-cluster")
            stack.callback(redis_cluster.stop)
            redis_cluster.start()
        own = None
        if scenario.own_cluster:
            own = scenario.own_cluster(workdir)
            stack.callback(own.stop)
            try:
                own.start()
            except Exception as exc:  # a setup that cannot run here: a failed result
                result.error = f"{type(exc).__name__}: {exc}"[:2000]
                result.violations = [f"scenario setup failed: {result.error}"]
                result.duration_s = round(time.monotonic() - started, 1)
                return result
        redis_url = redis_cluster.url if redis_cluster else services.redis.url
        db = ScenarioDb(own or services.cluster, f"chaos_{scenario.name}", redis_url,
                        redis_cluster=redis_cluster is not None,
                        record_on=services.cluster if own is not None else None)
        db.create()
        fleet = Fleet(workdir, opts.workers, _common_env(timing, scenario),
                      _slot_env(services, db, scenario, opts.workers, redis_cluster, own))
        ctx = Context(scenario, opts, timing, services, db, fleet, redis_cluster, own)
        _run_and_judge(ctx, result, workdir)
    result.duration_s = round(time.monotonic() - started, 1)
    return result


def _run_and_judge(ctx: Context, result: ScenarioResult, workdir: Path) -> None:
    scenario, opts, timing, db, fleet = ctx.scenario, ctx.opts, ctx.timing, ctx.db, ctx.fleet
    try:
        try:
            if scenario.start_fleet:
                fleet.start()
            scenario.run(ctx)
            ctx.wait_done()
        except Exception as exc:
            result.error = f"{type(exc).__name__}: {exc}"
            (workdir / "runner_error.txt").write_text(traceback.format_exc())
        except BaseException:  # Ctrl-C: no graceful stop, kill everything now
            fleet.cleanup()
            raise
        finally:
            try:
                fleet.tick()
                result.daemon_exit_codes = fleet.stop_all(timeout_s=timing.shutdown_grace_s + 15)
            finally:
                fleet.cleanup()
                for cleanup in reversed(ctx.cleanups):
                    cleanup()
        _judge(result, ctx, timing)
        if opts.keep:
            _dump(ctx, workdir / "snapshot.json")
    finally:
        db.close()
        with contextlib.suppress(Exception):
            db.drop()


def _judge(result: ScenarioResult, ctx: Context, timing: Timing) -> None:
    scenario, fleet = ctx.scenario, ctx.fleet
    snap = ctx.db.snapshot().without(ctx.excluded)
    expect = Expectations(
        enqueued=set(ctx.jobs) - ctx.excluded, expected_dead=set(ctx.expected_dead),
        ghosts=set(ctx.ghosts), with_effect=set(ctx.with_effect) - ctx.excluded,
        concurrency=timing.concurrency,
        claim_loss_possible=scenario.claim_loss_possible, overlap_allowed=scenario.overlap_allowed,
    )
    checker = Checker(snap, expect, fleet.deaths)
    findings = checker.run()
    figures = findings.figures
    violations = list(ctx.violations) + findings.violations
    flow = flows.check(ctx.db, ctx.flows, snap, flows.why_from(checker),
                       clock_comparable=not scenario.db_clock_jumps)
    result.workflows = flow.figures
    violations += [f"workflows: {v}" for v in flow.violations]
    if result.error:
        violations.insert(0, f"scenario failed: {result.error}")
    result.jobs = len(ctx.jobs)
    result.faults = dict(Counter(f.kind for f in ctx.faults))
    result.lost = figures.get("lost")
    result.stale_commits_accepted = figures.get("stale_commits_accepted")
    result.duplicate_executions = figures.get("duplicate_executions")
    result.duplicate_reasons = figures.get("duplicate_reasons", {})
    result.overlapping_executions = figures.get("overlapping_executions")
    result.fence_gaps = figures.get("fence_gaps", {})
    result.limits = figures.get("limits", {})
    if "max_overlap_s" in figures:
        ctx.notes["max_overlap_s"] = figures["max_overlap_s"]
    if figures.get("effects_repeated"):
        ctx.notes["side_effects_repeated"] = figures["effects_repeated"]
    result.stale_finishes = len(fleet.events("stale_finish_rejected"))
    result.leases_reaped = sum(
        1 for t in snap.transitions if t.cause == "lease_expired")
    rec = recovery(snap, ctx.faults)
    result.recovery_s = rec.get("recovery_s")
    result.recovery_mean_s = rec.get("recovery_mean_s")
    result.stranded_jobs = rec.get("stranded_jobs", 0)
    result.stranded_rerun_max_s = rec.get("stranded_rerun_max_s")
    result.stranded_reaped_max_s = rec.get("stranded_reaped_max_s")
    result.max_claim_latency_after_s = rec.get("max_claim_latency_after_s")
    result.p50_claim_latency_after_s = rec.get("p50_claim_latency_after_s")
    result.p99_claim_latency_after_s = rec.get("p99_claim_latency_after_s")
    stranding = [f for f in ctx.faults if f.kind in STRANDING_FAULTS]
    if stranding:
        worst = recovery(snap, stranding).get("stranded_reaped_max_s")
        if worst is not None and worst > timing.recovery_bound_s:
            violations.append(f"a stranded job's lease was reaped {worst:.2f}s after the fault "
                              f"(bound {timing.recovery_bound_s:.2f}s)")
    result.maintenance = ctx.notes.pop("maintenance", {})
    if not result.maintenance and not result.error:
        violations.append("the maintenance probe did not run")
    result.notes = ctx.notes
    unexpected = fleet.unexpected_exits()
    result.unexpected_exits = [f"w{d.slot} pid {d.pid} {d.cause}" for d in unexpected]
    if unexpected and not scenario.crashes_allowed:
        violations.append(f"daemons exited on their own: {result.unexpected_exits}")
    bad_stops = {k: v for k, v in result.daemon_exit_codes.items() if v != 0}
    if bad_stops:
        violations.append(f"daemons did not stop cleanly on SIGTERM (exit codes): {bad_stops}")
    for daemon in fleet.daemons:
        for path, text in daemon.stderr_texts():
            if "Traceback" in text:
                violations.append(f"{path.name} holds a traceback: {text.strip().splitlines()[-1][:200]}")
    result.violations = violations
    result.ok = not violations


def _dump(ctx: Context, path: Path) -> None:
    """With --keep: what the database recorded, for a post-mortem."""
    snap = ctx.db.snapshot()
    doc = {
        "faults": [dataclasses.asdict(f) for f in ctx.faults],
        "deaths": [dataclasses.asdict(d) for d in ctx.fleet.deaths],
        "jobs": [dataclasses.asdict(j) for j in snap.jobs.values()],
        "executions": [dataclasses.asdict(e) for e in snap.executions],
        "transitions": [dataclasses.asdict(t) for t in snap.transitions],
        "effects": snap.effects,
    }
    path.write_text(json.dumps(doc), encoding="utf-8")


def start_services(base: Path, workers: int, stack: contextlib.ExitStack,
                   pg_settings: dict[str, str] | None = None) -> Services:
    cluster = PgCluster(base, free_port(), settings=pg_settings)
    stack.callback(cluster.stop)
    cluster.init()
    cluster.start()
    cluster.create_app_role()
    redis = RedisServer(base, free_port())
    stack.callback(redis.stop)
    redis.start()
    proxy = FaultProxy()
    stack.callback(proxy.stop)
    proxy.start()
    pg_listeners = [f"w{i}:pg" for i in range(workers)]
    redis_listeners = [f"w{i}:redis" for i in range(workers)]
    pg_ports = [proxy.add(name, "127.0.0.1", cluster.port) for name in pg_listeners]
    redis_ports = [proxy.add(name, "127.0.0.1", redis.port) for name in redis_listeners]
    return Services(base, cluster, redis, proxy, pg_listeners, redis_listeners, pg_ports, redis_ports)


def run(opts: Options, on_result: Callable[[ScenarioResult], None] | None = None) -> list[ScenarioResult]:
    base = Path(tempfile.mkdtemp(prefix="gochatd-chaos-"))
    results: list[ScenarioResult] = []
    try:
        with contextlib.ExitStack() as stack:
            services = start_services(base, opts.workers, stack, opts.pg_settings)
            for name in opts.scenarios:
                result = run_scenario(SCENARIOS[name], opts, services)
                results.append(result)
                if on_result is not None:
                    on_result(result)
    finally:
        if opts.keep:
            _keep_logs(base, Path(opts.keep))
        shutil.rmtree(base, ignore_errors=True)
    return results


def _keep_logs(base: Path, dest: Path) -> None:
    """Copy the daemons' logs (not the cluster's data) for a post-mortem."""
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for path in base.rglob("*"):
            wanted = path.suffix in (".log", ".err", ".txt", ".json")
            if path.is_file() and wanted and "data" not in path.parts:
                target = dest / path.relative_to(base)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    except OSError as exc:
        print(f"chaos: could not keep logs in {dest}: {exc}", file=sys.stderr)
