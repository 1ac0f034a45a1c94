"""The loops as components: each ``run_once`` does one pass against a real store and says
what it did, with only the collaborators it is given (no daemon object)."""

from __future__ import annotations

from gochatd.config.settings import Settings
from gochatd.loops.pauses import PauseFollower
from gochatd.loops.reap import ReapConfig, Reaper
from gochatd.obs.counters import Counters
from gochatd.store import JobStore
from gochatd.worker.heartbeat import Heartbeat
from gochatd.worker.lifecycle import State
from gochatd.worker.pool import ActiveJobs
from gochatd.worker.queues import QueueSelection
from gochatd.worker.runner import ActiveJob, StopReason
from gochatd.worker.service import Worker
from gochatd.worker.wakeup import Wakeups
from tests.integration.helpers import insert_job, now_sql, sql


async def test_the_reaper_reports_what_it_reaped(store: JobStore, backend_url: str) -> None:
    job_id = await insert_job(backend_url)
    [claimed] = await store.claim_due_jobs(["default"], 1, "gone-worker", 30.0)
    assert claimed.id == job_id
    await sql(backend_url, "UPDATE background_jobs SET lease_expires_at = "
              f"{now_sql(backend_url, -5)} WHERE id = %s", [job_id])
    counters, wakeups = Counters("test"), Wakeups()
    reaper = Reaper(ReapConfig(interval_s=1.0), store=store, counters=counters, wakeups=wakeups,
                    worker_id="test")
    result = await reaper.run_once()
    assert ([r.job_id for r in result.retried], result.dead, result.count) == ([job_id], [], 1)
    assert counters["leases_reaped"] == 1
    assert await wakeups.intake.wait(0) and await wakeups.schedule.wait(0)
    again = await reaper.run_once()
    assert again.count == 0 and counters["leases_reaped"] == 1
    assert not await wakeups.intake.wait(0)


async def test_the_pause_follower_applies_fleet_pauses(store: JobStore) -> None:
    queues = QueueSelection({"default": 2, "low": 1})
    wakeups = Wakeups()
    follower = PauseFollower(store=store, queues=queues, wakeups=wakeups, counters=Counters(),
                             worker_id="test")
    first = await follower.run_once()
    assert first.paused == frozenset() and not first.changed
    assert await store.pause_queue("low", "operator")
    paused = await follower.run_once()
    assert paused.paused == {"low"} and paused.changed
    assert queues.intake == ["default"] and queues.queues == ["default", "low"]
    assert await wakeups.intake.wait(0)
    assert not (await follower.run_once()).changed
    assert await store.resume_queue("low")
    assert (await follower.run_once()).changed and queues.intake == ["default", "low"]


async def test_the_heartbeat_stops_a_job_whose_lease_is_gone(
    store: JobStore, backend_url: str
) -> None:
    await insert_job(backend_url)
    await insert_job(backend_url)
    claimed = await store.claim_due_jobs(["default"], 2, "me", 30.0)
    jobs = ActiveJobs()
    actives = [ActiveJob(c, None) for c in claimed]
    for active in actives:
        jobs.add(active)
    heartbeat = Heartbeat(store=store, jobs=jobs, worker_id="me", lease_s=30.0,
                          counters=Counters())
    assert (await heartbeat.run_once()).extended == 2
    # Another worker took the first job over (a newer fence).
    await sql(backend_url, "UPDATE background_jobs SET fence = fence + 1 WHERE id = %s",
              [actives[0].claimed.id])
    result = await heartbeat.run_once()
    assert (result.extended, result.lost, result.cancelled) == (1, 1, 0)
    assert actives[0].stop_reason is StopReason.LEASE_LOST
    assert actives[1].stop_reason is None
    assert (await Heartbeat(store=store, jobs=ActiveJobs(), worker_id="me", lease_s=30.0,
                            counters=Counters()).run_once()).extended == 0


def test_the_pool_has_free_slots_only_while_the_lifecycle_claims() -> None:
    worker = Worker(Settings(database_url="sqlite:///:memory:", worker_concurrency=3))
    assert worker.pool.free_slots() == 0  # starting: the intake has not chosen a mode
    worker.lifecycle.dispatching(State.POLLING)
    assert worker.pool.free_slots() == 3
    worker.control.pause()
    assert worker.pool.free_slots() == 0 and worker.control.status()["paused"] is True
    assert worker.control.resume()
    assert worker.pool.free_slots() == 3
    worker.control.drain()
    assert worker.pool.free_slots() == 0 and worker.control.status()["draining"] is True
