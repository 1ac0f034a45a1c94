"""JobStore contract: an operator's job controls (delete, discard, run now) and every
control in bulk, by ids or by filter (store/controls.py; docs/operations.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gochatd.errors import InvalidTransition, JobNotFound
from gochatd.model import Job, JobAction, JobSelection, JobStatus, Outcome
from gochatd.store import JobStore, open_store
from gochatd.store import controls as store_controls
from tests.contract.helpers import (
    CLOCK_SLACK_S,
    assert_edge,
    claim_one,
    enqueue,
    finish,
    refetch,
)


async def _in_status(store: JobStore, status: JobStatus, job_type: str = "c:job",
                     **kwargs: object) -> Job:
    """A new job brought to ``status`` the way the daemon brings it there."""
    job = await enqueue(store, job_type, payload={"n": id(kwargs), "s": status.value}, **kwargs)
    if status is JobStatus.QUEUED:
        return job
    if status is JobStatus.CANCELLED:
        return await store.cancel_job(job.id)
    claimed = await claim_one(store, job, "w1")
    outcome = {JobStatus.COMPLETED: Outcome.COMPLETED, JobStatus.DEAD: Outcome.DEAD,
               JobStatus.RETRYING: Outcome.RETRY}.get(status)
    if outcome is not None:
        await store.finish_jobs([finish(claimed, outcome, delay_s=3600.0)])
    row = await store.get_job(job.id)
    assert row is not None and row.status is status
    return row


async def _one_of_each(store: JobStore) -> dict[JobStatus, Job]:
    return {status: await _in_status(store, status) for status in JobStatus}


# -- delete ----------------------------------------------------------------------------------


async def test_delete_removes_a_job_in_any_status_but_running(store: JobStore) -> None:
    jobs = await _one_of_each(store)
    for status, job in jobs.items():
        if status is JobStatus.RUNNING:
            continue
        gone = await store.delete_job(job.id)
        assert (gone.id, gone.status) == (job.id, status)
        assert await store.get_job(job.id) is None
        with pytest.raises(JobNotFound):
            await store.delete_job(job.id)
    running = jobs[JobStatus.RUNNING]
    with pytest.raises(InvalidTransition, match="cancel it first"):
        await store.delete_job(running.id)
    assert await store.get_job(running.id) == running  # not touched


# -- discard ---------------------------------------------------------------------------------


async def test_discard_makes_a_waiting_job_dead_without_running(store: JobStore) -> None:
    for status in (JobStatus.QUEUED, JobStatus.RETRYING):
        job = await _in_status(store, status)
        dead = await store.discard_job(job.id)
        assert_edge(job.status, dead.status)
        assert dead.status is JobStatus.DEAD and dead.error_class == "discarded"
        assert dead.failed_at is not None and dead.dispatched_at is None
        assert dead.attempts == job.attempts  # it did not run
        assert await store.get_job(job.id) == dead
        assert await store.claim_jobs([job.id], "w2", 30.0) == []
    # A discarded job can be retried like any dead one.
    assert (await store.requeue_job(dead.id)).status is JobStatus.QUEUED


async def test_discard_refuses_every_other_status(store: JobStore) -> None:
    jobs = await _one_of_each(store)
    for status in (JobStatus.RUNNING, JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED):
        before = jobs[status]
        with pytest.raises(InvalidTransition, match="not queued or retrying"):
            await store.discard_job(before.id)
        assert await store.get_job(before.id) == before
    with pytest.raises(JobNotFound):
        await store.discard_job(987_654)


# -- run now ---------------------------------------------------------------------------------


async def test_run_now_makes_a_delayed_job_due_and_dispatchable(store: JobStore) -> None:
    delayed = await enqueue(store, "later", delay_s=3600.0)
    retrying = await _in_status(store, JobStatus.RETRYING)
    assert await store.claim_due_jobs(["default"], 10, "w1", 30.0) == []
    for job in (delayed, retrying):
        now, changed = await store.run_job_now(job.id)
        assert changed and now.status is job.status and now.dispatched_at is None
        database_now = await store.database_now()
        assert now.scheduled_at <= database_now + timedelta(seconds=CLOCK_SLACK_S)
        assert now.scheduled_at > database_now - timedelta(seconds=60)
        assert await refetch(store, job) == now
    # Dispatched like any due job (the scheduler's XADD with Redis), then claimed.
    refs = await store.dispatch_due_jobs(["default"], 10)
    assert sorted(r.job_id for r in refs) == sorted([delayed.id, retrying.id])
    claimed = await store.claim_due_jobs(["default"], 10, "w1", 30.0)
    assert sorted(c.id for c in claimed) == sorted([delayed.id, retrying.id])


async def test_run_now_of_a_due_job_changes_nothing(store: JobStore) -> None:
    job = await enqueue(store, "due")
    same, changed = await store.run_job_now(job.id)
    assert not changed and same == job == await store.get_job(job.id)


async def test_run_now_refuses_jobs_that_are_not_waiting(store: JobStore) -> None:
    jobs = await _one_of_each(store)
    for status in (JobStatus.RUNNING, JobStatus.COMPLETED, JobStatus.DEAD, JobStatus.CANCELLED):
        before = jobs[status]
        with pytest.raises(InvalidTransition):
            await store.run_job_now(before.id)
        assert await store.get_job(before.id) == before
    with pytest.raises(JobNotFound):
        await store.run_job_now(987_654)


# -- a change raced by someone else ----------------------------------------------------------


async def test_a_control_raced_by_a_claim_writes_nothing(backend_url: str) -> None:
    """Each guarded write changes a row only in the statuses its control acts on: the ids a
    bulk control picked, claimed or finished before its write, are left as they are."""
    store = open_store(backend_url)
    await store.open()
    try:
        await store.migrate()
        picked = await enqueue(store, "raced", delay_s=3600.0)
        await store.run_job_now(picked.id)
        claimed = await claim_one(store, picked, "w1")  # between the pick and the write
        ids = store._list([picked.id])  # type: ignore[attr-defined]
        for name in ("discard_jobs", "run_jobs_now", "delete_jobs", "requeue_jobs",
                     "cancel_waiting_jobs"):
            assert await store._write(name, {"ids": ids, "status": None}) == [], name  # type: ignore[attr-defined]
        assert await store.get_job(picked.id) == claimed.job
        with pytest.raises(InvalidTransition):
            await store.discard_job(picked.id)
        assert await store.get_job(picked.id) == claimed.job
    finally:
        await store.close()


# -- bulk ------------------------------------------------------------------------------------


async def test_bulk_by_filter_acts_only_on_matching_jobs(
    store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_controls, "BULK_BATCH", 3)  # several batches per control
    mine = [await enqueue(store, "bulk:a", payload={"n": n}, queue="reports", delay_s=3600.0)
            for n in range(7)]
    other_queue = await enqueue(store, "bulk:a", payload={"n": 99}, delay_s=3600.0)
    running = await _in_status(store, JobStatus.RUNNING, queue="reports")

    result = await store.control_jobs(JobAction.RUN_NOW, JobSelection(queue="reports"))
    assert (result.matched, result.changed) == (7, 7)
    assert (await store.get_job(other_queue.id)).scheduled_at == other_queue.scheduled_at  # type: ignore[union-attr]

    result = await store.control_jobs(JobAction.DISCARD, JobSelection(queue="reports"))
    assert (result.action, result.matched, result.changed) == (JobAction.DISCARD, 7, 7)
    for job in mine:
        row = await refetch(store, job)
        assert (row.status, row.error_class) == (JobStatus.DEAD, "discarded")
    assert (await refetch(store, other_queue)).status is JobStatus.QUEUED
    assert (await refetch(store, running)).status is JobStatus.RUNNING

    result = await store.control_jobs(JobAction.RETRY, JobSelection(job_type="bulk:a",
                                                                    status=JobStatus.DEAD))
    assert (result.matched, result.changed) == (7, 7)
    result = await store.control_jobs(JobAction.CANCEL, JobSelection(queue="reports"))
    assert (result.matched, result.changed) == (8, 8)  # seven waiting, one running (asked)
    assert (await refetch(store, running)).cancel_requested is True
    again = await store.control_jobs(JobAction.CANCEL, JobSelection(queue="reports"))
    assert (again.matched, again.changed) == (1, 0)  # the running one, asked already

    result = await store.control_jobs(JobAction.DELETE, JobSelection(queue="reports"))
    assert (result.matched, result.changed) == (7, 7)  # never the running one
    assert [j.id for j in await _all(store)] == sorted([other_queue.id, running.id])


async def test_bulk_by_ids_skips_unknown_ids_and_other_statuses(store: JobStore) -> None:
    jobs = await _one_of_each(store)
    other = await _in_status(store, JobStatus.DEAD, tenant_id="t2")
    ids = (*[j.id for j in jobs.values()], other.id, 987_654)
    result = await store.control_jobs(JobAction.RETRY, JobSelection(ids=ids))
    assert (result.matched, result.changed) == (3, 3)  # dead, cancelled and t2's dead
    assert (await refetch(store, jobs[JobStatus.DEAD])).status is JobStatus.QUEUED
    assert (await refetch(store, jobs[JobStatus.COMPLETED])).status is JobStatus.COMPLETED

    # ids and a filter: both must match.
    result = await store.control_jobs(JobAction.DELETE, JobSelection(ids=ids, tenant_id="t2"))
    assert (result.matched, result.changed) == (1, 1)
    assert await store.get_job(other.id) is None
    result = await store.control_jobs(
        JobAction.DELETE, JobSelection(ids=ids, status=JobStatus.COMPLETED))
    assert (result.matched, result.changed) == (1, 1)
    assert await store.get_job(jobs[JobStatus.COMPLETED].id) is None
    assert await store.get_job(jobs[JobStatus.QUEUED].id) is not None


async def _all(store: JobStore) -> list[Job]:
    from gochatd.model import JobFilter

    return await store.list_jobs(JobFilter(limit=1000))


# -- a store serving some tenants (a live move): the scoped twins ----------------------------


async def test_a_scoped_store_controls_only_its_tenants(store: JobStore) -> None:
    from gochatd.migrate.routing.store import RoutedStore
    from gochatd.store.scope import ALL, TenantScope

    sql = store.home if isinstance(store, RoutedStore) else store
    mine = [await enqueue(store, "s:a", payload={"n": n}, tenant_id="a", delay_s=600.0)
            for n in range(2)]
    theirs = [await enqueue(store, "s:b", payload={"n": n}, tenant_id="b", delay_s=600.0)
              for n in range(2)]
    before = [await store.get_job(j.id) for j in theirs]
    sql.tenant_scope = TenantScope.only({"a"})  # type: ignore[union-attr]
    try:
        for control in (store.delete_job, store.discard_job, store.run_job_now):
            with pytest.raises(JobNotFound):
                await control(theirs[0].id)
        everything = JobSelection(ids=tuple(j.id for j in mine + theirs))
        result = await store.control_jobs(JobAction.RUN_NOW, everything)
        assert (result.matched, result.changed) == (2, 2)
        result = await store.control_jobs(JobAction.DELETE, JobSelection(queue="default"))
        assert (result.matched, result.changed) == (2, 2)
    finally:
        sql.tenant_scope = ALL  # type: ignore[union-attr]
    assert [await store.get_job(j.id) for j in theirs] == before
    assert [await store.get_job(j.id) for j in mine] == [None, None]
