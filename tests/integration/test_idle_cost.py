"""An idle daemon costs the database almost nothing (issue 22): pauses, routes and fleet
changes arrive by NOTIFY (migration 0016) instead of a 0.5 s poll, and the reaper sleeps
until the earliest lease expires. Each test counts the real store's calls of one kind (a
counter around the store's own method) while nothing happens, then makes the change and
sees it followed within a deadline far shorter than the slow fallback period."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import trio

from gochatd.loops import fleet, pauses
from gochatd.loops.reap import ReapConfig, Reaper
from gochatd.migrate.route_control import fleet_acks
from gochatd.migrate.routing import follower
from gochatd.model import JobStatus
from gochatd.obs.counters import Counters
from gochatd.store import JobStore
from gochatd.worker.wakeup import Wakeups
from tests.admin.helpers import stays_true
from tests.integration.helpers import insert_job, sql, wait_for, wait_for_status
from tests.migrate.support import open_db
from tests.support.harness import make_settings, running_worker
from tests.support.wait import wait_until

#: Far below every fallback period (30 s): only a notification explains following this fast.
FOLLOW_S = 2.0


class Calls:
    """How often one method of a real store object was called (it still runs)."""

    def __init__(self, owner: Any, name: str) -> None:
        self.count = 0
        original: Callable[..., Awaitable[Any]] = getattr(owner, name)

        @functools.wraps(original)
        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await original(*args, **kwargs)

        setattr(owner, name, counted)


async def _unchanged(calls: Calls, for_s: float, what: str) -> None:
    before = calls.count

    async def probe() -> bool:
        return calls.count == before

    await stays_true(probe, for_s=for_s, what=what, interval_s=0.1)


async def _settled(calls: Calls, quiet_s: float = 1.0, timeout_s: float = 10.0) -> None:
    """Until ``quiet_s`` passed without a call."""
    with trio.fail_after(timeout_s):
        while True:
            before = calls.count
            await trio.sleep(quiet_s)  # an observation window, not a synchronisation
            if calls.count == before:
                return


async def test_a_pause_on_one_daemon_stops_another_without_a_poll(
    pg_clean: str, redis_url: str
) -> None:
    assert pauses.FALLBACK_S >= 30 * FOLLOW_S / 2
    settings = make_settings(pg_clean, redis_url, worker_queues={"default": 1, "events": 1})
    async with running_worker(settings) as a, running_worker(settings) as b:
        assert b.store.control_notifications
        reads = Calls(b.store, "paused_queues")
        # The old follower read every 0.5 s: four reads in this window.
        await _unchanged(reads, 2.0, "daemon B reads no pauses while none changes")

        assert await a.store.pause_queue("events", "test")
        paused_t = trio.current_time()
        await wait_for(lambda: "events" in b.queues.paused, timeout_s=FOLLOW_S,
                       what="daemon B follows the pause made through daemon A")
        assert trio.current_time() - paused_t < FOLLOW_S and reads.count >= 1
        job = await b.client.enqueue("sys:noop", {}, queue="events")

        async def still_queued() -> bool:
            row = await b.store.get_job(job.id)
            return row is not None and row.status is JobStatus.QUEUED

        await stays_true(still_queued, for_s=1.0, what="no daemon claims the paused queue")
        assert await a.store.resume_queue("events")
        await wait_for_status(b.store, job.id, JobStatus.COMPLETED, timeout_s=FOLLOW_S + 5)


async def test_routes_are_read_when_announced_and_acked_once(pg_clean: str) -> None:
    assert follower.FALLBACK_S >= 30
    settings = make_settings(pg_clean)
    async with running_worker(settings) as worker:
        async def acked_at_start() -> bool:
            rows = await sql(pg_clean, "SELECT version FROM gochatd_route_acks WHERE "
                             "worker_id = %s", [worker.worker_id])
            return rows == [(0,)]

        await wait_until(acked_at_start, what="the start's acknowledgement")
        reads = Calls(worker.store, "refresh_routes")
        acks = Calls(worker.store, "ack_routes")
        # The old follower read every 0.5 s and acked every 5 s.
        await _unchanged(reads, 2.0, "no route read while no route changes")
        assert acks.count == 0
        # Any statement on the route table is announced (a real route needs a destination).
        with psycopg.connect(pg_clean, autocommit=True) as conn:
            conn.execute("DELETE FROM gochatd_routes WHERE tenant_id = 'nobody'")
        await wait_for(lambda: reads.count == 1, timeout_s=FOLLOW_S,
                       what="the follower reads the routes when told")
        assert acks.count == 0  # the version did not move: nothing to acknowledge


async def test_the_barrier_counts_a_live_daemon_that_acked_nothing(pg_clean: str) -> None:
    settings = make_settings(pg_clean)
    async with running_worker(settings) as worker:
        async def beat_once() -> bool:  # ready comes before the fleet loop's first beat
            rows = await sql(pg_clean, "SELECT 1 FROM gochatd_daemons WHERE id = %s",
                             [worker.worker_id])
            return bool(rows)

        await wait_until(beat_once, what="the daemon's first fleet heartbeat")
        source = open_db(pg_clean)
        try:
            with psycopg.connect(pg_clean, autocommit=True) as conn:
                conn.execute("DELETE FROM gochatd_route_acks")  # as if it acked nothing yet
            seen = await trio.to_thread.run_sync(fleet_acks, source, 0)
            assert seen.acked == (worker.worker_id,) and seen.waiting == ()
            # Version 1 is not seen: the daemon is live by its fleet heartbeat alone.
            ahead = await trio.to_thread.run_sync(fleet_acks, source, 1)
            assert ahead.waiting == (worker.worker_id,) and ahead.acked == ()
        finally:
            source.close()


async def test_the_fleet_reads_its_peers_when_the_fleet_changes(pg_clean: str) -> None:
    settings = make_settings(pg_clean)
    async with running_worker(settings) as a:
        reads = Calls(a.store, "list_daemons")
        beats = Calls(a.store, "upsert_daemon")
        await _settled(reads)  # the start's passes (its own row's INSERT is announced too)
        beats.count = 0
        # The old loop read every row on each 2 s beat.
        await _unchanged(reads, fleet.BEAT_S + 1.0, "no fleet read while the fleet is still")
        assert beats.count >= 1, "the heartbeat goes on"
        async with running_worker(settings) as b:
            await wait_for(lambda: reads.count >= 1, timeout_s=FOLLOW_S,
                           what="daemon A reads the fleet when daemon B joins")
            assert b.worker_id != a.worker_id


async def test_the_reaper_sleeps_until_the_earliest_lease_expires(
    store: JobStore, backend_url: str
) -> None:
    job_id = await insert_job(backend_url)
    [claimed] = await store.claim_due_jobs(["default"], 1, "gone-worker", 1.5)
    assert claimed.id == job_id
    passes = Calls(store, "reap_expired_leases")
    reaper = Reaper(ReapConfig(interval_s=0.05, max_wait_s=30.0), store=store,
                    counters=Counters(), wakeups=Wakeups(), worker_id="test")
    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        await wait_for_status(store, job_id, JobStatus.RETRYING, timeout_s=4.0)
        # A fixed 0.05 s tick would have made ~30 passes by now: one at start, one at expiry.
        assert passes.count <= 3, passes.count
        await _unchanged(passes, 1.0, "no pass while nothing runs")
        nursery.cancel_scope.cancel()


def test_the_reapers_wait_follows_the_earliest_expiry() -> None:
    config = ReapConfig(interval_s=5.0, max_wait_s=30.0)
    assert config.wait_s(None) == 30.0
    assert config.wait_s(12.0) == 12.1
    assert config.wait_s(1.0) == 5.0 and config.wait_s(-3.0) == 5.0
    assert config.wait_s(90.0) == 30.0
    assert ReapConfig(interval_s=60.0, max_wait_s=30.0).wait_s(None) == 60.0
