"""The invariants, checked from what the database recorded once a scenario has finished
(every daemon stopped), and the figures the report shows.

1. Nothing lost: every enqueued job is terminal: ``completed``, or ``dead`` only where the
   scenario intends it.
2. No stale commit accepted: a job is completed at most once (the audit trigger saw one
   transition to ``completed`` and none out of it), and the completion was made by the
   execution holding the job's fence at that moment: an execution of that job with that
   fence, in the owner's process, that ran to its end (outcome ``ok``) before the commit.
   No (job, fence) pair ever ran twice.
3. Fence accounting: ``distinct fences executed == fence`` per job. Interrupted attempts
   are refunded (``attempts`` goes back down) but every claim takes a new fence, so a fence
   without an execution is a claim whose handler never started; each such gap must be
   explained: the claiming daemon died, the lease was a planted one (maintenance probe),
   or (only in scenarios that break the database connection) the claim's reply was lost
   and its lease ran out.
4. Limits: no daemon ran more handlers at once than ``worker.concurrency``; per-tenant
   limits do not exist in gochatd yet: ``n/a``.
5. Maintenance continues: checked by the scenario (delayed and lease-expiring jobs enqueued
   after the fault run within bounds); see ``scenarios.base``.

Also: overlapping executions of one job (two handlers of the same job running at the same
moment), handlers' side effects (a completed job's write is there; duplicates reported),
and every extra execution explained by why it happened.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.chaos.database import GHOST_OWNER, TERMINAL, Execution, JobRow, Snapshot, Transition
from benchmarks.chaos.fleet import Death

#: Clock reads of one host in two processes: an execution's recorded end precedes the
#: completion it caused; allow this much for timer granularity.
CLOCK_SLACK_S = 0.05


@dataclass(frozen=True)
class Fault:
    kind: str
    at: float  # wall clock
    until: float | None = None
    pids: tuple[int, ...] = ()
    detail: str = ""


@dataclass
class Expectations:
    enqueued: set[int]
    expected_dead: set[int] = field(default_factory=set)
    ghosts: set[int] = field(default_factory=set)
    with_effect: set[int] = field(default_factory=set)
    concurrency: int = 8
    claim_loss_possible: bool = False
    overlap_allowed: bool = False


@dataclass
class Findings:
    violations: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def fail(self, message: str) -> None:
        self.violations.append(message)


def owner_pid(locked_by: str | None) -> int | None:
    """``host:pid:random`` -> pid."""
    if not locked_by:
        return None
    parts = locked_by.split(":")
    if len(parts) >= 3 and parts[-2].isdigit():
        return int(parts[-2])
    return None


def _sample(ids: Iterable[int], n: int = 5) -> str:
    items = sorted(ids)
    more = f" (+{len(items) - n} more)" if len(items) > n else ""
    return ", ".join(str(i) for i in items[:n]) + more


class Checker:
    def __init__(self, snap: Snapshot, expect: Expectations, deaths: list[Death]) -> None:
        self.snap = snap
        self.expect = expect
        self.deaths = {d.pid: d for d in deaths}
        self.exits: dict[int, float] = {}
        for e in snap.executions:
            if e.outcome == "exit" and e.ended_at is not None:
                self.exits[e.pid] = e.ended_at
        self.runs: dict[int, list[Execution]] = defaultdict(list)
        for e in snap.executions:
            self.runs[e.job_id].append(e)
        self.moves: dict[int, list[Transition]] = defaultdict(list)
        for t in snap.transitions:
            self.moves[t.job_id].append(t)
        self.out = Findings()

    def run(self) -> Findings:
        self.lost()
        self.stale()
        self.fences()
        self.duplicates()
        self.overlaps_and_limits()
        self.effects()
        return self.out

    # -- helpers ---------------------------------------------------------------------------

    def death_time(self, pid: int) -> float | None:
        """When a process stopped running handlers: its poison exit, or its recorded death."""
        if pid in self.exits:
            return self.exits[pid]
        death = self.deaths.get(pid)
        return death.at if death is not None else None

    def effective_end(self, e: Execution) -> float | None:
        if e.ended_at is not None:
            return e.ended_at
        return self.death_time(e.pid)

    def ending(self, job_id: int, fence: int) -> Transition | None:
        """The transition that took the job out of ``running`` at ``fence``."""
        return next(
            (t for t in self.moves[job_id] if t.old_status == "running" and t.fence == fence
             and t.new_status != "running"),
            None,
        )

    # -- 1. nothing lost -------------------------------------------------------------------

    def lost(self) -> None:
        jobs = self.snap.jobs
        missing = [i for i in self.expect.enqueued if i not in jobs]
        unfinished = [i for i in self.expect.enqueued if i in jobs and jobs[i].status not in TERMINAL]
        wrongly_dead = [
            i for i in self.expect.enqueued
            if i in jobs and jobs[i].status in ("dead", "cancelled") and i not in self.expect.expected_dead
        ]
        not_dead = [i for i in self.expect.expected_dead if i in jobs and jobs[i].status == "completed"]
        lost = len(missing) + len(unfinished) + len(wrongly_dead)
        self.out.figures["lost"] = lost
        self.out.figures["dead_intended"] = sum(
            1 for i in self.expect.expected_dead if i in jobs and jobs[i].status == "dead")
        if missing:
            self.out.fail(f"lost: {len(missing)} enqueued jobs missing from the table ({_sample(missing)})")
        if unfinished:
            states = Counter(jobs[i].status for i in unfinished)
            self.out.fail(f"lost: {len(unfinished)} jobs not terminal {dict(states)} ({_sample(unfinished)})")
        if wrongly_dead:
            classes = Counter(jobs[i].error_class for i in wrongly_dead)
            self.out.fail(f"lost: {len(wrongly_dead)} jobs dead that should have completed "
                          f"{dict(classes)} ({_sample(wrongly_dead)})")
        if not_dead:
            self.out.fail(f"{len(not_dead)} poison/always-failing jobs completed ({_sample(not_dead)})")

    # -- 2. no stale commit accepted -------------------------------------------------------

    def stale(self) -> None:
        accepted_stale: list[str] = []
        double: list[int] = []
        left_terminal: list[int] = []
        for job_id, moves in self.moves.items():
            completions = [t for t in moves if t.new_status == "completed"]
            if len(completions) > 1:
                double.append(job_id)
            if any(t.old_status == "completed" for t in moves):
                left_terminal.append(job_id)
            for c in completions:
                pid = owner_pid(c.locked_by)
                match = [
                    e for e in self.runs[job_id]
                    if e.fence == c.fence and e.pid == pid and e.outcome == "ok"
                    and e.ended_at is not None and e.ended_at <= c.at + CLOCK_SLACK_S
                ]
                if not match:
                    seen = [(e.fence, e.pid, e.outcome) for e in self.runs[job_id]]
                    accepted_stale.append(
                        f"job {job_id}: completed at fence {c.fence} by pid {pid}, executions {seen}")
        per_fence = Counter((e.job_id, e.fence) for e in self.snap.executions)
        reused = sorted(k for k, n in per_fence.items() if n > 1)
        self.out.figures["stale_commits_accepted"] = len(accepted_stale) + len(double)
        if double:
            self.out.fail(f"{len(double)} jobs completed twice ({_sample(double)})")
        if left_terminal:
            self.out.fail(f"{len(left_terminal)} jobs left 'completed' ({_sample(left_terminal)})")
        if accepted_stale:
            self.out.fail(f"{len(accepted_stale)} completions not made by the fence holder's "
                          f"finished execution: {accepted_stale[:3]}")
        if reused:
            self.out.fail(f"{len(reused)} (job, fence) pairs executed twice: {reused[:5]}")

    # -- 3. fence accounting ---------------------------------------------------------------

    def fences(self) -> None:
        gaps: Counter[str] = Counter()
        unexplained: list[str] = []
        for job_id, job in self.snap.jobs.items():
            if job_id not in self.expect.enqueued:
                continue
            claims = {t.fence: t for t in self.moves[job_id] if t.new_status == "running"}
            executed = {e.fence for e in self.runs[job_id]}
            if executed - set(claims):
                unclaimed = sorted(executed - set(claims))
                unexplained.append(f"job {job_id}: executions at unclaimed fences {unclaimed}")
            if claims and max(claims) != job.fence:
                unexplained.append(f"job {job_id}: fence {job.fence} but last claim {max(claims)}")
            if len(executed) == job.fence:
                continue
            for fence, claim in sorted(claims.items()):
                if fence in executed:
                    continue
                pid = owner_pid(claim.locked_by)
                end = self.ending(job_id, fence)
                if claim.locked_by == GHOST_OWNER:
                    gaps["planted lease (probe)"] += 1
                elif pid is not None and self._died_holding(pid, claim, end):
                    gaps["claimed by a daemon that died"] += 1
                elif end is not None and end.cause == "interrupted":
                    gaps["claimed during shutdown, handed back"] += 1
                elif (end is not None and end.cause == "lease_expired"
                      and self.expect.claim_loss_possible):
                    gaps["claim reply lost, lease expired"] += 1
                else:
                    how = f"{end.new_status}/{end.cause}" if end else "never ended"
                    unexplained.append(f"job {job_id}: fence {fence} claimed by {claim.locked_by}, "
                                       f"never executed, then {how}")
        self.out.figures["fence_gaps"] = dict(gaps)
        # Every claim charges an attempt; only a shutdown interruption refunds it.
        miscounted = []
        for job_id, job in self.snap.jobs.items():
            refunds = sum(1 for t in self.moves[job_id] if t.cause == "interrupted")
            if job_id in self.expect.enqueued and job.attempts != job.fence - refunds:
                miscounted.append(f"job {job_id}: attempts {job.attempts}, fence {job.fence}, "
                                  f"refunds {refunds}")
        if miscounted:
            self.out.fail(f"{len(miscounted)} jobs with attempts != claims - refunds: {miscounted[:3]}")
        if unexplained:
            self.out.fail(f"{len(unexplained)} fence gaps unexplained: {unexplained[:3]}")

    def _died_holding(self, pid: int, claim: Transition, end: Transition | None) -> bool:
        died = self.death_time(pid)
        return died is not None and died >= claim.at - CLOCK_SLACK_S and (
            end is None or died <= end.at + CLOCK_SLACK_S
        )

    # -- duplicates: every extra execution, and why ----------------------------------------

    def duplicates(self) -> None:
        reasons: Counter[str] = Counter()
        unexplained: list[str] = []
        extra = 0
        for job_id, runs in self.runs.items():
            job = self.snap.jobs.get(job_id)
            if job is None or len(runs) < 2:
                continue
            extra += len(runs) - 1
            final = max(e.fence for e in runs)
            for e in runs:
                if e.fence == final and job.status == "completed":
                    continue
                reason = self._why(job, e)
                if reason is None:
                    unexplained.append(f"job {job_id} fence {e.fence} ({e.outcome})")
                else:
                    reasons[reason] += 1
        self.out.figures["duplicate_executions"] = extra
        self.out.figures["duplicate_reasons"] = dict(reasons)
        if unexplained:
            self.out.fail(f"{len(unexplained)} repeated executions unexplained: {unexplained[:3]}")

    def _why(self, job: JobRow, e: Execution) -> str | None:
        end = self.ending(job.id, e.fence)
        died = self.death_time(e.pid)
        death = self.deaths.get(e.pid)
        if e.outcome == "exit":
            return "poison job took its daemon down"
        if e.ended_at is None and died is not None:
            cause = death.cause if death is not None else "exit"
            if e.pid in self.exits:
                return "daemon taken down by a poison job"
            return {"sigkill": "daemon killed (SIGKILL)", "sigterm": "daemon stopped mid-handler"}.get(
                cause, "daemon exited on its own")
        if end is None:
            return None if job.status == "completed" else "final attempt"
        if end.cause == "interrupted":
            return "interrupted by shutdown (attempt refunded)"
        if end.cause == "lease_expired":
            if e.outcome == "ok" and died is not None and died <= end.at + CLOCK_SLACK_S:
                return "handler finished; its daemon died before the commit"
            if e.outcome == "ok":
                return "lease expired; its late completion was rejected by fence"
            if e.outcome == "cancelled":
                return "lease lost; handler stopped"
            if e.outcome == "failed":
                return "handler failed; the lease expired before its retry was recorded"
            return "lease expired"
        if e.outcome == "failed" and end.new_status in ("retrying", "dead"):
            return "handler failed (retried)"
        if job.status == "dead" and end.new_status == "dead":
            return "final attempt"
        return None

    # -- overlaps and the concurrency limit ------------------------------------------------

    def overlaps_and_limits(self) -> None:
        overlaps: list[tuple[int, float]] = []
        open_ended = 0
        for job_id, runs in self.runs.items():
            ordered = sorted(runs, key=lambda e: e.started_at)
            for i, a in enumerate(ordered):
                a_end = self.effective_end(a)
                if a_end is None:
                    open_ended += 1
                for b in ordered[i + 1:]:
                    if a_end is None or b.started_at < a_end:
                        overlaps.append((job_id, (a_end or b.started_at) - b.started_at))
        self.out.figures["overlapping_executions"] = len(overlaps)
        if overlaps:
            self.out.figures["max_overlap_s"] = round(max(o for _, o in overlaps), 3)
        if open_ended:
            self.out.fail(f"{open_ended} executions never ended in a process that kept running")
        if overlaps and not self.expect.overlap_allowed:
            self.out.fail(f"{len(overlaps)} overlapping executions of one job: "
                          f"{[(j, round(o, 3)) for j, o in overlaps[:3]]} (job, seconds)")
        # worker.concurrency per process
        peak: dict[int, int] = {}
        by_pid: dict[int, list[tuple[float, int]]] = defaultdict(list)
        for e in self.snap.executions:
            end = self.effective_end(e)
            by_pid[e.pid].append((e.started_at, 1))
            by_pid[e.pid].append((end if end is not None else float("inf"), -1))
        for pid, points in by_pid.items():
            running = top = 0
            for _, delta in sorted(points, key=lambda p: (p[0], p[1])):
                running += delta
                top = max(top, running)
            peak[pid] = top
        highest = max(peak.values(), default=0)
        self.out.figures["limits"] = {
            "concurrency_peak": highest, "concurrency_limit": self.expect.concurrency,
            "per_tenant": "n/a (gochatd has no per-tenant limit yet)",
        }
        if highest > self.expect.concurrency:
            self.out.fail(f"a daemon ran {highest} handlers at once; worker.concurrency is "
                          f"{self.expect.concurrency}")

    # -- side effects ----------------------------------------------------------------------

    def effects(self) -> None:
        missing = [
            i for i in self.expect.with_effect
            if self.snap.jobs.get(i) is not None and self.snap.jobs[i].status == "completed"
            and self.snap.effects.get(i, 0) < 1
        ]
        repeated = sum(1 for i in self.expect.with_effect if self.snap.effects.get(i, 0) > 1)
        self.out.figures["effects_repeated"] = repeated
        if missing:
            self.out.fail(f"{len(missing)} completed jobs without their write ({_sample(missing)})")


def recovery(snap: Snapshot, faults: list[Fault]) -> dict[str, Any]:
    """Fault -> first job started afterwards; fault -> stranded jobs (in flight on the
    faulted daemon) reaped, and running again (that one includes waiting behind the
    backlog); claim latency (claim time - due time, database clock) of claims after the
    first fault."""
    starts = sorted(e.started_at for e in snap.executions)
    per_fault: list[float] = []
    stranded: list[float] = []
    reaped: list[float] = []
    runs: dict[int, list[Execution]] = defaultdict(list)
    for e in snap.executions:
        runs[e.job_id].append(e)
    reaps = {(t.job_id, t.fence): t.at for t in snap.transitions if t.cause == "lease_expired"}
    for fault in faults:
        first = next((s for s in starts if s > fault.at), None)
        if first is not None:
            per_fault.append(first - fault.at)
        if not fault.pids:
            continue
        for e in snap.executions:
            if e.pid not in fault.pids or e.started_at > fault.at:
                continue
            if e.ended_at is not None and e.ended_at <= fault.at:
                continue
            later = [r.started_at for r in runs[e.job_id] if r.fence > e.fence]
            if later:
                stranded.append(min(later) - fault.at)
            if (e.job_id, e.fence) in reaps:
                reaped.append(reaps[(e.job_id, e.fence)] - fault.at)
    out: dict[str, Any] = {
        "recovery_s": round(max(per_fault), 3) if per_fault else None,
        "recovery_mean_s": round(statistics.fmean(per_fault), 3) if per_fault else None,
        "stranded_rerun_max_s": round(max(stranded), 3) if stranded else None,
        "stranded_jobs": len(stranded),
        "stranded_reaped_max_s": round(max(reaped), 3) if reaped else None,
    }
    if faults:
        t0 = min(f.at for f in faults)
        lat = sorted(t.at - t.scheduled_at for t in snap.transitions
                     if t.new_status == "running" and t.at > t0 and t.locked_by != GHOST_OWNER)
        if lat:
            out["max_claim_latency_after_s"] = round(max(lat), 3)
            out["p50_claim_latency_after_s"] = round(lat[len(lat) // 2], 3)
            out["p99_claim_latency_after_s"] = round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 3)
    return out
