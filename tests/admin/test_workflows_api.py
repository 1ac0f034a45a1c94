"""The admin API's view of dependent jobs and batches (admin/workflows.py): a job's
``waits_on``, ``batch_id``, ``callback_of`` and ``depends_on`` in ``GET /v1/jobs/<id>``, and
``GET /v1/batches/<id>``, over real HTTP against a Worker run in-process, on SQLite (polling)
and on PostgreSQL + Redis Streams."""

from __future__ import annotations

from datetime import datetime

import gochatd
from tests.admin.helpers import PARKED, Stack, admin_worker, assert_json_error
from tests.gateway.helpers import KEY_A, TENANT_A, auth, gateway_overrides


async def test_a_batch_and_its_callbacks(stack: Stack) -> None:
    """One member completes, one dies: on_success is cancelled, on_complete runs; the batch
    counts both, and each job says where it stands in it."""
    async with admin_worker(stack) as admin:
        batch = await admin.worker.client.batch(
            [gochatd.NewJob("sys:noop", {"n": 1}),
             gochatd.NewJob("sys:fail", {"retryable": False})],
            on_success=gochatd.NewJob("sys:noop", {"on": "success"}),
            on_complete=gochatd.NewJob("sys:noop", {"on": "complete"}))
        ok, failed = (j.id for j in batch.jobs)
        assert batch.on_success is not None and batch.on_complete is not None
        on_success, on_complete = batch.on_success.id, batch.on_complete.id
        await admin.wait_job(on_complete, "completed")
        await admin.wait_job(on_success, "cancelled")

        body = await admin.get(f"/v1/batches/{batch.id}")
        assert datetime.fromisoformat(body.pop("created_at"))
        assert body == {
            "id": batch.id, "tenant_id": "default", "size": 2,
            "on_success_id": on_success, "on_complete_id": on_complete,
            "counts": {"completed": 1, "dead": 1}, "finished": 2, "done": True,
            "callbacks": [{"on": "on_success", "job_id": on_success, "status": "cancelled"},
                          {"on": "on_complete", "job_id": on_complete, "status": "completed"}]}

        member = await admin.job(ok)
        assert (member["waits_on"], member["batch_id"], member["callback_of"],
                member["depends_on"]) == (0, batch.id, None, [])
        callback = await admin.job(on_complete)
        assert (callback["waits_on"], callback["batch_id"], callback["callback_of"]) == (
            0, None, batch.id)
        # Statuses, not results: a callback may wait on 1,000 members.
        assert callback["depends_on"] == [
            {"job_id": ok, "status": "completed", "run_if_failed": True, "resolved": True},
            {"job_id": failed, "status": "dead", "run_if_failed": True, "resolved": True}]
        cancelled = await admin.job(on_success)
        assert cancelled["callback_of"] == batch.id
        assert cancelled["error_class"] == "dependency_failed"
        assert [d["run_if_failed"] for d in cancelled["depends_on"]] == [False, False]

        # A member deleted by an operator leaves the batch and its callbacks readable.
        assert (await admin.http.delete(f"/v1/jobs/{ok}")).status_code == 200
        assert (await admin.job(on_complete))["callback_of"] == batch.id
        assert (await admin.get(f"/v1/batches/{batch.id}"))["counts"] == {"dead": 1}


async def test_a_job_waiting_on_its_dependencies(stack: Stack) -> None:
    """Held while its dependency waits (due 9999-12-31, waits_on 1); cancelled with
    dependency_failed when the dependency is discarded; a job with no links says so."""
    async with admin_worker(stack) as admin:
        client = admin.worker.client
        parent = await client.enqueue("sys:noop", {}, queue=PARKED)
        child = await client.enqueue("sys:noop", {}, depends_on=[parent.id])
        held = await admin.job(child.id)
        assert held["status"] == "queued"
        assert datetime.fromisoformat(held["scheduled_at"]).year == 9999
        assert (held["waits_on"], held["batch_id"], held["callback_of"]) == (1, None, None)
        assert held["depends_on"] == [{"job_id": parent.id, "status": "queued",
                                       "run_if_failed": False, "resolved": False}]
        plain = await admin.job(parent.id)
        assert (plain["waits_on"], plain["batch_id"], plain["callback_of"],
                plain["depends_on"]) == (0, None, None, [])

        await admin.post(f"/v1/jobs/{parent.id}/discard")
        gone = await admin.job(child.id)
        assert (gone["status"], gone["error_class"], gone["waits_on"]) == (
            "cancelled", "dependency_failed", 0)
        assert gone["depends_on"] == [{"job_id": parent.id, "status": "dead",
                                       "run_if_failed": False, "resolved": True}]
        # A chain link's first dependency is in no batch: no callback_of.
        chain = await client.chain([gochatd.NewJob("sys:noop", {}, queue=PARKED),
                                    gochatd.NewJob("sys:noop", {})])
        link = await admin.job(chain[1].id)
        assert (link["waits_on"], link["callback_of"]) == (1, None)
        assert [d["job_id"] for d in link["depends_on"]] == [chain[0].id]


async def test_bad_batch_ids_and_the_tenant_read(sqlite_stack: Stack) -> None:
    async with admin_worker(sqlite_stack, **gateway_overrides()) as admin:
        for bad in ("0", "-1", "abc", "1.5", "9" * 30, "9223372036854775808"):
            response = await admin.http.get(f"/v1/batches/{bad}")
            assert assert_json_error(response, 400, bad) == "bad_request"
        missing = await admin.http.get("/v1/batches/987654321")
        assert assert_json_error(missing, 404) == "not_found"
        extra = await admin.http.get("/v1/batches/1", params={"wait_s": "1"})
        assert assert_json_error(extra, 400) == "bad_request"
        assert "this route takes: none" in extra.json()["error"]["message"]
        assert assert_json_error(await admin.http.post("/v1/batches/1"), 405) == (
            "method_not_allowed")

        # A tenant's key reads its own job as before (no links), and never a batch.
        batch = await admin.worker.client.batch(
            [gochatd.NewJob("sys:noop", {}, queue=PARKED, tenant_id=TENANT_A)])
        mine = await admin.job_as(batch.jobs[0].id, auth(KEY_A))
        assert mine["id"] == batch.jobs[0].id
        assert not {"waits_on", "batch_id", "depends_on", "attempt_history"} & set(mine)
        refused = await admin.http.get(f"/v1/batches/{batch.id}", headers=auth(KEY_A))
        assert assert_json_error(refused, 403) == "tenant_key"
        assert (await admin.get(f"/v1/batches/{batch.id}"))["counts"] == {"queued": 1}
