"""The rule of docs/priority.md on the overload of issue 23, simulated (tests/support/
priority_model.py): a queue that runs 1.5 jobs/s (3 slots, 2 s jobs), 10 priority-0 jobs, then
20 priority-10 jobs/s for 90 s, aging_s = 10 s.

The replaced rule (``rank = scheduled_at - priority * aging_s``) starves the low jobs until
the whole flood has run; the new one runs them once they reach the top level, within the
documented bound. The SQL is held to this same model by tests/contract/test_priority_order.py,
and the daemon to the bound by tests/integration/test_priority_overload.py."""

from __future__ import annotations

from tests.support.priority_model import (
    Waiting,
    claim_order,
    issue_23_overload,
    old_claim_order,
    simulate,
)

SLOTS, WORK_S, AGING_S, HIGH = 3, 2.0, 10.0, 10
ARRIVALS = issue_23_overload(low=10, flood_rate=20.0, flood_s=90.0, high=HIGH)
LOWS = [j.id for j in ARRIVALS if j.priority == 0]
FLOOD_ENDS_S = 90.0


def _bound_s(ahead: int) -> float:
    """docs/priority.md: steps x aging_s, plus the jobs already ahead of it at the top level
    (here: the other low jobs, due at the same time with lower ids), plus one slot turnover."""
    return HIGH * AGING_S + ahead * WORK_S / SLOTS + WORK_S


def test_the_replaced_rule_starves_the_low_jobs_past_the_flood() -> None:
    waits = simulate(old_claim_order, ARRIVALS, slots=SLOTS, work_s=WORK_S, aging_s=AGING_S)
    late = [i for i in LOWS if waits[i] > FLOOD_ENDS_S + 120.0]
    # Every flood job was due within 100 s of them, so it outranked them for good: all of
    # the flood (1,800 jobs at 1.5/s) ran first.
    assert len(late) >= 4, waits
    assert max(waits[i] for i in LOWS) > 1000.0


def test_the_new_rule_runs_every_low_job_within_the_bound() -> None:
    waits = simulate(claim_order, ARRIVALS, slots=SLOTS, work_s=WORK_S, aging_s=AGING_S)
    for ahead, job_id in enumerate(LOWS):
        assert waits[job_id] <= _bound_s(ahead), (job_id, waits[job_id])
    # Not sooner than its steps, once the flood filled the slots: the flood ran ahead.
    assert max(waits[i] for i in LOWS) >= HIGH * AGING_S


def test_a_job_at_the_top_level_goes_by_age() -> None:
    # The shape in miniature: a priority-0 job due 105 s ago has reached the top (10),
    # and goes before every priority-10 job that became due after it.
    low = Waiting(1, 0, -105.0)
    highs = [Waiting(2 + k, 10, -w) for k, w in enumerate((95.0, 55.0, 15.0))]
    assert claim_order([low, *highs], 0.0, 10.0, 4) == [1, 2, 3, 4]
    # The replaced rule: each of them ranked as due 100 s before its time, so ahead of it.
    assert old_claim_order([low, *highs], 0.0, 10.0, 4) == [2, 3, 4, 1]


def test_the_top_level_is_the_highest_priority_waiting() -> None:
    # Without a priority-10 job due, 5 is the top: a 0 that waited 7 steps is at 5 and
    # goes before a 5 due later; a 2 that waited 1 step (3) stays behind both.
    jobs = [Waiting(1, 5, -5.0), Waiting(2, 0, -75.0), Waiting(3, 2, -15.0),
            Waiting(4, 10, 30.0)]  # not due: not a level, not the top
    assert claim_order(jobs, 0.0, 10.0, 4) == [2, 1, 3]
