"""JobStore contract: every claim path takes jobs in the order of docs/priority.md, computed
by the plain-Python model (tests/support/priority_model.py), on both databases.

The jobs' due times are set in the past explicitly, half a step off every step boundary
(aging_s = 100 s), so no level changes while a test runs. Each claim recomputes the top
level over what is still waiting, so batches of several sizes are compared with the model
claim by claim (as sets: a claim's rows come back in no particular order)."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import pytest

from gochatd.model import ClaimedJob
from gochatd.store import JobStore
from tests.contract.helpers import enqueue
from tests.support.priority_model import Waiting, claim_order

AGING_S = 100.0
BATCHES = (1, 3, 1, 5, 2, 4, 1, 100)
PATHS = ("polling", "tenant-capped", "queue-capped", "stream", "stream-queue-capped",
         "capped-backlog")
#: A cap that never bites: the capped statements rank, nothing is refused.
ROOMY = 1000

Claim = Callable[[int], Awaitable[list[ClaimedJob]]]


def _claim(store: JobStore, path: str) -> Claim:
    if path.startswith("stream"):  # entries whose jobs are gone: the queue's best n jobs
        return lambda n: store.claim_delivered_jobs({"default": [None] * n}, "w1", 30.0)
    if path == "capped-backlog":
        return lambda n: store.claim_capped_backlog(["default"], n, "w1", 30.0)
    return lambda n: store.claim_due_jobs(["default"], n, "w1", 30.0)


def _caps(store: JobStore, path: str) -> None:
    if path in ("tenant-capped", "capped-backlog"):
        store.tenant_limits = {"t": ROOMY}
    if path in ("queue-capped", "stream-queue-capped"):
        store.queue_limits = {"default": ROOMY}


async def _enqueue_mix(store: JobStore, seed: int, count: int) -> list[Waiting]:
    """``count`` jobs of mixed priorities and waits; one not due, one due at the same time as
    another (a tie: by id). ``due_s`` is relative to now (negative: in the past)."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    jobs: list[Waiting] = []
    specs = [(rng.choice((-3, 0, 0, 2, 5, 9)), (rng.randrange(0, 14) + 0.5) * AGING_S)
             for _ in range(count)]
    specs.append(specs[0])  # the tie
    for priority, wait_s in specs:
        job = await enqueue(store, "test:order", tenant_id="t", priority=priority,
                            scheduled_at=now - timedelta(seconds=wait_s), dispatch_now=True)
        jobs.append(Waiting(job.id, priority, -wait_s))
    await enqueue(store, "test:later", tenant_id="t", priority=1000, delay_s=3600.0,
                  dispatch_now=True)
    return jobs


@pytest.mark.parametrize("path", PATHS)
async def test_every_claim_path_follows_the_model(store: JobStore, path: str) -> None:
    store.priority_aging_s = AGING_S
    _caps(store, path)
    try:
        waiting = await _enqueue_mix(store, seed=23, count=24)
        claim = _claim(store, path)
        for n in BATCHES:
            want = set(claim_order(waiting, 0.0, AGING_S, n))
            got = {c.id for c in await claim(n)}
            assert got == want, (n, sorted(got), sorted(want))
            waiting = [j for j in waiting if j.id not in got]
        assert waiting == []
    finally:
        store.tenant_limits, store.queue_limits = {}, {}


async def test_a_job_at_the_top_level_goes_before_younger_top_jobs(store: JobStore) -> None:
    """The overload's shape in one claim: a priority-0 job due 10.5 steps ago has reached the
    top (10) and goes before every priority-10 job that became due after it. Under the
    replaced rule each of those ranked as due 10 steps before its time, so ahead of it."""
    store.priority_aging_s = AGING_S
    now = datetime.now(UTC)
    low = await enqueue(store, "low", scheduled_at=now - timedelta(seconds=10.5 * AGING_S))
    highs = [await enqueue(store, f"high-{k}", priority=10,
                           scheduled_at=now - timedelta(seconds=w * AGING_S))
             for k, w in enumerate((9.5, 5.5, 0.5))]
    order = [c.id for c in await store.claim_due_jobs(["default"], 1, "w1", 30.0)]
    while got := await store.claim_due_jobs(["default"], 1, "w1", 30.0):
        order.extend(c.id for c in got)
    assert order == [low.id, *(h.id for h in highs)]
