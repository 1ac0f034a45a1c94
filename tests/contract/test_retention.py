"""JobStore contract: retention deletes old finished jobs, in bounded batches, oldest first,
and never touches recent or unfinished ones."""

from __future__ import annotations

import psycopg
import pytest
import trio

from gochatd.loops.retention import RetentionPolicy, count_prunable, prune_once
from gochatd.migrate.route_control import prepare_tracking
from gochatd.model import EnqueueRequest, Job, JobStatus, Outcome
from gochatd.store import JobStore
from tests.contract.helpers import (
    claim_one,
    enqueue,
    finish,
    is_postgres,
    raw_sql,
    row_count,
    second_store,
)
from tests.migrate.support import open_db

DAY_S = 86400.0


async def _age(url: str, job_ids: list[int], seconds: float) -> None:
    """Make the rows' last change ``seconds`` older (database clock)."""
    marks = ", ".join("?" for _ in job_ids)
    shift = "updated_at - make_interval(secs => ?)" if is_postgres(url) else "updated_at - ?"
    await raw_sql(url, f"UPDATE background_jobs SET updated_at = {shift} WHERE id IN ({marks})",
                  [seconds, *job_ids])


async def _finished(store: JobStore, outcome: Outcome, n: int = 1, **kwargs: object) -> list[Job]:
    jobs = []
    for _ in range(n):
        job = await enqueue(store, **kwargs)  # type: ignore[arg-type]
        claimed = await claim_one(store, job, "w1")
        assert await store.finish_jobs([finish(claimed, outcome)]) == {job.id}
        jobs.append(job)
    return jobs


async def _cancelled(store: JobStore) -> Job:
    job = await enqueue(store)
    return await store.cancel_job(job.id)


async def _ids(backend_url: str) -> set[int]:
    return {int(r[0]) for r in await raw_sql(backend_url, "SELECT id FROM background_jobs")}


async def test_only_old_finished_jobs_are_pruned(store: JobStore, backend_url: str) -> None:
    old_done = await _finished(store, Outcome.COMPLETED, 3)
    new_done = await _finished(store, Outcome.COMPLETED, 2)
    old_dead = await _finished(store, Outcome.DEAD, 2)
    new_dead = await _finished(store, Outcome.DEAD)
    old_cancelled = await _cancelled(store)
    new_cancelled = await _cancelled(store)
    # Unfinished jobs, however old, are never pruned.
    queued = await enqueue(store)
    running = await claim_one(store, await enqueue(store), "w1")
    retrying = (await _finished(store, Outcome.RETRY))[0]
    await _age(backend_url, [j.id for j in old_done], 8 * DAY_S)
    await _age(backend_url, [j.id for j in new_done], 6 * DAY_S)
    await _age(backend_url, [j.id for j in old_dead] + [old_cancelled.id], 31 * DAY_S)
    await _age(backend_url, [new_dead[0].id, new_cancelled.id], 29 * DAY_S)
    await _age(backend_url, [queued.id, running.id, retrying.id], 400 * DAY_S)
    policy = RetentionPolicy(completed_s=7 * DAY_S, dead_s=30 * DAY_S, cancelled_s=30 * DAY_S,
                             batch=1000)

    assert await count_prunable(store, policy) == {
        JobStatus.COMPLETED: 3, JobStatus.DEAD: 2, JobStatus.CANCELLED: 1,
    }
    assert await prune_once(store, policy) == {
        JobStatus.COMPLETED: 3, JobStatus.DEAD: 2, JobStatus.CANCELLED: 1,
    }
    kept = {j.id for j in new_done + new_dead} | {new_cancelled.id, queued.id, running.id,
                                                   retrying.id}
    assert await _ids(backend_url) == kept
    assert await prune_once(store, policy) == {
        JobStatus.COMPLETED: 0, JobStatus.DEAD: 0, JobStatus.CANCELLED: 0,
    }
    still_running = await store.get_job(running.id)
    assert still_running is not None and still_running.status is JobStatus.RUNNING


async def test_zero_keeps_a_class_forever(store: JobStore, backend_url: str) -> None:
    done = await _finished(store, Outcome.COMPLETED)
    dead = await _finished(store, Outcome.DEAD)
    await _age(backend_url, [done[0].id, dead[0].id], 5000 * DAY_S)
    policy = RetentionPolicy(completed_s=DAY_S, dead_s=0, cancelled_s=0, batch=10)
    assert policy.classes() == [(JobStatus.COMPLETED, DAY_S)]
    assert await prune_once(store, policy) == {JobStatus.COMPLETED: 1}
    assert await _ids(backend_url) == {dead[0].id}


async def test_batches_are_bounded_and_oldest_first(store: JobStore, backend_url: str) -> None:
    jobs = await _finished(store, Outcome.COMPLETED, 25)
    for age, job in enumerate(jobs):  # jobs[24] is the oldest
        await _age(backend_url, [job.id], 2 * DAY_S + age * 60)
    deleted = [await store.prune_finished_jobs(JobStatus.COMPLETED, DAY_S, 10) for _ in range(4)]
    assert deleted == [10, 10, 5, 0]
    assert await row_count(backend_url) == 0

    jobs = await _finished(store, Outcome.COMPLETED, 12)
    for age, job in enumerate(jobs):
        await _age(backend_url, [job.id], 2 * DAY_S + age * 60)
    assert await store.prune_finished_jobs(JobStatus.COMPLETED, DAY_S, 5) == 5
    assert await _ids(backend_url) == {j.id for j in jobs[:7]}, "the five oldest went first"
    # A pass repeats full batches until less than a batch is left.
    policy = RetentionPolicy(completed_s=DAY_S, dead_s=0, cancelled_s=0, batch=3)
    batches: list[int] = []
    pruned = await prune_once(store, policy, pause_s=0,
                              on_batch=lambda status, n: batches.append(n))
    assert pruned == {JobStatus.COMPLETED: 7}
    assert batches == [3, 3, 1]


