"""A queue paused through one daemon's API is paused for the whole fleet: a second daemon
(a real process on the same PostgreSQL and Redis) stops claiming from it within 1 s, and
takes the jobs once the queue is resumed."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import trio

from tests.admin.helpers import Stack, admin_worker, daemon_admin_url, stays_true
from tests.integration.helpers import sql
from tests.support.daemon_process import DaemonFactory
from tests.support.wait import wait_until

QUEUE = "events"
PAUSE_WITHIN_S = 1.0


async def test_queue_pause_through_one_daemon_stops_another(
    pg_redis_stack: Stack, daemons: DaemonFactory
) -> None:
    env = {"GOCHAT_DATABASE_URL": pg_redis_stack.database_url,
           "GOCHAT_REDIS_URL": pg_redis_stack.redis_url, "GOCHAT_LOG_FORMAT": "json"}
    # B: a separate daemon with the default settings (2 s stream reads), claiming every queue.
    other = await trio.to_thread.run_sync(
        lambda: daemons.start("daemon-b", env=env, mode="streams"))
    b_url = daemon_admin_url(other)
    # A: only claims "default", so whatever runs in QUEUE was claimed by B.
    async with admin_worker(pg_redis_stack, worker_queues={"default": 1}) as a, \
            httpx.AsyncClient(base_url=b_url, timeout=10.0) as b:
        b_status = (await b.get("/v1/status")).json()
        b_id = b_status["worker_id"]
        assert b_status["mode"] == "streams" and b_status["paused_queues"] == []
        client, store = a.worker.client, a.worker.store

        warm = [(await client.enqueue("sys:noop", {}, queue=QUEUE)).id for _ in range(4)]
        for job_id in warm:
            assert (await a.wait_job(job_id, "completed"))["locked_by"] == b_id

        paused = await a.post(f"/v1/queues/{QUEUE}/pause")
        paused_t = trio.current_time()
        assert paused == {"queue": QUEUE, "paused": True, "changed": True}
        # Right away, before B can have noticed: B may take these only within PAUSE_WITHIN_S.
        early = [(await client.enqueue("sys:noop", {}, queue=QUEUE)).id for _ in range(4)]

        async def b_sees_pause() -> bool:
            return QUEUE in (await b.get("/v1/status")).json()["paused_queues"]

        await wait_until(b_sees_pause, timeout_s=PAUSE_WITHIN_S, interval_s=0.02,
                         what="daemon B follows the fleet-wide pause")
        seen_after = trio.current_time() - paused_t
        assert seen_after <= PAUSE_WITHIN_S + 0.1
        late = [(await client.enqueue("sys:noop", {}, queue=QUEUE)).id for _ in range(4)]
        assert (await a.queues())[QUEUE]["paused"] is True

        async def late_untouched() -> bool:
            for job_id in late:
                job = await store.get_job(job_id)
                assert job is not None
                if job.status.value != "queued" or job.attempts or job.locked_by is not None:
                    return False
            return True

        await stays_true(late_untouched, for_s=1.5, interval_s=0.1,
                         what="no daemon claims from the paused queue")

        # Whatever B took of the early jobs, it took within PAUSE_WITHIN_S of the pause
        # (both times by the database clock).
        [(paused_at,)] = await sql(pg_redis_stack.database_url,
                                   "SELECT paused_at FROM gochatd_queue_pauses WHERE queue = %s",
                                   (QUEUE,))
        claims: list[tuple[Any, ...]] = await sql(
            pg_redis_stack.database_url,
            "SELECT id, locked_at FROM background_jobs WHERE id = ANY(%s) AND locked_at IS NOT NULL",
            (early,))
        limit: datetime = paused_at + timedelta(seconds=PAUSE_WITHIN_S)
        assert all(locked_at <= limit for _, locked_at in claims), (paused_at, claims)

        # Resumed through B this time: fleet-wide from anywhere.
        resumed = await b.post(f"/v1/queues/{QUEUE}/resume")
        assert resumed.status_code == 200 and resumed.json()["changed"] is True
        for job_id in early + late:
            done = await a.wait_job(job_id, "completed", timeout_s=15)
            assert done["locked_by"] == b_id
            if job_id in late:
                assert done["attempts"] == 1
        await wait_until(lambda: _no_pauses(a.http), timeout_s=2, what="A follows the resume")

    assert await trio.to_thread.run_sync(other.stop) == 0
    other.assert_clean_output()


async def _no_pauses(http: httpx.AsyncClient) -> bool:
    paused: list[str] = (await http.get("/v1/status")).json()["paused_queues"]
    return paused == []
