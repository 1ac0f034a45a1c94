"""Drain under load: in-flight jobs finish, nothing new starts, readiness drops until
resume; ``?exit=true`` makes a real daemon exit 0 once drained."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import trio

from gochatd.worker.registry import HandlerSpec
from tests.admin.helpers import (
    Admin,
    Stack,
    admin_worker,
    assert_json_error,
    daemon_admin_url,
    stays_true,
)
from tests.integration.helpers import Tracker, make_registry, wait_for
from tests.support.daemon_process import DaemonFactory, poll_until
from tests.support.e2e_jobs import enqueue_many, jobs

JOB_S = 0.3


async def _statuses(admin: Admin, ids: list[int]) -> dict[int, dict[str, Any]]:
    return {i: await admin.job(i) for i in ids}


async def test_drain_under_load_then_resume(stack: Stack) -> None:
    concurrency, total = 3, 9
    async with admin_worker(stack, worker_concurrency=concurrency) as admin:
        ids = [(await admin.worker.client.enqueue("sys:sleep", {"seconds": JOB_S})).id
               for _ in range(total)]
        await admin.wait_status(lambda s: s["in_flight"] == concurrency, what="a full worker")

        drain = await admin.post("/v1/drain")
        assert drain["draining"] is True and drain["exit_when_drained"] is False
        claimed_at_drain = drain["counters"]["jobs_claimed"]
        assert concurrency <= claimed_at_drain <= total
        not_ready = await admin.http.get("/readyz")
        assert not_ready.status_code == 503
        assert not_ready.json()["draining"] is True

        # In-flight jobs finish (they are not interrupted) ...
        drained = await admin.wait_status(lambda s: s["drained"], timeout_s=JOB_S * 10,
                                          what="in-flight jobs finished")
        assert drained["in_flight"] == 0
        # ... at most the claim already under way when the drain came lands on top.
        claimed = drained["counters"]["jobs_claimed"]
        assert claimed_at_drain <= claimed <= claimed_at_drain + concurrency
        jobs_now = await _statuses(admin, ids)
        finished = {i for i, j in jobs_now.items() if j["status"] == "completed"}
        waiting = {i for i, j in jobs_now.items() if j["status"] == "queued" and j["attempts"] == 0}
        assert len(finished) == claimed and len(waiting) == total - claimed
        assert total - claimed >= 1, "the test needs jobs left waiting"

        async def nothing_new_starts() -> bool:
            status = await admin.status()
            if status["counters"]["jobs_claimed"] != claimed or status["in_flight"] != 0:
                return False
            queued = (await admin.queues())["default"]["queued"]
            return bool(queued == total - claimed)

        # Longer than two job lengths: a worker still claiming would have started some.
        await stays_true(nothing_new_starts, for_s=JOB_S * 2.5, what="nothing starts while drained")
        assert (await admin.http.get("/readyz")).status_code == 503

        resumed = await admin.post("/v1/resume")
        assert resumed["draining"] is False
        assert (await admin.get("/readyz"))["status"] == "ready"
        for job_id in ids:
            done = await admin.wait_job(job_id, "completed", timeout_s=10)
            assert done["attempts"] == 1  # nothing was interrupted and run twice
        assert (await admin.status())["counters"]["jobs_claimed"] == total


def test_drain_with_exit_stops_the_daemon_once_drained(
    tmp_path: Path, daemons: DaemonFactory
) -> None:
    db_url = f"sqlite:///{tmp_path / 'gochatd.db'}"
    env = {"GOCHAT_DATABASE_URL": db_url, "GOCHAT_LOG_FORMAT": "json",
           "GOCHAT_WORKER_CONCURRENCY": "2"}
    daemon = daemons.start("drainer", env=env, cwd=tmp_path)
    base = daemon_admin_url(daemon)
    ids = enqueue_many(db_url, "sys:sleep", [{"seconds": 0.5}] * 6)
    with httpx.Client(base_url=base, timeout=10.0) as http:
        poll_until(lambda: http.get("/v1/status").json()["in_flight"] == 2, timeout_s=20,
                   what="two jobs in flight")
        response = http.post("/v1/drain", params={"exit": "true"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["draining"] is True and body["exit_when_drained"] is True
        assert body["in_flight"] == 2
        assert http.get("/readyz").status_code == 503
    assert daemon.wait(15) == 0
    daemon.assert_clean_output()
    assert daemon.err_text() == ""
    stopped = daemon.events("worker_stopped")
    assert len(stopped) == 1 and stopped[0]["forced"] is False
    rows = jobs(db_url)
    completed = [i for i in ids if rows[i].status == "completed"]
    left = [i for i in ids if rows[i].status == "queued" and rows[i].attempts == 0]
    # The two in flight finished (plus at most one claim under way); the rest never started.
    assert 2 <= len(completed) <= 4 and len(completed) + len(left) == 6
    assert all(rows[i].attempts == 1 for i in completed)
    assert len(daemon.events("job_completed")) == len(completed)
    assert not daemon.events("job_interrupted")
    # The port is closed once the process is gone.
    with httpx.Client(base_url=base, timeout=2.0) as http:
        try:
            http.get("/healthz")
        except httpx.ConnectError:
            pass
        else:
            raise AssertionError("the admin port still answers after exit")



async def test_idle_drain_with_exit_stops_at_once(sqlite_stack: Stack) -> None:
    async with admin_worker(sqlite_stack) as admin:
        body = await admin.post("/v1/drain", params={"exit": "1"})
        assert body["exit_when_drained"] is True and body["drained"] is True
        with trio.fail_after(10):
            await admin.run.done.wait()
    assert admin.run.exit_code == 0


async def test_while_stopping_readyz_is_down_and_resume_is_refused(
    sqlite_stack: Stack
) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking()))
    async with admin_worker(sqlite_stack, registry=registry) as admin:
        job = await admin.worker.client.enqueue("test:block", {})
        await wait_for(lambda: job.id in tracker.blocked, what="handler running")
        admin.worker.request_stop()  # as SIGTERM does; the handler has its grace period
        ready = await admin.http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["dispatch"] == "down"
        refused = await admin.http.post("/v1/resume")
        assert assert_json_error(refused, 409) == "stopping"
        status = await admin.status()
        assert status["stopping"] is True and status["in_flight"] == 1
        tracker.release_all()
        with trio.fail_after(10):
            await admin.run.done.wait()
    assert admin.run.exit_code == 0
    assert tracker.completed == [job.id]
