"""The chaos runner's "callbacks exactly once" invariant (benchmarks/chaos/flows.py) judges
what the audit recorded: a clean history passes, and each way a callback or a chain link can
go wrong is named. The histories are written out by hand here; the smoke run
(test_chaos_smoke.py) checks the invariant against real daemons under faults."""

from __future__ import annotations

from dataclasses import replace

from benchmarks.chaos.database import Snapshot, Transition
from benchmarks.chaos.flows import (
    BatchRecord,
    FlowChecker,
    FlowJob,
    FlowLoad,
    FlowRows,
    FlowRun,
)

# Batch 1: members 1, 2; on_success 3; on_complete 4. Chain: 5 -> 6.
MEMBERS = (1, 2)


class History:
    """A hand-written audit: transitions with ids in order, each with its transaction."""

    def __init__(self) -> None:
        self.transitions: list[Transition] = []
        self.txids: dict[int, int] = {}
        self.releases: dict[int, list[tuple[int, int]]] = {}
        self.next_id = 1

    def move(self, job_id: int, old: str | None, new: str, fence: int, txid: int,
             at: float) -> int:
        t = Transition(self.next_id, job_id, old, new, fence, fence, None, None, 0.0, None, at)
        self.transitions.append(t)
        self.txids[t.id] = txid
        self.next_id += 1
        return t.id

    def release(self, job_id: int, txid: int) -> None:
        self.releases.setdefault(job_id, []).append((self.next_id, txid))
        self.next_id += 1

    def run_job(self, job_id: int, txid: int, at: float, end: str = "completed") -> None:
        """Claimed (transaction txid), then finished (txid + 1) at ``at``."""
        self.move(job_id, "queued", "running", 1, txid, at - 0.5)
        self.move(job_id, "running", end, 1, txid + 1, at)


def clean() -> tuple[History, dict[int, FlowJob], dict[int, list[FlowRun]]]:
    h = History()
    for job_id in (3, 4, 5, 6):
        h.move(job_id, None, "queued", 0, 1, 0.0)
    h.run_job(1, 10, 10.0)
    h.run_job(2, 20, 11.0)
    h.release(3, 21)  # in the transaction that finished member 2
    h.release(4, 21)
    h.run_job(3, 30, 13.0)
    h.run_job(4, 40, 14.0)
    h.run_job(5, 50, 10.0)
    h.release(6, 51)
    h.run_job(6, 60, 12.0)
    jobs = {1: FlowJob("completed", None, 1, 10.0), 2: FlowJob("completed", None, 1, 11.0),
            3: FlowJob("completed", None, None, 13.0), 4: FlowJob("completed", None, None, 14.0),
            5: FlowJob("completed", None, None, 10.0), 6: FlowJob("completed", None, None, 12.0)}
    saw = [[1, "completed", None], [2, "completed", None]]
    runs = {3: [FlowRun(1, "ok", 12.6, saw)], 4: [FlowRun(1, "ok", 13.6, saw)],
            5: [FlowRun(1, "ok", 9.6, [])],
            6: [FlowRun(1, "ok", 11.6, [[5, "completed", {"step": 0}]])]}
    return h, jobs, runs


def judge(h: History, jobs: dict[int, FlowJob], runs: dict[int, list[FlowRun]],
          failing: tuple[int, ...] = (), why: str | None = None) -> list[str]:
    load = FlowLoad([BatchRecord(1, MEMBERS, failing, 3, 4)], [(5, 6)])
    rows = FlowRows(jobs, {1: (2, 3, 4)}, {1: list(MEMBERS)}, h.releases, runs, h.txids)
    snap = Snapshot({}, [], h.transitions, {})
    return FlowChecker(load, rows, snap, lambda job_id, fence: why,
                       clock_comparable=True).run().violations


def test_a_clean_history_passes() -> None:
    h, jobs, runs = clean()
    assert judge(h, jobs, runs) == []