async def test_idempotency_key_is_free_once_pruned(store: JobStore, backend_url: str) -> None:
    request = EnqueueRequest(job_type="t", payload={"a": 1}, idempotency_key="once")
    first = (await store.enqueue(request)).job
    claimed = await claim_one(store, first, "w1")
    assert await store.finish_jobs([finish(claimed, Outcome.COMPLETED)]) == {first.id}
    again = await store.enqueue(request)
    assert (again.created, again.job.id) == (False, first.id), "kept: the key still dedupes"
    await _age(backend_url, [first.id], 8 * DAY_S)
    assert await store.prune_finished_jobs(JobStatus.COMPLETED, 7 * DAY_S, 100) == 1
    fresh = await store.enqueue(request)
    assert fresh.created and fresh.job.id != first.id
    assert fresh.job.status is JobStatus.QUEUED


async def test_unfinished_statuses_are_refused(store: JobStore) -> None:
    for status in (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.RETRYING):
        with pytest.raises(ValueError, match="finished"):
            await store.prune_finished_jobs(status, 0.0, 10)
        with pytest.raises(ValueError, match="finished"):
            await store.count_prunable_jobs(status, 0.0)


async def test_prune_query_uses_the_finished_index(store: JobStore, backend_url: str) -> None:
    """Even as a generic (prepared) plan, so a pass with nothing to delete reads nothing."""
    statement = (
        "SELECT id FROM background_jobs WHERE status IN ('completed', 'dead', 'cancelled') "
        "AND status = {p1} AND updated_at < {p2} ORDER BY updated_at LIMIT {p3}"
    )
    if is_postgres(backend_url):
        text = await trio.to_thread.run_sync(
            _pg_generic_plan, backend_url, statement.format(p1="$1", p2="now() - $2", p3="$3")
        )
    else:
        rows = await raw_sql(backend_url, "EXPLAIN QUERY PLAN " + statement.format(
            p1="?", p2="?", p3="?"), ["completed", 0.0, 10])
        text = " ".join(str(r[-1]) for r in rows)
    assert "background_jobs_finished_idx" in text, text


def _pg_generic_plan(url: str, statement: str) -> str:
    # One transaction leaving nothing behind: through a pooler in transaction mode the next
    # one may be on another server connection.
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute("SET LOCAL enable_seqscan = off")  # a tiny table would be scanned anyway
        conn.execute(f"PREPARE prune_probe(text, interval, int) AS {statement}")
        rows = conn.execute("EXPLAIN EXECUTE prune_probe('completed', '60 s', 10)").fetchall()
        conn.execute("DEALLOCATE prune_probe")
        return "\n".join(str(r[0]) for r in rows)


async def test_concurrent_pruners_share_the_work(store: JobStore, backend_url: str) -> None:
    jobs = await _finished(store, Outcome.COMPLETED, 40)
    await _age(backend_url, [j.id for j in jobs], 2 * DAY_S)
    policy = RetentionPolicy(completed_s=DAY_S, dead_s=0, cancelled_s=0, batch=4)
    totals: list[int] = []
    async with second_store(backend_url) as other:

        async def prune(s: JobStore) -> None:
            totals.append((await prune_once(s, policy, pause_s=0))[JobStatus.COMPLETED])

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prune, store)
            nursery.start_soon(prune, other)
    assert sum(totals) == len(jobs), "every row deleted once, none twice"
    assert await row_count(backend_url) == 0


async def _tombstones(url: str) -> int:
    return int((await raw_sql(url, "SELECT count(*) FROM gochatd_change_tombstones"))[0][0])


async def test_retention_prunes_old_delete_tombstones_unless_a_move_is_tracked(
    store: JobStore, backend_url: str
) -> None:
    policy = RetentionPolicy(completed_s=DAY_S, dead_s=0, cancelled_s=0, batch=2)
    db = open_db(backend_url)
    try:
        prepare_tracking(db)  # a database that took part in a move (`gochatd migrate start`)
    finally:
        db.close()
    old = await _finished(store, Outcome.COMPLETED, 3)
    await _age(backend_url, [j.id for j in old], 2 * DAY_S)
    assert await prune_once(store, policy, pause_s=0) == {JobStatus.COMPLETED: 3}
    # Each delete left a tombstone (gochatd migrate's change tracking); they are young.
    assert await _tombstones(backend_url) == 3
    age = ("deleted_at - make_interval(days => 40)" if is_postgres(backend_url)
           else "deleted_at - 40 * 86400")
    await raw_sql(backend_url, f"UPDATE gochatd_change_tombstones SET deleted_at = {age}", [])
    # While a move is being tracked they are its change log: kept.
    await raw_sql(backend_url, "INSERT INTO gochatd_routes (tenant_id, destination, state, "
                  "version) VALUES ('t9', 'sqlite:////x.db', 'tracking', 1)", [])
    await prune_once(store, policy, pause_s=0)
    assert await _tombstones(backend_url) == 3
    await raw_sql(backend_url, "UPDATE gochatd_routes SET state = 'destination'", [])
    await prune_once(store, policy, pause_s=0)  # in batches of 2
    assert await _tombstones(backend_url) == 0

