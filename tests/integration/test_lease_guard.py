"""A worker cut off from PostgreSQL stops its handlers before their leases can expire.

The heartbeat's statement hangs on a black-holed connection, so only the lease guard can
stop the handlers. It must do so while the database still holds the lease: a lease that
expires is reaped and claimed elsewhere within milliseconds, and a handler stopped at the
expiry itself ran on beside the new owner (chaos ``pg_partition``, 129 ms)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import trio
from benchmarks.chaos.proxy import FaultProxy, Mode

from gochatd.obs.counters import Counters
from gochatd.store import open_store
from gochatd.worker.heartbeat import STOP_MARGIN_SHARE, Heartbeat
from gochatd.worker.pool import ActiveJobs
from gochatd.worker.runner import ActiveJob, StopReason
from tests.integration.helpers import insert_job
from tests.support.wait import wait_until

LEASE_S = 3.0


@pytest.fixture
async def proxy() -> AsyncIterator[FaultProxy]:
    proxy = FaultProxy()  # its own Trio loop on a thread: driven from threads here
    await trio.to_thread.run_sync(proxy.start)
    try:
        yield proxy
    finally:
        await trio.to_thread.run_sync(proxy.stop)


def _through(proxy: FaultProxy, url: str) -> str:
    parts = urlsplit(url)
    port = proxy.add("pg", "127.0.0.1", parts.port or 5432)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{port}"))


def _lease_left_s(url: str, job_id: int) -> float:
    """What is left of the job's lease by the database's clock (negative: expired)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM lease_expires_at - clock_timestamp())::float8 "
            "FROM background_jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return float(row[0])


async def test_a_cut_off_worker_stops_its_handlers_while_the_lease_still_holds(
    pg_clean: str, proxy: FaultProxy,
) -> None:
    url = await trio.to_thread.run_sync(_through, proxy, pg_clean)
    store = open_store(url)
    await store.open()
    try:
        job_id = await insert_job(pg_clean)
        [claimed] = await store.claim_due_jobs(["default"], 1, "me", LEASE_S)
        jobs = ActiveJobs()
        active = ActiveJob(claimed, None)
        jobs.add(active)
        heartbeat = Heartbeat(store=store, jobs=jobs, worker_id="me", lease_s=LEASE_S,
                              counters=Counters())
        async with trio.open_nursery() as nursery:
            await nursery.start(heartbeat.run)
            await trio.to_thread.run_sync(proxy.set_mode, "pg", Mode.BLACKHOLE)

            async def stopped() -> bool:
                return active.stop_reason is not None

            await wait_until(stopped, timeout_s=3 * LEASE_S, interval_s=0.01,
                             what="the lease guard stopping the handler")
            left_s = await trio.to_thread.run_sync(_lease_left_s, pg_clean, job_id)
            assert active.stop_reason is StopReason.LEASE_LOST
            # Stopped with most of the margin still to go (the poll above and this read
            # take some of it), not at the expiry or after it.
            assert left_s > STOP_MARGIN_SHARE * LEASE_S / 3, left_s
            assert left_s < STOP_MARGIN_SHARE * LEASE_S + 0.1, left_s  # not stopped early
            await trio.to_thread.run_sync(proxy.set_mode, "pg", Mode.PASS)
            nursery.cancel_scope.cancel()
    finally:
        await store.close()
