"""JobStore contract: every write is numbered for change tracking (migration 0007, the base of
``gochatd migrate``'s catch-up), whichever way it is written."""

from __future__ import annotations

from gochatd.model import Outcome
from gochatd.store import JobStore
from tests.contract.helpers import claim_one, enqueue, finish, is_postgres, raw_sql


async def test_every_store_write_numbers_the_row_for_change_tracking(
    store: JobStore, backend_url: str
) -> None:
    """The hot statements number their rows themselves on SQLite (no second write of the
    row) and through the trigger on PostgreSQL: either way every write raises change_seq,
    and the counter never falls behind a number in use (gochatd migrate's catch-up)."""

    async def seq(job_id: int) -> int:
        rows = await raw_sql(backend_url, "SELECT change_seq FROM background_jobs WHERE id = ?",
                             [job_id])
        return int(rows[0][0])

    counter_sql = ("SELECT last_value FROM gochatd_change_seq" if is_postgres(backend_url)
                   else "SELECT value FROM gochatd_change_counter")
    job = await enqueue(store)
    after_enqueue = await seq(job.id)
    claimed = await claim_one(store, job, "w1")
    after_claim = await seq(job.id)
    assert await store.finish_jobs([finish(claimed, Outcome.COMPLETED)]) == {job.id}
    after_finish = await seq(job.id)
    assert 0 < after_enqueue < after_claim < after_finish
    assert int((await raw_sql(backend_url, counter_sql))[0][0]) >= after_finish
    # A foreign writer's plain UPDATE (no change_seq of its own) is numbered by the trigger.
    await raw_sql(backend_url, "UPDATE background_jobs SET priority = 3 WHERE id = ?", [job.id])
    assert await seq(job.id) > after_finish
