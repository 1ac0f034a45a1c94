"""The keyset windows of the reaper and the sweep (loops/scan_window.py): a windowed pass
finds only what became due inside its window; a pass without one finds everything."""

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

    windowed = await store.redispatch_stale_jobs("default", 30.0, 100, dispatched_within_s=600.0)
    assert [r.job_id for r in windowed] == [recent.id]
    full = await store.redispatch_stale_jobs("default", 30.0, 100)
    assert [r.job_id for r in full] == [old.id]
    assert await store.redispatch_stale_jobs("default", 30.0, 100) == []  # all fresh now
