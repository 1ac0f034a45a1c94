"""The fleet dashboard's API (admin/fleet.py and the listing parameters of GET /v1/jobs):
newest-first listing with search and the scheduled tab, counts that add up, the fleet view
of the daemons on the database, and drain/pause/resume of a chosen daemon, applied by that
daemon (this one at once, another on its next heartbeat) through its own Lifecycle."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from gochatd.admin import fleet
from gochatd.admin.fleet import CountsSnapshot
from gochatd.loops.fleet import BEAT_S
from gochatd.model import EnqueueRequest
from gochatd.store import open_store
from tests.admin.helpers import PARKED, Admin, Stack, admin_worker
from tests.integration.helpers import make_registry, started_worker
from tests.support.harness import make_settings
from tests.support.wait import wait_until

STATUSES = ("queued", "running", "retrying", "completed", "dead", "cancelled")


async def _ids(admin: Admin, **params: Any) -> list[int]:
    page = await admin.get("/v1/jobs", params={"limit": 500, **params})
    return [j["id"] for j in page["jobs"]]


async def test_search_scheduled_tab_and_counts(stack: Stack) -> None:
    async with admin_worker(stack) as admin:
        client = admin.worker.client
        welcome = await client.enqueue("mail:welcome", {"to": "ada@example.org"}, queue=PARKED)
        report = await client.enqueue("report:make", {"note": "50% done_x"}, queue=PARKED,
                                      tenant_id="acme")
        soon = await client.enqueue("mail:later", {}, queue=PARKED, delay_s=600)
        later = await client.enqueue("mail:later", {}, queue=PARKED, delay_s=7200)
        done = await client.enqueue("sys:noop", {})
        await admin.wait_job(done.id, "completed")

        assert await _ids(admin) == [done.id, later.id, soon.id, report.id, welcome.id]
        assert await _ids(admin, q="ADA@EXAMPLE") == [welcome.id]
        assert await _ids(admin, q="acme") == [report.id]
        assert await _ids(admin, q="0% done_") == [report.id]
        assert await _ids(admin, q="0%_done") == []  # % and _ are literal
        assert await _ids(admin, q=str(report.id), status="queued") == [report.id]
        assert await _ids(admin, q="mail:", order="oldest") == [welcome.id, soon.id, later.id]
        assert await _ids(admin, scheduled="true") == [soon.id, later.id]  # soonest first
        first = await admin.get("/v1/jobs", params={"scheduled": "true", "limit": 1})
        assert [j["id"] for j in first["jobs"]] == [soon.id]
        rest = await admin.get("/v1/jobs", params={"scheduled": "true", "limit": 1,
                                                    "cursor": first["next_cursor"]})
        assert [j["id"] for j in rest["jobs"]] == [later.id]

        counts = await admin.get("/v1/jobs/counts")
        assert set(counts) == {*STATUSES, "scheduled", "delayed"}
        assert sum(counts[s] for s in STATUSES) == 5  # each job once, in its status
        assert (counts["queued"], counts["completed"], counts["scheduled"]) == (4, 1, 2)
        # delayed: the part of queued not yet due, what the queues' rows sum to.
        queues = (await admin.get("/v1/queues"))["queues"]
        assert counts["delayed"] == sum(q["delayed"] for q in queues) == 2
        assert counts["queued"] - counts["delayed"] == sum(q["queued"] for q in queues) == 2


async def test_fleet_view_and_a_request_for_this_daemon(stack: Stack) -> None:
    async with admin_worker(stack) as admin:
        me = admin.worker.worker_id
        await admin.worker.fleet.run_once()  # the loop's first beat may not have landed yet
        [row] = (await admin.get("/v1/fleet"))["daemons"]
        assert (row["id"], row["this"], row["alive"], row["mode"]) == (me, True, True, stack.mode)
        assert (row["paused"], row["draining"], row["requested"]) == (False, False, None)
        assert row["concurrency"] == admin.worker.settings.worker_concurrency

        assert await admin.post(f"/v1/fleet/{me}/pause", status=202) == {
            "id": me, "requested": "pause"}
        assert (await admin.status())["paused"]  # this daemon applies its own at once
        [row] = (await admin.get("/v1/fleet"))["daemons"]
        assert (row["paused"], row["mode"], row["requested"]) == (True, "paused", None)
        await admin.post(f"/v1/fleet/{me}/resume", status=202)
        assert not (await admin.status())["paused"]
        await admin.post(f"/v1/fleet/{me}/drain", status=202)
        assert (await admin.status())["draining"]
        await admin.post("/v1/resume")
    # A clean stop removes the row.
    async with admin_worker(stack) as other:
        rows = (await other.get("/v1/fleet"))["daemons"]
        assert me not in {r["id"] for r in rows}


async def test_pause_and_drain_another_daemon_through_the_first_ones_api(
    pg_redis_stack: Stack
) -> None:
    settings_b = make_settings(pg_redis_stack.database_url, pg_redis_stack.redis_url)
    async with admin_worker(pg_redis_stack) as a, \
            started_worker(settings_b, registry=make_registry()) as b:
        b_id = b.worker.worker_id

        async def b_row() -> dict[str, Any] | None:
            rows = {r["id"]: r for r in (await a.get("/v1/fleet"))["daemons"]}
            return rows.get(b_id)

        row = await wait_until(b_row, timeout_s=3 * BEAT_S, what="daemon B in the fleet view")
        assert row is not None and row["this"] is False and row["alive"] is True

        async def b_shows(**expected: Any) -> bool:
            found = await b_row()
            return found is not None and all(found[k] == v for k, v in expected.items())

        assert await a.post(f"/v1/fleet/{b_id}/pause", status=202) == {
            "id": b_id, "requested": "pause"}
        await wait_until(lambda: b_shows(paused=True, requested=None), timeout_s=3 * BEAT_S,
                         what="B applies the pause")
        assert b.worker.lifecycle.paused and not a.worker.lifecycle.paused
        job = await b.worker.client.enqueue("sys:noop", {})
        assert (await a.wait_job(job.id, "completed"))["locked_by"] == a.worker.worker_id

        await a.post(f"/v1/fleet/{b_id}/resume", status=202)
        await wait_until(lambda: b_shows(paused=False, requested=None), timeout_s=3 * BEAT_S,
                         what="B applies the resume")
        await a.post(f"/v1/fleet/{b_id}/drain", status=202)
        await wait_until(lambda: b_shows(draining=True, mode="draining"), timeout_s=3 * BEAT_S,
                         what="B applies the drain")
        assert b.worker.lifecycle.draining and not a.worker.lifecycle.draining
        with trio.fail_after(5):
            await b.stop()
        assert await b_row() is None  # gone from the view on its clean stop


async def test_slow_counts_are_served_as_a_snapshot(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(sqlite_url)
    await store.open()
    await store.migrate()
    try:
        snapshot = CountsSnapshot()
        await store.enqueue(EnqueueRequest("t:a", {}))
        assert (await snapshot.get(store))["queued"] == 1
        await store.enqueue(EnqueueRequest("t:a", {}))
        assert (await snapshot.get(store))["queued"] == 2  # a fast count: counted again
        monkeypatch.setattr(fleet, "SLOW_COUNT_S", 0.0)  # every count is slow from now on
        assert (await snapshot.get(store))["queued"] == 2
        await store.enqueue(EnqueueRequest("t:a", {}, delay_s=60))
        assert await snapshot.get(store) == {**{s: 0 for s in STATUSES}, "queued": 2,
                                             "scheduled": 0, "delayed": 0}  # the snapshot
        monkeypatch.setattr(fleet, "SNAPSHOT_S", 0.0)  # and now it is too old
        counts = await snapshot.get(store)
        assert (counts["queued"], counts["scheduled"], counts["delayed"]) == (3, 1, 1)
    finally:
        await store.close()
