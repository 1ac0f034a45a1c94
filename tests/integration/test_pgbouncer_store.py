"""The PostgreSQL store behind a real pgbouncer in transaction mode: it sees the pooler when
it opens, prepares nothing there, and listens only on a direct ``database_listen_url``
(without one: no LISTEN at all, the wait is a timeout and the workers poll)."""

from __future__ import annotations

import trio
import trio.testing

from gochatd.model import EnqueueRequest
from gochatd.store.postgres import PostgresStore
from tests.support.pgbouncer import PgBouncer


def _request(n: int) -> EnqueueRequest:
    return EnqueueRequest(job_type="pooled", payload={"n": n}, queue="default",
                          tenant_id="default")


async def test_the_store_sees_the_pooler_and_prepares_nothing(
    pgbouncer: PgBouncer, pg_clean: str
) -> None:
    direct = PostgresStore(pg_clean, pool_size=2)
    await direct.open()
    try:
        assert direct.behind_pooler is False and direct.has_notifications is True
    finally:
        await direct.close()

    pooled = PostgresStore(pgbouncer.url, pool_size=4)  # database_prepare: auto
    await pooled.open()
    try:
        assert pooled.behind_pooler is True
        assert pooled.has_notifications is False
        # Many times the same hot statements, from several connections at once, over a
        # 4-connection server pool: a prepared statement would be missing (or another
        # client's) on most of them.
        async with trio.open_nursery() as nursery:
            for k in range(4):
                async def enqueue_many(k: int = k) -> None:
                    for n in range(40):
                        await pooled.enqueue(_request(k * 100 + n))
                nursery.start_soon(enqueue_many)
        claimed = await pooled.claim_due_jobs(["default"], 500, "w1", 30.0)
        assert len(claimed) == 160
        assert pooled.prepares is False  # what the detection chose
        start = trio.current_time()
        assert await pooled.wait_for_notification(0.3) is False  # polling: a plain timeout
        assert trio.current_time() - start >= 0.25
    finally:
        await pooled.close()


async def test_a_direct_listen_url_brings_the_wake_ups_back(
    pgbouncer: PgBouncer, pg_clean: str
) -> None:
    store = PostgresStore(pgbouncer.url, pool_size=2, listen_dsn=pg_clean)
    other = PostgresStore(pgbouncer.url, pool_size=2)
    await store.open()
    await other.open()
    try:
        assert store.behind_pooler is True and store.has_notifications is True
        assert await store.wait_for_notification(0.05) is False
        woke: list[bool] = []

        async def waiter() -> None:
            woke.append(await store.wait_for_notification(10.0))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            await other.enqueue(_request(1))  # through the pooler: NOTIFY from the trigger
        assert woke == [True]
    finally:
        await other.close()
        await store.close()
