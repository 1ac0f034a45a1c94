"""What a scenario is, and the context it runs in: the services, the fleet, the scenario's
database, the jobs it enqueued, the faults it injected, and helpers that wait on conditions
with deadlines (never sleeping to synchronise)."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from benchmarks.chaos import flows
from benchmarks.chaos.database import JobSpec, ScenarioDb
from benchmarks.chaos.fleet import Fleet
from benchmarks.chaos.invariants import Fault
from benchmarks.chaos.postgres import SUPERUSER, PgCluster
from benchmarks.chaos.proxy import FaultProxy
from benchmarks.chaos.redis_cluster import RedisCluster
from benchmarks.chaos.redis_server import RedisServer
from benchmarks.chaos.settings import Options, Timing
from benchmarks.chaos.wait import hold_for, poll_until

#: A delayed probe job must start within this long of its due time.
DELAYED_LATENESS_BOUND_S = 2.0
#: A planted expired lease must be reaped within reap_interval_s plus this.
REAP_SLACK_S = 2.0
#: The slowest drain a scenario waits for, jobs/s: below it the fleet is stuck, not slow.
MIN_DRAIN_PER_S = 40.0


@dataclass
class Services:
    base: Path
    cluster: PgCluster
    redis: RedisServer
    proxy: FaultProxy
    pg_listeners: list[str]
    redis_listeners: list[str]
    pg_ports: list[int]
    redis_ports: list[int]


class OwnCluster(Protocol):
    """A scenario's own PostgreSQL (a primary and a standby, a cluster on a small disk, one
    under faketime): started before its database is created, stopped after it is dropped.
    The daemons reach it directly (not through the fault proxy)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def url(self, dbname: str, user: str = SUPERUSER, port: int | None = None) -> str: ...


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    run: Callable[[Context], None]
    #: Extra daemon environment for every slot, and per slot.
    env: Mapping[str, str] = field(default_factory=dict)
    slot_env: Callable[[int], dict[int, dict[str, str]]] | None = None
    timing: Callable[[Timing], Timing] | None = None
    start_fleet: bool = True
    #: The scenario breaks database connections: a claim's reply may be lost.
    claim_loss_possible: bool = False
    #: Two executions of one job may overlap in time (a partitioned daemon cannot be told).
    overlap_allowed: bool = False
    #: Daemons exit on their own (poison job); otherwise any such exit is a violation.
    crashes_allowed: bool = False
    #: The fleet and the producer use a 3-master Redis Cluster of the scenario's own
    #: (``ctx.redis_cluster``; reached directly, not through the fault proxy).
    redis_cluster: bool = False
    #: The scenario's database lives on a PostgreSQL of its own (``ctx.cluster``).
    own_cluster: Callable[[Path], OwnCluster] | None = None
    #: Its ordinary load carries batches and chains (``flows``); off where they would
    #: blur what the scenario measures (shares of starts, drain rates, a burst's size).
    workflows: bool = True
    #: The scenario steps the database's clock: runs are ordered by the audit, not by it.
    db_clock_jumps: bool = False


