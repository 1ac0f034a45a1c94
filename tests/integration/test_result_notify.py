"""The finish NOTIFY of results (sql/postgres/0018): sent only for a job somebody waits for
(a row in ``gochatd_job_waiters``), so a fleet that never waits sends none, and each
NOTIFY wakes every LISTENing connection of the database (docs/results.md)."""

from __future__ import annotations

import psycopg

from gochatd.model import Outcome
from gochatd.store import open_store
from gochatd.store.pg_connect import connect
from tests.contract.helpers import claim_one, enqueue, finish


async def test_only_a_job_somebody_waits_for_is_notified(pg_clean: str) -> None:
    store = open_store(pg_clean)
    await store.open()
    listener = connect(pg_clean)
    try:
        listener.execute("LISTEN gochatd_job_finished")
        unwatched = await enqueue(store)
        watched = await enqueue(store)
        with psycopg.connect(pg_clean, autocommit=True) as conn:
            conn.execute("INSERT INTO gochatd_job_waiters (job_id, waiter) VALUES (%s, 'w1')",
                         (watched.id,))
        # Finished one after the other: NOTIFYs arrive in commit order, so the first one
        # heard is the watched job's only if the unwatched finish sent none.
        for job in (unwatched, watched):
            claimed = await claim_one(store, job, "w")
            assert await store.finish_jobs([finish(claimed, Outcome.COMPLETED)]) == {job.id}
        heard = [n.payload for n in listener.notifies(timeout=10, stop_after=1)]
        assert heard == [str(watched.id)]
        with psycopg.connect(pg_clean, autocommit=True) as conn:  # the trigger took its row
            left = conn.execute("SELECT count(*) FROM gochatd_job_waiters").fetchone()
        assert left == (0,)
    finally:
        listener.close()
        await store.close()
