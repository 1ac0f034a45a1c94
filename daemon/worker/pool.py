"""The job pool: where claimed jobs start, run and hand their finish to the finisher.

It owns the handler slots (a ``CapacityLimiter(worker.concurrency)``), the jobs this daemon
holds (``ActiveJobs``: running, or waiting for their finish to be written) and the handler
nursery. The claiming loops (intake, capped backlog) run inside ``serve`` and call
``start_jobs`` with what they claimed; ``serve`` ends with the stop sequence: the claims end,
in-flight handlers get the grace, the rest are interrupted and unwound, then the finish
channel's send end is closed by its owner (this pool) so the finisher drains and exits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence

import trio

from gochatd.dispatch.entries import StreamEntry
from gochatd.model import ClaimedJob
from gochatd.obs.counters import Counters, FinishTally
from gochatd.obs.logs import get_logger
from gochatd.obs.metrics import Metrics
from gochatd.worker.finisher import Finisher, FinishRequest
from gochatd.worker.lifecycle import STOP_NOW_S, Lifecycle
from gochatd.worker.registry import Registry
from gochatd.worker.runner import ActiveJob, RunPolicy, StopReason, execute
from gochatd.worker.wakeup import Wakeups

#: After the grace period, interrupted handlers get this long to unwind before the
#: handler nursery is cancelled outright.
UNWIND_S = 5.0


class ActiveJobs:
    """The jobs this daemon holds, by id: claimed and not yet finished."""

    def __init__(self) -> None:
        self._jobs: dict[int, ActiveJob] = {}

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._jobs

    def __iter__(self) -> Iterator[int]:
        return iter(self._jobs)

    def snapshot(self) -> dict[int, ActiveJob]:
        return dict(self._jobs)

    def add(self, active: ActiveJob) -> None:
        self._jobs[active.claimed.id] = active

    def remove(self, active: ActiveJob) -> None:
        # A job that retried at once may be claimed again (here) before its runner ends.
        if self._jobs.get(active.claimed.id) is active:
            del self._jobs[active.claimed.id]

    def stop_all(self, reason: StopReason) -> None:
        for active in list(self._jobs.values()):
            active.stop(reason)

    def interrupt_all(self) -> None:
        self.stop_all(StopReason.INTERRUPTED)


class FinishOutcomes:
    """What the finisher reports after each committed batch: counters, metrics, the
    throughput charts' tally (flushed by loops/stats.py), wake-ups."""

    def __init__(self, counters: Counters, metrics: Metrics, wakeups: Wakeups) -> None:
        self._counters, self._metrics, self._wakeups = counters, metrics, wakeups
        #: One count per applied finish; /v1/status, /metrics and the charts read it.
        self._finished = counters.finished
        self.tally = FinishTally(counters.finished)

    def __call__(self, batch: list[FinishRequest]) -> None:
        retried = replies = False
        add = self._finished.add
        for request in batch:
            finish = request.finish
            if finish is None:
                continue
            retried = retried or finish.status.value == "retrying"
            if request.applied:
                replies = replies or bool(finish.replies)
                job = request.job
                if job is not None:
                    add(job.queue, job.job_type, finish.outcome)
                else:
                    add("", "", finish.outcome)
        if retried:
            self._wakeups.new_work()
        if replies:
            self._wakeups.outbox.set()


class JobPool:
    def __init__(
        self, jobs: ActiveJobs, *, lifecycle: Lifecycle, finisher: Finisher,
        registry: Registry, policy: RunPolicy, concurrency: int, grace_s: float,
        metrics: Metrics, counters: Counters, wakeups: Wakeups, worker_id: str,
    ) -> None:
        self.jobs = jobs
        self.limiter = trio.CapacityLimiter(concurrency)
        self.policy = policy
        self.grace_s = grace_s
        self._lifecycle = lifecycle
        self._finisher = finisher
        self._registry = registry
        self._metrics = metrics
        self._counters = counters
        self._wakeups = wakeups
        self._nursery: trio.Nursery | None = None
        self._log = get_logger(worker_id=worker_id)

    def reconfigure(self, concurrency: int, grace_s: float, policy: RunPolicy) -> None:
        self.limiter.total_tokens = concurrency
        self.grace_s = grace_s
        self.policy = policy

    def free_slots(self) -> int:
        """Handler slots free now. A job gives its slot back when its handler returns, not
        when its finish commits (the finisher batches those); claimed jobs not yet finished
        stay below twice the concurrency all the same."""
        if not self._lifecycle.claiming:
            return 0
        unfinished_room = 2 * int(self.limiter.total_tokens) - len(self.jobs)
        return max(0, min(int(self.limiter.available_tokens), unfinished_room))

    # -- serving ---------------------------------------------------------------------------

    async def serve(self, claimers: Sequence[Callable[[], Awaitable[object]]]) -> None:
        """Run the claiming loops in the handler nursery until a stop; then the stop
        sequence (grace, interrupt, unwind). Returns once every runner has returned."""
        async with self._finisher.send_channel, trio.open_nursery() as handlers:
            self._nursery = handlers
            with self._lifecycle.claims():
                async with trio.open_nursery() as claiming:
                    for claimer in claimers:
                        claiming.start_soon(claimer)
            self._lifecycle.ready.set()  # a stop before the intake chose a mode
            self._log.info("worker_draining", in_flight=len(self.jobs))
            with self._lifecycle.grace(self.grace_s):
                await self.wait_idle()
            self.jobs.interrupt_all()
            with trio.move_on_after(STOP_NOW_S if self._lifecycle.stop_now else UNWIND_S):
                await self.wait_idle()
            handlers.cancel_scope.cancel()

    async def wait_idle(self) -> None:
        while len(self.jobs):
            await self._wakeups.slot_freed.wait(0.1)

    def start_jobs(
        self, claimed: Sequence[ClaimedJob], entries: dict[int, StreamEntry] | None = None
    ) -> None:
        assert self._nursery is not None
        for job in claimed:
            active = ActiveJob(job, (entries or {}).get(job.id))
            try:
                self.limiter.acquire_on_behalf_of_nowait(active)
                has_slot = True
            except trio.WouldBlock:  # a reload lowered concurrency since the read
                has_slot = False
            self.jobs.add(active)
            self._counters.inc("jobs_claimed")
            self._nursery.start_soon(self._run_one, active, has_slot, name=f"job-{job.id}")

    async def _run_one(self, active: ActiveJob, has_slot: bool) -> None:
        holds_slot = has_slot
        if not has_slot:
            await self.limiter.acquire_on_behalf_of(active)
            holds_slot = True
        try:
            started = trio.current_time()
            try:
                finish = await execute(active, self._registry, self.policy)
            finally:
                # The handler is done: its slot goes to the next job while the finisher
                # commits this one's outcome in a batch.
                self.limiter.release_on_behalf_of(active)
                holds_slot = False
                self._wakeups.slot_freed.set()
            job = active.claimed.job
            self._metrics.observe_job(
                job.queue, job.job_type, trio.current_time() - started,
                None if job.locked_at is None
                else max(0.0, (job.locked_at - job.scheduled_at).total_seconds()),
            )
            applied = await self._finisher.submit(finish, active.entry, job)
            if finish is not None and not applied:
                self._counters.inc("stale_finishes")
                self._log.warning("stale_finish_rejected", job_id=active.claimed.id,
                                  fence=active.claimed.fence)
        finally:
            self.jobs.remove(active)
            if holds_slot:
                self.limiter.release_on_behalf_of(active)
            self._wakeups.slot_freed.set()
            self._lifecycle.job_left()

