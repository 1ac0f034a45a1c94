"""A job's priority in every dispatch mode (docs/priority.md): a higher priority overtakes a
backlog, and waiting ages a job so that a flood of higher priorities cannot starve it.

Both tests keep the handler slots full, so every claim is a choice between waiting jobs.
Times are the rows' own (``locked_at - scheduled_at``, database clock)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import trio

from gochatd.client.client import Client
from gochatd.context import JobContext
from gochatd.model import Job, JobStatus
from gochatd.worker.registry import Handler, HandlerSpec
from tests.integration.helpers import make_registry, started_worker, wait_all_status, wait_for
from tests.support.harness import make_settings

COMBOS = pytest.mark.parametrize(
    ("backend_url", "with_redis"),
    [("postgres", False), ("postgres", True), ("sqlite", False)],
    ids=["postgres-polling", "postgres-streams", "sqlite-polling"],
    indirect=["backend_url"],
)
SLOTS = 2


@dataclass(eq=False)
class Gate:
    """Handlers that record their start and park until the test lets one go (or all)."""

    started: list[int] = field(default_factory=list)
    parked: int = 0
    opened: bool = False
    _tokens: trio.Semaphore = field(default_factory=lambda: trio.Semaphore(0))

    async def handler(self, ctx: JobContext) -> None:
        self.started.append(ctx.job_id)
        if self.opened:
            return
        self.parked += 1
        try:
            await self._tokens.acquire()
        finally:
            self.parked -= 1

    def release_one(self) -> None:
        self._tokens.release()

    def open(self) -> None:
        self.opened = True
        for _ in range(self.parked):
            self._tokens.release()


@COMBOS
async def test_a_higher_priority_job_overtakes_the_backlog(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    gate = Gate()
    registry = make_registry(HandlerSpec("test:gate", gate.handler))
    settings = make_settings(backend_url, redis_url if with_redis else "",
                             worker_concurrency=SLOTS)
    async with started_worker(settings, registry=registry) as run:
        client = run.worker.client
        backlog = [(await client.enqueue("test:gate", {"n": i})).id for i in range(12)]
        await wait_for(lambda: gate.parked == SLOTS, what="both slots busy")
        urgent = (await client.enqueue("test:gate", {"urgent": True}, priority=5)).id
        # The backlog's entries (streams) or rows (polling) all came first; one slot frees.
        gate.release_one()
        await wait_for(lambda: len(gate.started) == SLOTS + 1, what="the next start")
        gate.open()
        await wait_all_status(run.worker.store, [*backlog, urgent], JobStatus.COMPLETED)
    assert sorted(gate.started[:SLOTS]) == backlog[:SLOTS]
    assert gate.started[SLOTS] == urgent
    # Then the rest of the backlog (the order within one claim is the claim's own).
    assert sorted(gate.started[SLOTS + 1:]) == backlog[SLOTS:]


@dataclass(eq=False)
class Flood:
    """Each priority-``high`` job enqueues its successor as it starts: the number waiting
    stays constant and the slots stay full until the low job starts (then the flood ends)."""

    client: Callable[[], Client]
    high: int
    work_s: float
    low_started: trio.Event = field(default_factory=trio.Event)
    flood_ids: list[int] = field(default_factory=list)

    def handlers(self) -> tuple[Handler, Handler]:
        async def flood(ctx: JobContext) -> None:
            if not self.low_started.is_set():
                job = await self.client().enqueue("test:flood", {}, priority=self.high)
                self.flood_ids.append(job.id)
            await trio.sleep(self.work_s)  # the job's work, not a synchronisation

        async def low(ctx: JobContext) -> None:
            self.low_started.set()

        return flood, low


@COMBOS
async def test_a_flood_of_higher_priorities_does_not_starve_a_waiting_job(
    backend_url: str, redis_url: str, with_redis: bool
) -> None:
    aging_s, high, waiting = 0.05, 10, 6
    bound_s = high * aging_s  # docs/priority.md: (q - p) x aging_s, then its turn
    holder: list[Client] = []
    flood = Flood(lambda: holder[0], high=high, work_s=0.02)
    on_flood, on_low = flood.handlers()
    registry = make_registry(HandlerSpec("test:flood", on_flood), HandlerSpec("test:low", on_low))
    settings = make_settings(backend_url, redis_url if with_redis else "",
                             worker_concurrency=SLOTS, worker_priority_aging_s=aging_s)
    async with started_worker(settings, registry=registry) as run:
        holder.append(run.worker.client)
        for _ in range(waiting):
            job = await run.worker.client.enqueue("test:flood", {}, priority=high)
            flood.flood_ids.append(job.id)
        await wait_for(lambda: len(flood.flood_ids) >= 2 * waiting, what="the flood running")
        low_id = (await run.worker.client.enqueue("test:low", {})).id
        with trio.fail_after(30):
            await flood.low_started.wait()
        done = await wait_all_status(run.worker.store, [low_id, *flood.flood_ids],
                                     JobStatus.COMPLETED, timeout_s=30)
    low_job = done[low_id]
    waited_s = _waited_s(low_job)
    # Not before its time: every flood job still waiting then ranked ahead of it...
    assert waited_s >= bound_s - 0.05, waited_s
    # ...and not much after: the bound plus the flood's own wait and a claim round.
    assert waited_s <= bound_s + 2.0, waited_s
    # The flood was still flowing when the low job ran: jobs enqueued after it ran first.
    overtook = [j for j in done.values() if j.id > low_id and _started(j) < _started(low_job)]
    assert len(overtook) >= SLOTS


def _started(job: Job) -> float:
    assert job.locked_at is not None
    return job.locked_at.timestamp()


def _waited_s(job: Job) -> float:
    return _started(job) - job.scheduled_at.timestamp()
