"""The workflow share of the chaos load (docs/workflows.md): small batches with an
``on_success`` and an ``on_complete`` callback (a third of them with a member failing
non-retryably on purpose, so ``on_success`` is cancelled) and chains of three links,
enqueued through gochatd's ``Client`` (``batch``, ``chain``) alongside a scenario's
ordinary load, so the scenario's faults hit them too.

The invariant "callbacks exactly once" (``check``), from what the database recorded:

- every batch the producer saw acknowledged is in ``gochatd_batches`` with its members;
- ``on_complete`` is released exactly once (one ``chaos_releases`` row), completes once (one
  transition to ``completed``), and runs at least once; a run beyond the completing one must
  be explained as any repeated execution is (its daemon killed, its lease lost, ...):
  a callback that completed twice, or ran twice without such a reason, is a violation;
- ``on_success`` likewise when every member completed; otherwise it is cancelled with
  ``dependency_failed``, never released, never claimed, never run;
- a callback is released (or ``on_success`` cancelled) by the very transaction that wrote
  its last (a failing) member's final state: the audit records each one's transaction id;
- no callback run started before its last member's final state committed: its claims come
  after that member's final transition in the audit's order (one sequence, clock-free), and
  its handler's start by the database clock is not before the members' ``completed_at`` /
  ``failed_at`` (skipped where the scenario steps the database clock);
- a callback saw every member (``ctx.dependencies()``) in its final state;
- chains ran in order: each link completed, released once after the one before it
  completed, started after it by both measures, and read its result.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from benchmarks.chaos.database import TERMINAL, ScenarioDb, Snapshot, Transition
from benchmarks.chaos.invariants import Checker
from gochatd.client.client import Client
from gochatd.new_job import NewJob

#: Batches and chains per ordinary job enqueued with them: one batch (3-4 members, two
#: callbacks) per 20 jobs, one chain (3 links) per 40: about a third more jobs. Callbacks
#: and links run longer than members, so that faults find some of them in flight.
JOBS_PER_BATCH = 20
JOBS_PER_CHAIN = 40
CHAIN_LINKS = 3
#: Enqueues smaller than this carry no workflows (probes, a few long jobs).
MIN_LOAD = 10
MEMBER_WORK_S = (0.05, 0.3)
CALLBACK_WORK_S = (0.3, 0.9)
#: Callbacks and links go ahead of the waiting load once released (docs/priority.md), so
#: they run while the scenario's fault is on, not only after its backlog.
CALLBACK_PRIORITY = 5


@dataclass(frozen=True)
class BatchRecord:
    batch_id: int
    members: tuple[int, ...]
    failing: tuple[int, ...]
    on_success: int
    on_complete: int


@dataclass
class FlowLoad:
    batches: list[BatchRecord] = field(default_factory=list)
    chains: list[tuple[int, ...]] = field(default_factory=list)

    def links(self) -> set[int]:
        return {link for chain in self.chains for link in chain}


@dataclass
class Enqueued:
    ids: list[int]
    expected_dead: list[int]
    with_effect: list[int]
    work_s: float


def _member(rng: random.Random, queue: str, fail: bool) -> NewJob:
    payload: dict[str, Any] = {"work_s": round(rng.uniform(*MEMBER_WORK_S), 3), "effect": True}
    if fail:
        payload["fail_hard"] = True
    return NewJob("chaos:work", payload, queue=queue)


def _flow(rng: random.Random, queue: str, **payload: Any) -> NewJob:
    return NewJob("chaos:flow", {"work_s": round(rng.uniform(*CALLBACK_WORK_S), 3),
                                 "effect": True, **payload}, queue=queue,
                  priority=CALLBACK_PRIORITY)


def enqueue(db: ScenarioDb, load: FlowLoad, rng: random.Random, count: int,
            queue: str) -> Enqueued:
    """The workflows that go with ``count`` ordinary jobs, written and recorded in
    ``load``."""
    batches = max(1, count // JOBS_PER_BATCH)
    chains = max(1, count // JOBS_PER_CHAIN)
    plans = []
    for n in range(len(load.batches), len(load.batches) + batches):
        size = rng.choice((3, 4))
        failing = n % 3 == 1  # a third of the scenario's batches: one member fails for good
        members = [_member(rng, queue, failing and i == 0) for i in range(size)]
        plans.append((members, _flow(rng, queue, role="on_success"),
                      _flow(rng, queue, role="on_complete")))
    links = [[_flow(rng, queue, role="link", step=i) for i in range(CHAIN_LINKS)]
             for _ in range(chains)]
    out = Enqueued([], [], [], 0.0)
    for members, success, complete in plans:
        out.work_s += sum(float(j.payload["work_s"]) for j in (*members, success, complete)
                          if j.payload)
    out.work_s += sum(float(j.payload["work_s"]) for c in links for j in c if j.payload)

    async def main() -> None:
        async with Client(db.app_url, db.redis_url, redis_cluster=db.redis_cluster) as client:
            for members, success, complete in plans:
                batch = await client.batch(members, on_success=success, on_complete=complete)
                ids = tuple(j.id for j in batch.jobs)
                failing = tuple(i for i, m in zip(ids, members, strict=True)
                                if m.payload and m.payload.get("fail_hard"))
                assert batch.on_success is not None and batch.on_complete is not None
                load.batches.append(BatchRecord(batch.id, ids, failing, batch.on_success.id,
                                                batch.on_complete.id))
                out.ids += [*ids, batch.on_success.id, batch.on_complete.id]
                out.with_effect += [*ids, batch.on_success.id, batch.on_complete.id]
                if failing:
                    out.expected_dead += [*failing, batch.on_success.id]
            for chain in links:
                jobs = await client.chain(chain)
                load.chains.append(tuple(j.id for j in jobs))
                out.ids += [j.id for j in jobs]
                out.with_effect += [j.id for j in jobs]

    trio.run(main)
    return out


# -- reading back ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FlowJob:
    status: str
    error_class: str | None
    batch_id: int | None
    #: When its final state was written, by the database clock: completed_at / failed_at.
    final_at: float | None


@dataclass(frozen=True)
class FlowRun:
    fence: int
    outcome: str | None
    db_started_at: float
    seen: list[Any] | None


@dataclass
class FlowRows:
    jobs: dict[int, FlowJob]
    batches: dict[int, tuple[int, int | None, int | None]]  # id -> size, on_success, on_complete
    members: dict[int, list[int]]  # batch id -> member ids
    releases: dict[int, list[tuple[int, int]]]  # job id -> (audit id, txid) of its releases
    runs: dict[int, list[FlowRun]]
    txids: dict[int, int]  # audited transition id -> the transaction that wrote it


def read(db: ScenarioDb, ids: set[int]) -> FlowRows:
    jobs: dict[int, FlowJob] = {}
    members: dict[int, list[int]] = defaultdict(list)
    for job_id, status, error_class, batch_id, completed, failed in db.query(
        "SELECT id, status, error_class, batch_id, extract(epoch FROM completed_at)::float8,"
        " extract(epoch FROM failed_at)::float8 FROM background_jobs"
        " WHERE id = ANY(%s) OR batch_id IS NOT NULL ORDER BY id", [sorted(ids)]):
        final = max((t for t in (completed, failed) if t is not None), default=None)
        jobs[int(job_id)] = FlowJob(str(status), error_class, batch_id, final)
        if batch_id is not None:
            members[int(batch_id)].append(int(job_id))
    batches = {int(r[0]): (int(r[1]), r[2], r[3]) for r in db.query(
        "SELECT id, size, on_success_id, on_complete_id FROM gochatd_batches")}
    releases: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for rel_id, job_id, txid in db.query("SELECT id, job_id, txid FROM chaos_releases ORDER BY id"):
        releases[int(job_id)].append((int(rel_id), int(txid)))
    txids = {int(r[0]): int(r[1]) for r in db.query(
        "SELECT id, txid FROM chaos_transitions WHERE job_id = ANY(%s)", [sorted(ids)])}
    runs: dict[int, list[FlowRun]] = defaultdict(list)
    for job_id, fence, outcome, db_started_at, seen in db.executions(
        "SELECT job_id, fence, outcome, db_started_at, seen FROM chaos_executions"
        " WHERE job_id = ANY(%s) ORDER BY id", [sorted(ids)]):
        runs[int(job_id)].append(FlowRun(int(fence), outcome, float(db_started_at), seen))
    return FlowRows(jobs, batches, dict(members), dict(releases), dict(runs), txids)


# -- the invariant -----------------------------------------------------------------------------

#: Why the run of (job id, fence) was repeated: None is unexplained.
Why = Callable[[int, int], str | None]


def why_from(checker: Checker) -> Why:
    """The reasons the at-least-once invariants give (``Checker._why``)."""

    def why(job_id: int, fence: int) -> str | None:
        job = checker.snap.jobs.get(job_id)
        run = next((e for e in checker.runs[job_id] if e.fence == fence), None)
        return None if job is None or run is None else checker._why(job, run)

    return why


@dataclass
class FlowFindings:
    violations: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    reasons: Counter[str] = field(default_factory=Counter)


class FlowChecker:
    def __init__(self, load: FlowLoad, rows: FlowRows, snap: Snapshot, why: Why,
                 clock_comparable: bool) -> None:
        self.load = load
        self.rows = rows
        self.why = why
        self.clock_comparable = clock_comparable
        self.moves: dict[int, list[Transition]] = defaultdict(list)
        for t in snap.transitions:
            self.moves[t.job_id].append(t)
        self.out = FlowFindings()
        self.counts: Counter[str] = Counter()

    def fail(self, message: str) -> None:
        self.out.violations.append(message)

    def run(self) -> FlowFindings:
        for batch in self.load.batches:
            self.batch(batch)
        for chain in self.load.chains:
            self.chain(chain)
        c = self.counts
        self.out.figures = {
            "batches": len(self.load.batches),
            "batches_with_failing_member": sum(1 for b in self.load.batches if b.failing),
            "callbacks": 2 * len(self.load.batches),
            "callbacks_released": c["released"],
            "callbacks_completed": c["completed"],
            "on_success_cancelled": c["cancelled"],
            "callback_runs": c["runs"],
            "callback_runs_repeated": c["repeated"],
            "callback_repeats_why": dict(self.out.reasons),
            "chains": len(self.load.chains),
            "chain_links": sum(len(ch) for ch in self.load.chains),
            "chain_link_runs": c["link_runs"],
            "violations": len(self.out.violations),
        }
        return self.out

    # -- helpers ---------------------------------------------------------------------------

    def final(self, job_id: int) -> Transition | None:
        """The transition that moved the job to its final state."""
        return next((t for t in reversed(self.moves[job_id]) if t.new_status in TERMINAL), None)

    def claims(self, job_id: int) -> list[Transition]:
        return [t for t in self.moves[job_id] if t.new_status == "running"]

    def completions(self, job_id: int) -> int:
        return sum(1 for t in self.moves[job_id] if t.new_status == "completed")

    def after(self, job_id: int, what: str, before: list[int]) -> None:
        """``job_id`` ran only after every job of ``before`` reached its final state: its
        release and claims follow their final transitions (audit order), and each run's
        start by the database clock follows their completed_at / failed_at."""
        ends = [self.final(j) for j in before]
        if any(e is None for e in ends):
            self.fail(f"{what} {job_id}: a job it waits on has no final state recorded")
            return
        last = max(e.id for e in ends if e is not None)
        if any(txid != self.rows.txids.get(last) for _, txid in self.rows.releases.get(job_id, [])):
            self.fail(f"{what} {job_id}: released by another transaction than the one that "
                      "wrote its last dependency's final state")
        if any(t.id < last for t in self.claims(job_id)):
            self.fail(f"{what} {job_id}: claimed before its last dependency's final state "
                      "was written")
        stamps = [self.rows.jobs[j].final_at for j in before if j in self.rows.jobs]
        if not self.clock_comparable or any(s is None for s in stamps):
            return
        last_at = max(s for s in stamps if s is not None)
        started = [r.db_started_at for r in self.rows.runs.get(job_id, [])]
        if started and min(started) < last_at:
            self.fail(f"{what} {job_id}: a run started {last_at - min(started):.3f}s before "
                      "its last dependency's final state (database clock)")

    def ran_once(self, job_id: int, what: str) -> None:
        """Released once, completed once, every extra run explained."""
        job = self.rows.jobs.get(job_id)
        releases = len(self.rows.releases.get(job_id, []))
        self.counts["released"] += min(releases, 1)
        if releases != 1:
            self.fail(f"{what} {job_id}: released {releases} times (expected once)")
        if job is None or job.status != "completed":
            self.fail(f"{what} {job_id}: {job.status if job else 'missing'}, not completed")
            return
        self.counts["completed"] += 1
        if self.completions(job_id) != 1:
            self.fail(f"{what} {job_id}: completed {self.completions(job_id)} times")
        runs = self.rows.runs.get(job_id, [])
        self.counts["runs"] += len(runs)
        if not runs:
            self.fail(f"{what} {job_id}: completed without a run")
        completing = next((t.fence for t in self.moves[job_id] if t.new_status == "completed"),
                          0)
        for run in runs:
            if run.fence == completing:
                continue
            self.counts["repeated"] += 1
            reason = self.why(job_id, run.fence)
            if reason is None:
                self.fail(f"{what} {job_id}: ran again at fence {run.fence} ({run.outcome}) "
                          "with no fault to explain it")
            else:
                self.out.reasons[reason] += 1
        if sum(1 for r in runs if r.fence == completing) > 1:
            self.fail(f"{what} {job_id}: two runs under fence {completing}")

    def saw(self, job_id: int, what: str, expected: dict[int, str]) -> None:
        for run in self.rows.runs.get(job_id, []):
            if run.seen is None:
                continue  # interrupted before it read its dependencies
            got = {int(s[0]): str(s[1]) for s in run.seen}
            if got != expected:
                self.fail(f"{what} {job_id}: saw {got}, the members ended {expected}")
                return

    # -- batches and chains ----------------------------------------------------------------

    def batch(self, b: BatchRecord) -> None:
        where = f"batch {b.batch_id}"
        recorded = self.rows.batches.get(b.batch_id)
        if recorded != (len(b.members), b.on_success, b.on_complete):
            self.fail(f"{where}: recorded as {recorded}")
        if sorted(self.rows.members.get(b.batch_id, [])) != sorted(b.members):
            self.fail(f"{where}: members {self.rows.members.get(b.batch_id)}, "
                      f"enqueued {list(b.members)}")
        states = {m: self.rows.jobs[m].status if m in self.rows.jobs else "missing"
                  for m in b.members}
        if any(s not in TERMINAL for s in states.values()):
            self.fail(f"{where}: members not finished {states}")
            return
        all_ok = all(s == "completed" for s in states.values())
        if all_ok == bool(b.failing):
            self.fail(f"{where}: members ended {states}, failing on purpose: {list(b.failing)}")
        self.ran_once(b.on_complete, f"{where} on_complete")
        self.after(b.on_complete, f"{where} on_complete", list(b.members))
        self.saw(b.on_complete, f"{where} on_complete", states)
        if all_ok:
            self.ran_once(b.on_success, f"{where} on_success")
            self.after(b.on_success, f"{where} on_success", list(b.members))
            self.saw(b.on_success, f"{where} on_success", states)
        else:
            self.cancelled(b.on_success, f"{where} on_success", list(b.members))

    def cancelled(self, job_id: int, what: str, failing: list[int]) -> None:
        job = self.rows.jobs.get(job_id)
        if job is None or job.status != "cancelled" or job.error_class != "dependency_failed":
            self.fail(f"{what} {job_id}: {job}, expected cancelled (dependency_failed)")
        else:
            self.counts["cancelled"] += 1
        if self.rows.releases.get(job_id) or self.claims(job_id) or self.rows.runs.get(job_id):
            self.fail(f"{what} {job_id}: released, claimed or run although a member failed")
        by = {self.rows.txids.get(t.id) for t in self.moves[job_id] if t.new_status == "cancelled"}
        failed = {self.rows.txids.get(e.id) for m in failing
                  if (e := self.final(m)) is not None and e.new_status != "completed"}
        if not by or not by <= failed:
            self.fail(f"{what} {job_id}: not cancelled by the transaction that ended a member")

    def chain(self, links: tuple[int, ...]) -> None:
        where = f"chain {links[0]}"
        for step, link in enumerate(links):
            self.counts["link_runs"] += len(self.rows.runs.get(link, []))
            job = self.rows.jobs.get(link)
            if job is None or job.status != "completed" or self.completions(link) != 1:
                self.fail(f"{where}: link {step} ({link}) {job}, completed "
                          f"{self.completions(link)} times")
                continue
            if step == 0:
                continue
            prev = links[step - 1]
            if len(self.rows.releases.get(link, [])) != 1:
                self.fail(f"{where}: link {step} released "
                          f"{len(self.rows.releases.get(link, []))} times")
            self.after(link, f"{where} link {step}", [prev])
            for run in self.rows.runs.get(link, []):
                if run.seen is not None and run.seen != [[prev, "completed", {"step": step - 1}]]:
                    self.fail(f"{where}: link {step} read {run.seen}, not link {step - 1}'s result")
                    break


def check(db: ScenarioDb, load: FlowLoad, snap: Snapshot, why: Why,
          clock_comparable: bool) -> FlowFindings:
    ids = {j for b in load.batches for j in (*b.members, b.on_success, b.on_complete)}
    ids |= load.links()
    if not ids:
        return FlowFindings(figures={"batches": 0, "chains": 0, "violations": 0})
    rows = read(db, ids)
    return FlowChecker(load, rows, snap, why, clock_comparable).run()
