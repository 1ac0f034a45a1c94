"""The keyset windows of the reaper and the sweep (loops/scan_window.py): a windowed pass
finds only what became due inside its window; a pass without one finds everything. And the
sweep's one statement for every queue, each with its own limit."""

from __future__ import annotations

from gochatd.store import JobStore
from gochatd.store.queries import SQLITE_NOW
from tests.contract.helpers import claim_one, enqueue, is_postgres, raw_sql


def _seconds_ago(url: str, seconds: float) -> str:
    if is_postgres(url):
        return f"now() - make_interval(secs => {float(seconds)!r})"
    return f"({SQLITE_NOW} - {float(seconds)!r})"


async def _set(url: str, column: str, job_id: int, seconds_ago: float) -> None:
    await raw_sql(url, f"UPDATE background_jobs SET {column} = {_seconds_ago(url, seconds_ago)}"
                       " WHERE id = ?", [job_id])


async def test_reaper_window_leaves_older_expired_leases_to_a_full_pass(
    store: JobStore, backend_url: str
) -> None:
    old = await enqueue(store, "old")
    recent = await enqueue(store, "recent")
    live = await enqueue(store, "live")
    for job in (old, recent, live):
        await claim_one(store, job, "w1", lease_s=60.0)
    await _set(backend_url, "lease_expires_at", old.id, 3600)
    await _set(backend_url, "lease_expires_at", recent.id, 5)

    newest = await store.newest_job_id()
    assert newest == live.id
    # Written after that pass with a lease long gone (foreign SQL): found by its id.
    foreign = await enqueue(store, "foreign")
    await claim_one(store, foreign, "ghost", lease_s=60.0)
    await _set(backend_url, "lease_expires_at", foreign.id, 7200)

    windowed = await store.reap_expired_leases(expired_within_s=60.0, created_after_id=newest)
    assert sorted(r.job_id for r in windowed.retried) == [recent.id, foreign.id]
    full = await store.reap_expired_leases()
    assert [r.job_id for r in full.retried] == [old.id]
    assert (await store.reap_expired_leases()).retried == []  # the live lease stays


async def test_sweep_window_leaves_older_dispatches_to_a_full_pass(
    store: JobStore, backend_url: str
) -> None:
    old = await enqueue(store, "old")
    recent = await enqueue(store, "recent")
    fresh = await enqueue(store, "fresh")
    for job in (old, recent, fresh):
        await _set(backend_url, "dispatched_at", job.id, 0)
    await _set(backend_url, "dispatched_at", old.id, 3600)
    await _set(backend_url, "dispatched_at", recent.id, 100)

    windowed = await store.redispatch_stale_jobs({"default": 100}, 30.0, dispatched_within_s=600.0)
    assert [r.job_id for r in windowed] == [recent.id]
    full = await store.redispatch_stale_jobs({"default": 100}, 30.0)
    assert [r.job_id for r in full] == [old.id]
    assert await store.redispatch_stale_jobs({"default": 100}, 30.0) == []  # all fresh now


async def test_redispatch_takes_each_queues_own_limit_in_one_call(
    store: JobStore, backend_url: str
) -> None:
    """One statement for every queue (an idle sweep is one transaction), each queue's limit
    its own: the oldest dispatches of each, however many the other queues have."""
    jobs = {q: [await enqueue(store, f"{q}{i}", queue=q) for i in range(3)]
            for q in ("q1", "q2", "q3")}
    await store.dispatch_due_jobs(["q1", "q2", "q3"], 100)
    for q, age_s in (("q1", 300), ("q2", 200), ("q3", 100)):  # each queue's oldest first
        for i, job in enumerate(jobs[q]):
            await _set(backend_url, "dispatched_at", job.id, age_s - i)
    refs = await store.redispatch_stale_jobs({"q1": 1, "q2": 2, "q3": 0}, 30.0)
    assert sorted(r.job_id for r in refs) == sorted(
        [jobs["q1"][0].id, jobs["q2"][0].id, jobs["q2"][1].id])
    assert {r.queue for r in refs} == {"q1", "q2"}