class Context:
    def __init__(
        self,
        scenario: Scenario,
        opts: Options,
        timing: Timing,
        services: Services,
        db: ScenarioDb,
        fleet: Fleet,
        redis_cluster: RedisCluster | None = None,
        cluster: OwnCluster | None = None,
    ) -> None:
        self.scenario = scenario
        #: The scenario's own PostgreSQL, when it has one (``Scenario.own_cluster``).
        self.cluster = cluster
        self.redis_cluster = redis_cluster
        self.opts = opts
        self.timing = timing
        self.services = services
        self.db = db
        self.fleet = fleet
        self.rng = random.Random(f"{opts.seed}:{scenario.name}")
        self.jobs: set[int] = set()
        self.expected_dead: set[int] = set()
        self.ghosts: set[int] = set()
        self.with_effect: set[int] = set()
        #: The batches and chains enqueued with the ordinary load (``flows``).
        self.flows = flows.FlowLoad()
        #: Jobs a documented loss took (an asynchronous standby's failover rolled them back):
        #: counted by the scenario, left out of the invariants.
        self.excluded: set[int] = set()
        self.faults: list[Fault] = []
        self.violations: list[str] = []
        self.notes: dict[str, Any] = {}
        self.work_s_total = 0.0
        #: Run by the runner once the fleet has stopped (services a scenario started).
        self.cleanups: list[Callable[[], None]] = []

    # -- waiting ---------------------------------------------------------------------------

    def tick(self) -> None:
        self.fleet.tick()

    def wait(self, probe: Callable[[], Any], *, timeout_s: float, what: str,
             interval_s: float = 0.1) -> Any:
        return poll_until(probe, timeout_s=timeout_s, what=what, interval_s=interval_s,
                          tick=self.tick)

    def hold(self, seconds: float) -> None:
        """The fault's own timing (a partition lasts this long)."""
        hold_for(seconds, self.tick)

    def drain_timeout_s(self) -> float:
        """How long the jobs enqueued so far may take, with every fault's slack: their work
        spread over the fleet's slots, and for each job at least 1/``MIN_DRAIN_PER_S`` s (a
        backlog of jobs with no work of their own drains at the claim path's pace: about
        250 jobs/s for 3 daemons on a 2-core machine, 70 over a 20 ms link)."""
        slots = self.opts.workers * self.timing.concurrency
        return (45.0 + 4 * self.timing.lease_s + 3.0 * self.work_s_total / max(1, slots)
                + len(self.jobs) / MIN_DRAIN_PER_S)

    def wait_done(self, ids: Iterable[int] | None = None, timeout_s: float | None = None) -> None:
        wanted = sorted(self.jobs if ids is None else ids)
        self.wait(lambda: self.db.unfinished(wanted) == 0,
                  timeout_s=timeout_s or self.drain_timeout_s(),
                  what=f"{len(wanted)} jobs terminal", interval_s=0.2)

    def wait_in_flight(self, slot: int, at_least: int = 1, timeout_s: float = 30.0) -> int:
        pid = self.fleet.pid(slot)

        def enough() -> int:
            running = self.db.in_flight(pid)
            return running if running >= at_least else 0

        found: int = self.wait(enough, timeout_s=timeout_s,
                               what=f"w{slot} running {at_least} handlers", interval_s=0.02)
        return found

    def check(self, ok: bool, message: str) -> None:
        if not ok:
            self.violations.append(message)

    # -- producing -------------------------------------------------------------------------

    def enqueue(
        self,
        count: int,
        *,
        work_s: tuple[float, float] = (0.05, 0.2),
        queue: str = "default",
        effect: bool = True,
        effect_share: float = 1.0,
        fail_times: int = 0,
        max_attempts: int = 25,
        job_type: str = "chaos:work",
        delay_s: float | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> list[int]:
        if (self.scenario.workflows and job_type == "chaos:work" and not fail_times
                and delay_s is None and extra is None and queue != "maint"
                and count >= flows.MIN_LOAD):
            self._enqueue_flows(count, queue)
        specs = []
        effects: list[bool] = []
        for _ in range(count):
            work = round(self.rng.uniform(*work_s), 3)
            self.work_s_total += work * (1 + min(fail_times, max_attempts))
            payload: dict[str, Any] = {"work_s": work, **(extra or {})}
            effects.append(effect and self.rng.random() < effect_share)
            if effects[-1]:
                payload["effect"] = True
            if fail_times:
                payload["fail_times"] = fail_times
            specs.append(JobSpec(job_type, payload, queue, max_attempts, delay_s))
        ids = self.db.enqueue(specs)
        self.jobs.update(ids)
        self.with_effect.update(i for i, e in zip(ids, effects, strict=True) if e)
        if job_type == "chaos:exit" or fail_times >= max_attempts:
            self.expected_dead.update(ids)
        return ids

    def _enqueue_flows(self, count: int, queue: str) -> None:
        """Batches and chains with an ordinary load of ``count`` jobs, ahead of it."""
        out = flows.enqueue(self.db, self.flows, self.rng, count, queue)
        self.jobs.update(out.ids)
        self.with_effect.update(out.with_effect)
        self.expected_dead.update(out.expected_dead)
        self.work_s_total += out.work_s

    # -- faults ----------------------------------------------------------------------------

    def fault(self, kind: str, *, pids: Iterable[int] = (), detail: str = "",
              at: float | None = None) -> Fault:
        fault = Fault(kind, at if at is not None else time.time(), None, tuple(pids), detail)
        self.faults.append(fault)
        return fault

    def healed(self, fault: Fault) -> None:
        i = self.faults.index(fault)
        self.faults[i] = Fault(fault.kind, fault.at, time.time(), fault.pids, fault.detail)

    def mode_changes(self, slot: int) -> list[tuple[float, str]]:
        """(wall clock, mode) of every ``dispatch_mode`` event the daemon in ``slot`` logged."""
        out = []
        for event in self.fleet.events("dispatch_mode", slot):
            stamp = event.get("timestamp")
            if isinstance(stamp, str):
                out.append((datetime.fromisoformat(stamp).timestamp(), str(event.get("mode"))))
        return sorted(out)

    def proxy_counts(self, names: Iterable[str]) -> dict[str, int]:
        """The fault proxy's counters (connections cut or refused, chunks held back by a
        black-hole), summed over ``names``; diff two readings to get one fault's share."""
        total: dict[str, int] = {}
        for name in names:
            for key, value in dataclasses.asdict(self.services.proxy.stats(name)).items():
                total[key] = total.get(key, 0) + int(value)
        return total

    def note_proxy(self, before: dict[str, int], names: Iterable[str]) -> None:
        after = self.proxy_counts(names)
        diff = {k: after[k] - before.get(k, 0) for k in after if k != "accepted"}
        self.notes["proxy"] = {k: v for k, v in diff.items() if v}

    def pg_listener(self, slot: int) -> str:
        return self.services.pg_listeners[slot]

    def redis_listener(self, slot: int) -> str:
        return self.services.redis_listeners[slot]

    # -- invariant 5: maintenance continues ------------------------------------------------

    def probe_maintenance(self, count: int | None = None) -> None:
        """After the fault: delayed jobs still run on time and expired leases are still
        reaped. Enqueues ``count`` jobs due in 1 s and plants ``count`` jobs whose lease
        (held by nobody) runs out in 0.5 s, on the ``maint`` queue."""
        n = count or (3 if self.opts.smoke else 8)
        delayed = self.enqueue(n, work_s=(0.02, 0.02), queue="maint", effect=False, delay_s=1.0)
        ghosts = self.db.insert_ghosts(n, 0.5, {"work_s": 0.02})
        self.jobs.update(ghosts)
        self.ghosts.update(ghosts)
        self.wait_done(delayed + ghosts, timeout_s=20.0 + 2 * self.timing.lease_s)
        rows = self.db.query(
            "SELECT job_id, old_status, new_status, error_class, at, scheduled_at, lease_expires_at"
            " FROM chaos_transitions WHERE job_id = ANY(%s) ORDER BY id", [delayed + ghosts])
        lateness: list[float] = []
        reap: list[float] = []
        expiry: dict[int, float] = {}
        first_claim: set[int] = set()
        for job_id, old, new, error_class, at, scheduled_at, lease_expires_at in rows:
            if old is None and new == "running" and lease_expires_at is not None:
                expiry[job_id] = float(lease_expires_at)
            elif new == "running" and job_id in delayed and job_id not in first_claim:
                first_claim.add(job_id)
                lateness.append(float(at) - float(scheduled_at))
            elif (old == "running" and new == "retrying" and error_class == "lease_expired"
                  and job_id in expiry):
                reap.append(float(at) - expiry[job_id])
        late = max(lateness, default=0.0)
        reaped = max(reap, default=0.0)
        self.notes["maintenance"] = {
            "delayed_jobs": n, "delayed_max_lateness_s": round(late, 3),
            "planted_leases": n, "reaped": len(reap), "reap_max_delay_s": round(reaped, 3),
        }
        self.check(len(lateness) == n, f"maintenance: {n - len(lateness)} delayed jobs never claimed")
        self.check(late <= DELAYED_LATENESS_BOUND_S,
                   f"maintenance: a delayed job started {late:.2f}s after its due time")
        self.check(len(reap) == n, f"maintenance: {n - len(reap)} planted leases not reaped")
        self.check(reaped <= self.timing.reap_interval_s + REAP_SLACK_S,
                   f"maintenance: an expired lease was reaped {reaped:.2f}s late")
