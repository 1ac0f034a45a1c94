"""JobStore contract: job results (docs/results.md). The result is written by the fenced
finish that completes the job and by nothing else; ``get_job`` reads it back as the JSON
value it was; retention deletes it with its job."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gochatd.model import Job, JobFilter, JobStatus, Outcome
from gochatd.results.encode import encode_result
from gochatd.store import JobStore
from tests.contract.helpers import claim_one, enqueue, finish
from tests.support.wait import wait_until

VALUES: list[Any] = [
    {"answer": 42, "nested": {"list": [1, 2.5, "três", None, True]}},
    [1, "two", {"three": 3}],
    "a bare string",
    7,
    1.25,
    False,
    {"emoji": "🙂", "quote": "\"'\\", "big": 10**30},
]


async def _get(store: JobStore, job_id: int) -> Job:
    job = await store.get_job(job_id)
    assert job is not None
    return job


def _text(value: Any) -> str:
    encoded = encode_result(value, 1 << 20)
    assert encoded.text is not None
    return encoded.text


@pytest.mark.parametrize("value", VALUES, ids=range(len(VALUES)))
async def test_completion_stores_the_result_as_json(store: JobStore, value: Any) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    assert (await _get(store, job.id)).result is None  # nothing before the completion
    applied = await store.finish_jobs([finish(claimed, Outcome.COMPLETED, result=_text(value))])
    assert applied == {job.id}
    done = await _get(store, job.id)
    assert done.status is JobStatus.COMPLETED
    assert json.dumps(done.result, sort_keys=True) == json.dumps(value, sort_keys=True)


async def test_none_stores_no_result(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    assert await store.finish_jobs([finish(claimed, Outcome.COMPLETED)]) == {job.id}
    assert (await _get(store, job.id)).result is None


async def test_a_stale_finish_stores_no_result(store: JobStore) -> None:
    """The first owner's lease passed to a second claim: its late completion, result and
    all, matches no row; the second owner's result is the one stored."""
    job = await enqueue(store)
    stale = await claim_one(store, job, "w1")
    assert await store.finish_jobs([finish(stale, Outcome.RETRY, delay_s=0.0)]) == {job.id}
    current = await claim_one(store, await _get(store, job.id), "w2")
    late = finish(stale, Outcome.COMPLETED, result=_text({"from": "stale"}))
    assert await store.finish_jobs([late]) == set()
    running = await _get(store, job.id)
    assert (running.status, running.result) == (JobStatus.RUNNING, None)
    # In one batch beside the current owner's completion: only that one applies.
    mine = finish(current, Outcome.COMPLETED, result=_text({"from": "current"}))
    assert await store.finish_jobs([late, mine]) == {job.id}
    assert (await _get(store, job.id)).result == {"from": "current"}


async def test_only_a_completion_stores_a_result(store: JobStore) -> None:
    """A retry, a death or a cancel carrying a result (a bug upstream) stores none."""
    for outcome in (Outcome.RETRY, Outcome.DEAD, Outcome.CANCELLED, Outcome.INTERRUPTED):
        job = await enqueue(store, f"t:{outcome.value}")
        claimed = await claim_one(store, job, "w1")
        assert await store.finish_jobs(
            [finish(claimed, outcome, result=_text({"no": 1}), error_class="x", last_error="y")]
        ) == {job.id}
        assert (await _get(store, job.id)).result is None, outcome


async def test_a_result_travels_with_replies(store: JobStore) -> None:
    """The reply path (finish_jobs_with_replies on PostgreSQL) stores the result too."""
    from gochatd.model import Reply

    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    reply = Reply(channel="webhook", recipient="r", body={"text": "hi"}, dedupe_key="k1")
    done = finish(claimed, Outcome.COMPLETED, replies=(reply,), result=_text([1, 2]))
    assert await store.finish_jobs([done]) == {job.id}
    assert (await _get(store, job.id)).result == [1, 2]


async def test_listings_leave_the_result_out(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    await store.finish_jobs([finish(claimed, Outcome.COMPLETED, result=_text({"k": 1}))])
    [listed] = await store.list_jobs(JobFilter(status=JobStatus.COMPLETED))
    assert listed.id == job.id and listed.result is None
    assert (await _get(store, job.id)).result == {"k": 1}


async def test_retention_deletes_results_with_their_jobs(store: JobStore) -> None:
    job = await enqueue(store)
    claimed = await claim_one(store, job, "w1")
    await store.finish_jobs([finish(claimed, Outcome.COMPLETED, result=_text({"k": 1}))])

    async def pruned() -> bool:
        return await store.prune_finished_jobs(JobStatus.COMPLETED, 0.0, 100) >= 1

    await wait_until(pruned, timeout_s=5.0)
    assert await store.get_job(job.id) is None
