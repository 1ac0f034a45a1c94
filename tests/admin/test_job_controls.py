"""The admin API's job controls (admin/controls.py): delete, run now, discard one job, and
any control in bulk, over real HTTP against a Worker run in-process, on SQLite (polling) and
on PostgreSQL + Redis Streams."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import trio

from gochatd.worker.registry import HandlerSpec
from tests.admin.helpers import PARKED, Stack, admin_worker, assert_json_error
from tests.integration.helpers import Tracker, make_registry, wait_for


async def test_run_now_discard_and_delete_one_job(stack: Stack) -> None:
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:block", tracker.blocking()))
    async with admin_worker(stack, registry=registry) as admin:
        client = admin.worker.client
        # run now: a job delayed by an hour starts at once.
        later = await client.enqueue("sys:noop", {}, delay_s=3600.0)
        asked = trio.current_time()
        due = await admin.post(f"/v1/jobs/{later.id}/run-now")
        assert due["status"] == "queued" and due["dispatched_at"] is None
        assert datetime.fromisoformat(due["scheduled_at"]) < datetime.now(UTC) + timedelta(
            seconds=5)
        await admin.wait_job(later.id, "completed", timeout_s=5.0)
        assert trio.current_time() - asked < 5.0
        done = await admin.http.post(f"/v1/jobs/{later.id}/run-now")
        assert assert_json_error(done, 409) == "invalid_transition"

        # discard: waiting -> dead without running; a second discard is refused.
        parked = await client.enqueue("sys:noop", {}, queue=PARKED, delay_s=3600.0)
        dead = await admin.post(f"/v1/jobs/{parked.id}/discard")
        assert (dead["status"], dead["error_class"], dead["attempts"]) == ("dead", "discarded", 0)
        assert (await admin.job(parked.id))["status"] == "dead"
        assert assert_json_error(await admin.http.post(f"/v1/jobs/{parked.id}/discard"),
                                 409) == "invalid_transition"

        # delete: any status but running.
        gone = await admin.http.delete(f"/v1/jobs/{parked.id}")
        assert (gone.status_code, gone.json()) == (200, {"id": parked.id, "deleted": True})
        assert assert_json_error(await admin.http.get(f"/v1/jobs/{parked.id}"), 404) == "not_found"
        assert assert_json_error(await admin.http.delete(f"/v1/jobs/{parked.id}"),
                                 404) == "not_found"
        busy = await client.enqueue("test:block", {})
        await wait_for(lambda: busy.id in tracker.blocked, what="handler running")
        refused = await admin.http.delete(f"/v1/jobs/{busy.id}")
        assert assert_json_error(refused, 409) == "invalid_transition"
        assert "cancel it first" in refused.json()["error"]["message"]
        assert (await admin.job(busy.id))["status"] == "running"
        await admin.post(f"/v1/jobs/{busy.id}/cancel")
        await admin.wait_job(busy.id, "cancelled")
        assert (await admin.http.delete(f"/v1/jobs/{busy.id}")).status_code == 200

        for method, path in (("DELETE", "/v1/jobs/987654321"),
                             ("POST", "/v1/jobs/987654321/run-now"),
                             ("POST", "/v1/jobs/987654321/discard")):
            missing = await admin.http.request(method, path)
            assert assert_json_error(missing, 404) == "not_found"


async def test_bulk_controls_by_filter_and_by_ids(stack: Stack) -> None:
    async with admin_worker(stack) as admin:
        client = admin.worker.client
        acme = [(await client.enqueue("sys:noop", {"n": n}, queue=PARKED, tenant_id="acme")).id
                for n in range(4)]
        other = (await client.enqueue("sys:noop", {}, queue=PARKED, tenant_id="other")).id

        discarded = await admin.post("/v1/jobs/bulk", json={
            "action": "discard", "queue": PARKED, "tenant_id": "acme"})
        assert discarded == {"action": "discard", "matched": 4, "changed": 4}
        assert {(await admin.job(i))["error_class"] for i in acme} == {"discarded"}
        assert (await admin.job(other))["status"] == "queued"

        retried = await admin.post("/v1/jobs/bulk", json={
            "action": "retry", "ids": acme[:2], "status": "dead"})
        assert retried == {"action": "retry", "matched": 2, "changed": 2}
        assert [(await admin.job(i))["status"] for i in acme] == ["queued"] * 2 + ["dead"] * 2

        deleted = await admin.post("/v1/jobs/bulk", json={
            "action": "delete", "ids": [*acme, other, 987654321], "job_type": "sys:noop"})
        assert deleted == {"action": "delete", "matched": 5, "changed": 5}
        listed = await admin.get("/v1/jobs", params={"queue": PARKED})
        assert listed["jobs"] == []

        none = await admin.post("/v1/jobs/bulk", json={"action": "cancel", "queue": PARKED})
        assert none == {"action": "cancel", "matched": 0, "changed": 0}
        # A filter no stored row can hold matches nothing, without a query.
        nul = await admin.post("/v1/jobs/bulk", json={"action": "delete", "tenant_id": "a\u0000"})
        assert nul == {"action": "delete", "matched": 0, "changed": 0}


async def test_bulk_refuses_bad_bodies_and_bulk_is_never_an_id(sqlite_stack: Stack) -> None:
    async with admin_worker(sqlite_stack) as admin:
        job = await admin.worker.client.enqueue("sys:noop", {}, queue=PARKED)
        for body in ({}, {"action": "retry"}, {"action": "explode", "queue": "q"},
                     {"action": "delete", "ids": []}, {"action": "delete", "ids": ["1"]},
                     {"action": "delete", "ids": [0]}, {"action": "delete", "ids": [2**63]},
                     {"action": "delete", "ids": [True]}, {"action": "delete", "ids": 7},
                     {"action": "delete", "ids": list(range(1, 10_002))},
                     {"action": "delete", "status": "gone"},
                     {"action": "delete", "queue": "no queue"},
                     {"action": "delete", "queue": PARKED, "limit": 5}, [1]):
            response = await admin.http.post("/v1/jobs/bulk", json=body)
            assert assert_json_error(response, 400, str(body)[:80]) == "bad_request"
        assert (await admin.job(job.id))["status"] == "queued"
        # /v1/jobs/bulk and /v1/jobs/counts are never read as a job id (a 400 "id ...").
        get_bulk = await admin.http.get("/v1/jobs/bulk")
        assert get_bulk.status_code == 405 and "POST" in get_bulk.headers["allow"]
        assert (await admin.http.delete("/v1/jobs/bulk")).status_code == 405
        assert (await admin.http.get("/v1/jobs/counts")).status_code != 400
        assert (await admin.http.delete("/v1/jobs/retry")).status_code == 405
        assert assert_json_error(await admin.http.delete("/v1/jobs/abc"), 400) == "bad_request"