def test_a_callback_completed_twice_is_named() -> None:
    h, jobs, runs = clean()
    h.move(4, "completed", "completed", 2, 70, 20.0)
    runs[4].append(FlowRun(2, "ok", 19.0, None))
    found = judge(h, jobs, runs, why="daemon killed (SIGKILL)")
    assert any("on_complete 4: completed 2 times" in v for v in found), found


def test_a_callback_released_twice_or_by_another_transaction_is_named() -> None:
    h, jobs, runs = clean()
    h.release(4, 21)
    h.releases[3] = [(h.releases[3][0][0], 99)]
    found = judge(h, jobs, runs)
    assert any("on_complete 4: released 2 times" in v for v in found), found
    assert any("on_success 3: released by another transaction" in v for v in found), found


def test_an_unexplained_second_run_is_named_and_an_explained_one_counted() -> None:
    h, jobs, runs = clean()
    h.move(4, "running", "retrying", 2, 41, 13.5)  # a second claim's fence; its run
    runs[4].insert(0, FlowRun(2, "cancelled", 13.1, None))
    assert any("ran again at fence 2" in v for v in judge(h, jobs, runs)), judge(h, jobs, runs)
    assert judge(h, jobs, runs, why="lease lost; handler stopped") == []


def test_a_run_before_the_last_member_finished_is_named() -> None:
    h, jobs, runs = clean()
    runs[4][0] = replace(runs[4][0], db_started_at=10.5)  # member 2 finished at 11.0
    found = judge(h, jobs, runs)
    assert any("on_complete 4: a run started 0.500s before" in v for v in found), found
    # A claim audited before the member's final transition.
    h2, jobs2, runs2 = clean()
    h2.transitions.insert(0, replace(h2.transitions[0], id=0, job_id=3, old_status="queued",
                                     new_status="running"))
    assert any("on_success 3: claimed before" in v for v in judge(h2, jobs2, runs2))


def test_on_success_must_be_cancelled_and_never_run_when_a_member_failed() -> None:
    h, jobs, runs = clean()
    jobs[2] = FlowJob("dead", "non_retryable", 1, 11.0)
    h.transitions = [t if not (t.job_id == 2 and t.new_status == "completed")
                     else replace(t, new_status="dead") for t in h.transitions]
    saw = [[1, "completed", None], [2, "dead", None]]
    runs[4] = [FlowRun(1, "ok", 13.6, saw)]
    found = judge(h, jobs, runs, failing=(2,))
    assert any("on_success 3: FlowJob(status='completed'" in v for v in found), found
    assert any("on_success 3: released, claimed or run" in v for v in found), found
    # Cancelled by member 2's final transaction, never released: clean.
    h.transitions = [t for t in h.transitions if t.job_id != 3]
    h.releases.pop(3)
    runs.pop(3)
    h.move(3, "queued", "cancelled", 0, 21, 11.0)
    jobs[3] = FlowJob("cancelled", "dependency_failed", None, None)
    assert judge(h, jobs, runs, failing=(2,)) == []


def test_a_chain_link_that_read_the_wrong_result_or_ran_first_is_named() -> None:
    h, jobs, runs = clean()
    runs[6][0] = replace(runs[6][0], seen=[[5, "completed", {"step": 7}]])
    assert any("link 1 read" in v for v in judge(h, jobs, runs))
    h2, jobs2, runs2 = clean()
    runs2[6][0] = replace(runs2[6][0], db_started_at=9.0)
    assert any("chain 5 link 1 6: a run started" in v for v in judge(h2, jobs2, runs2))


def test_a_callback_that_saw_a_member_unfinished_is_named() -> None:
    h, jobs, runs = clean()
    runs[4][0] = replace(runs[4][0], seen=[[1, "completed", None], [2, "running", None]])
    assert any("on_complete 4: saw" in v for v in judge(h, jobs, runs))
