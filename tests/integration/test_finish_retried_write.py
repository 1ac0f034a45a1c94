"""The finisher after a write whose answer was lost (the commit happened, the connection
died before the reply): the retry applies nothing, and one ``get_job_states`` query for the
batch (not one ``get_job`` per finish) shows which of its finishes the first attempt wrote."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from gochatd.errors import StoreUnavailable
from gochatd.model import Finish, JobStatus, Outcome
from gochatd.store import JobStore
from gochatd.store.db import AfterFinish
from gochatd.worker.finisher import Finisher, FinishRequest
from tests.contract.helpers import claim_one, enqueue, finish


class LostFirstAnswer:
    """The real store, except that its first ``finish_jobs`` commits and then raises as if
    the answer had been lost; counts the finisher's look-ups."""

    def __init__(self, store: JobStore) -> None:
        self._store = store
        self.failed_batches: list[list[int]] = []
        self.get_job_calls = 0
        self.state_queries: list[list[int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def finish_jobs(
        self, finishes: Sequence[Finish], *, after_commit: AfterFinish | None = None
    ) -> set[int]:
        applied = await self._store.finish_jobs(finishes, after_commit=after_commit)
        if not self.failed_batches:
            self.failed_batches.append(sorted(applied))
            raise StoreUnavailable("postgres unavailable: the answer was lost")
        return applied

    async def get_job(self, job_id: int) -> Any:
        self.get_job_calls += 1
        return await self._store.get_job(job_id)

    async def get_job_states(self, job_ids: Sequence[int]) -> dict[int, tuple[int, JobStatus]]:
        self.state_queries.append(sorted(job_ids))
        return await self._store.get_job_states(job_ids)


async def test_one_query_tells_which_finishes_of_a_retried_batch_committed(
    store: JobStore,
) -> None:
    jobs = [await enqueue(store, "t:lost", payload={"n": n}) for n in range(6)]
    claims = [await claim_one(store, job, "w1") for job in jobs]
    outcomes = [Outcome.COMPLETED, Outcome.RETRY, Outcome.DEAD] * 2
    finishes = [finish(c, o) for c, o in zip(claims, outcomes, strict=True)]
    lossy = LostFirstAnswer(store)
    finisher = Finisher(lossy, lambda: None, lambda batch: None)  # type: ignore[arg-type]
    requests = [FinishRequest(f, None) for f in finishes]
    for request in requests:  # all waiting before the finisher starts: one batch
        finisher.send_channel.send_nowait(request)
    async with trio.open_nursery() as nursery:
        await nursery.start(finisher.run)
        for request in requests:
            await request.done.wait()
        finisher.send_channel.close()

    assert [r.applied for r in requests] == [True] * 6  # none reported stale
    assert lossy.failed_batches == [sorted(j.id for j in jobs)]
    assert lossy.state_queries == lossy.failed_batches  # one query, for the whole batch
    assert lossy.get_job_calls == 0
    states = await store.get_job_states([j.id for j in jobs] + [10**9])
    assert states == {f.job_id: (f.fence, f.status) for f in finishes}
    assert await store.get_job_states([]) == {}
