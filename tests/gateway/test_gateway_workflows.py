"""Dependent jobs, chains and batches through the gateway (docs/workflows.md,
docs/gateway.md): ``depends_on`` on ``POST /v1/jobs``, ``POST /v1/chains`` and
``POST /v1/batches``, as a tenant with its key; never another tenant's jobs. On SQLite and
on PostgreSQL + Redis (streams), with a worker running the jobs."""

from __future__ import annotations

from typing import Any

import httpx

from gochatd.context import JobContext
from gochatd.gateway.settings import TenantLimits
from gochatd.model import JobFilter, JobStatus
from gochatd.worker.registry import HandlerSpec, Registry
from gochatd.workflows.model import HELD_UNTIL
from tests.admin.helpers import Admin, Stack, admin_worker, assert_json_error
from tests.gateway.helpers import (
    KEY_A,
    KEY_B,
    PARKED,
    TENANT_A,
    TENANT_B,
    auth,
    gateway_overrides,
    job_body,
)
from tests.integration.helpers import make_registry, wait_for_status

TIMEOUT_S = 30.0
FAIL = {"job_type": "sys:fail", "payload": {"retryable": False}}


def _registry(seen: dict[int, list[tuple[int, str]]]) -> Registry:
    async def add(ctx: JobContext) -> dict[str, Any]:
        before = [d.result["n"] for d in await ctx.dependencies() if d.result]
        return {"n": int(ctx.payload["n"]) + sum(before)}

    async def callback(ctx: JobContext) -> int:
        deps = await ctx.dependencies()
        seen.setdefault(ctx.job_id, []).extend((d.job_id, d.status.value) for d in deps)
        return len(deps)

    return make_registry(HandlerSpec("w:add", add), HandlerSpec("w:callback", callback))


async def _post(admin: Admin | httpx.AsyncClient, path: str, body: Any, status: int,
                key: str = KEY_A, **headers: str) -> httpx.Response:
    http = admin.http if isinstance(admin, Admin) else admin
    response = await http.post(path, json=body, headers={**auth(key), **headers})
    assert response.status_code == status, f"{path}: {response.status_code} {response.text}"
    return response


async def _tenant_jobs(admin: Admin, tenant: str) -> list[int]:
    jobs = await admin.worker.store.list_jobs(JobFilter(tenant_id=tenant, limit=1000))
    return [j.id for j in jobs]


async def test_depends_on_waits_for_the_tenants_own_jobs(stack: Stack) -> None:
    async with admin_worker(stack, registry=_registry({}), **gateway_overrides()) as admin:
        store = admin.worker.store
        parent = (await _post(admin, "/v1/jobs", job_body(), 201)).json()["job"]["id"]
        body = {"job_type": "w:add", "payload": {"n": 1}, "depends_on": [parent, parent]}
        waiting = (await _post(admin, "/v1/jobs", body, 201)).json()["job"]
        assert (waiting["status"], waiting["tenant_id"]) == ("queued", TENANT_A)
        assert waiting["scheduled_at"].startswith(str(HELD_UNTIL.year))
        links = await store.job_links(waiting["id"])
        assert links is not None and links.waits_on == 1
        assert [d.job_id for d in links.dependencies] == [parent]

        # Another tenant's job is answered as a missing one, and nothing is written.
        other = await _post(admin, "/v1/jobs", {**body, "depends_on": [parent]}, 404, key=KEY_B)
        missing = await _post(admin, "/v1/jobs", {**body, "depends_on": [2**62]}, 404, key=KEY_B)
        assert assert_json_error(other, 404) == assert_json_error(missing, 404) == (
            "dependency_not_found")
        assert (other.json()["error"]["message"].replace(str(parent), "N")
                == missing.json()["error"]["message"].replace(str(2**62), "N"))
        assert await _tenant_jobs(admin, TENANT_B) == []

        # Idempotency-Key: the same job again is a replay, another one a conflict.
        key = {"Idempotency-Key": "wf-1"}
        first = (await _post(admin, "/v1/jobs", body, 201, **key)).json()["job"]
        again = await _post(admin, "/v1/jobs", body, 200, **key)
        assert again.json()["job"]["id"] == first["id"]
        assert again.headers["idempotent-replay"] == "true"
        changed = {**body, "payload": {"n": 2}}
        assert assert_json_error(await _post(admin, "/v1/jobs", changed, 409, **key),
                                 409) == "idempotency_conflict"

        # The parent ends cancelled: its dependents are cancelled, unless run_if_failed.
        anyway = {**body, "run_if_failed": True}
        runs = (await _post(admin, "/v1/jobs", anyway, 201)).json()["job"]["id"]
        await store.cancel_job(parent)
        cancelled = await wait_for_status(store, waiting["id"], JobStatus.CANCELLED,
                                          timeout_s=TIMEOUT_S)
        assert cancelled.error_class == "dependency_failed"
        done = await wait_for_status(store, runs, JobStatus.COMPLETED, timeout_s=TIMEOUT_S)
        assert done.result == {"n": 1}
        # A finished dependency counts at once: completed is met.
        due = (await _post(admin, "/v1/jobs", {**body, "depends_on": [runs]}, 201)).json()["job"]
        done = await wait_for_status(store, due["id"], JobStatus.COMPLETED, timeout_s=TIMEOUT_S)
        assert done.result == {"n": 2}


async def test_depends_on_refuses_what_a_waiting_job_cannot_take(sqlite_stack: Stack) -> None:
    async with admin_worker(sqlite_stack, **gateway_overrides()) as admin:
        parent = (await _post(admin, "/v1/jobs", job_body(), 201)).json()["job"]["id"]
        for fields, needle in (
            ({"depends_on": parent}, "depends_on"), ({"depends_on": [0]}, "depends_on"),
            ({"depends_on": [True]}, "depends_on"), ({"depends_on": ["1"]}, "depends_on"),
            ({"depends_on": [1.5]}, "depends_on"), ({"depends_on": [2**63]}, "depends_on"),
            ({"depends_on": [parent] * 1001}, "at most 1000"),
            ({"run_if_failed": "yes"}, "run_if_failed"),
            ({"depends_on": [parent], "delay_s": 5}, "delay_s"),
            ({"depends_on": [parent], "scheduled_at": "2030-01-01T00:00:00Z"}, "scheduled_at"),
            ({"depends_on": [parent], "unique_for_s": 60}, "unique"),
            ({"depends_on": [parent], "unique_key": "k"}, "unique"),
        ):
            response = await _post(admin, "/v1/jobs", job_body(**fields), 400)
            assert assert_json_error(response, 400) == "bad_request"
            assert needle in response.json()["error"]["message"], (fields, response.text)
        assert await _tenant_jobs(admin, TENANT_A) == [parent]
        # Null, an empty list and a float that is an integer are fine.
        for fields in ({"depends_on": None, "run_if_failed": None}, {"depends_on": [],
                       "delay_s": 5}, {"depends_on": [float(parent)], "run_if_failed": False}):
            await _post(admin, "/v1/jobs", job_body(**fields), 201)


async def test_a_chain_hands_each_result_on(stack: Stack) -> None:
    async with admin_worker(stack, registry=_registry({}), **gateway_overrides()) as admin:
        links = [{"job_type": "w:add", "payload": {"n": n}} for n in (1, 2, 3)]
        jobs = (await _post(admin, "/v1/chains", {"jobs": links}, 201)).json()["jobs"]
        assert [j["payload"]["n"] for j in jobs] == [1, 2, 3]
        assert {j["tenant_id"] for j in jobs} == {TENANT_A}
        store = admin.worker.store
        last = await wait_for_status(store, jobs[2]["id"], JobStatus.COMPLETED,
                                     timeout_s=TIMEOUT_S)
        assert last.result == {"n": 6}  # 1, then 2 + 1, then 3 + 3
        chain_links = await store.job_links(jobs[2]["id"])
        assert chain_links is not None
        assert [d.job_id for d in chain_links.dependencies] == [jobs[1]["id"]]

        # A link that ends dead cancels the rest of the chain.
        failing = (await _post(admin, "/v1/chains", {"jobs": [FAIL, *links]}, 201)).json()
        for job in failing["jobs"][1:]:
            await wait_for_status(store, job["id"], JobStatus.CANCELLED, timeout_s=TIMEOUT_S)


async def test_chains_and_batches_refuse_bad_bodies(sqlite_stack: Stack) -> None:
    async with admin_worker(sqlite_stack, **gateway_overrides()) as admin:
        one = job_body()
        for path, body, needle in (
            ("/v1/chains", {"jobs": []}, "jobs"), ("/v1/chains", {"jobs": one}, "jobs"),
            ("/v1/chains", [one], "JSON object"), ("/v1/chains", {"links": [one]}, "links"),
            ("/v1/chains", {"jobs": [one], "tenant_id": TENANT_B}, "tenant_id"),
            ("/v1/chains", {"jobs": [one, {**one, "tenant_id": TENANT_B}]}, "jobs[1]"),
            ("/v1/chains", {"jobs": [one, {**one, "delay_s": 1}]}, "jobs[1]: unknown fields"),
            ("/v1/chains", {"jobs": [{**one, "idempotency_key": "k"}]}, "idempotency_key"),
            ("/v1/chains", {"jobs": [{**one, "depends_on": [1]}]}, "depends_on"),
            ("/v1/chains", {"jobs": [one] * 1001}, "at most 1000"),
            ("/v1/batches", {"jobs": [one] * 999}, "at most 998"),
            ("/v1/batches", {"jobs": [one], "on_success": [one]}, "on_success"),
            ("/v1/batches", {"jobs": [one], "on_complete": {**one, "scheduled_at":
                                                           "2030-01-01T00:00:00Z"}},
             "on_complete: unknown fields: scheduled_at"),
            ("/v1/batches", {"jobs": [{**one, "job_type": "a b"}]}, "jobs[0]: job_type"),
            ("/v1/batches", {"on_success": one}, "jobs"),
            ("/v1/batches", {"jobs": [{**one, "unique_for_s": 60}]}, "jobs[0]: unknown fields"),
        ):
            response = await _post(admin, path, body, 400)
            assert assert_json_error(response, 400) == "bad_request"
            assert needle in response.json()["error"]["message"], (path, body, response.text)
        refused = await _post(admin, "/v1/batches", {"jobs": [one]}, 400,
                              **{"Idempotency-Key": "b-1"})
        assert "Idempotency-Key" in refused.json()["error"]["message"]
        anonymous = await admin.http.post("/v1/batches", json={"jobs": [one]})
        assert assert_json_error(anonymous, 401) == "unauthorized"
        assert await _tenant_jobs(admin, TENANT_A) == []


async def test_a_batch_runs_its_callbacks_once(stack: Stack) -> None:
    seen: dict[int, list[tuple[int, str]]] = {}
    async with admin_worker(stack, registry=_registry(seen), **gateway_overrides()) as admin:
        callback = {"job_type": "w:callback", "payload": {}}
        members = [{"job_type": "sys:noop", "payload": {"n": n}} for n in range(3)]
        body = {"jobs": [*members, FAIL], "on_success": callback, "on_complete": callback}
        batch = (await _post(admin, "/v1/batches", body, 201)).json()
        assert len(batch["jobs"]) == 4 and isinstance(batch["batch_id"], int)
        ids = [j["id"] for j in batch["jobs"]]
        store = admin.worker.store
        complete = await wait_for_status(store, batch["on_complete"]["id"], JobStatus.COMPLETED,
                                         timeout_s=TIMEOUT_S)
        assert complete.result == 4
        success = await wait_for_status(store, batch["on_success"]["id"], JobStatus.CANCELLED,
                                        timeout_s=TIMEOUT_S)
        assert success.error_class == "dependency_failed"
        assert sorted(seen) == [complete.id]
        assert sorted(seen[complete.id]) == sorted(
            [(i, "completed") for i in ids[:3]] + [(ids[3], "dead")])
        progress = await store.get_batch(batch["batch_id"])
        assert progress is not None and progress.tenant_id == TENANT_A
        assert (progress.size, progress.counts) == (4, {"completed": 3, "dead": 1})
        assert (progress.on_success_id, progress.on_complete_id) == (success.id, complete.id)

        # No callbacks: null in the answer; every member completed.
        plain = (await _post(admin, "/v1/batches", {"jobs": members, "on_success": None},
                             201)).json()
        assert (plain["on_success"], plain["on_complete"]) == (None, None)
        for job in plain["jobs"]:
            await wait_for_status(store, job["id"], JobStatus.COMPLETED, timeout_s=TIMEOUT_S)


async def test_workflows_are_rate_limited_and_served_where_the_gateway_is(
        sqlite_stack: Stack) -> None:
    limits = gateway_overrides(**{TENANT_A: TenantLimits(rate_per_s=0.01, burst=3)})
    async with admin_worker(sqlite_stack, **limits) as admin:
        parked = job_body()
        over = await _post(admin, "/v1/batches", {"jobs": [parked] * 2, "on_success": parked,
                                                  "on_complete": parked}, 400)
        assert assert_json_error(over, 400) == "over_burst"
        await _post(admin, "/v1/chains", {"jobs": [parked] * 3}, 201)
        for path, body in (("/v1/chains", {"jobs": [parked]}), ("/v1/batches", {"jobs": [parked]}),
                           ("/v1/jobs", {**parked, "depends_on": [1]})):
            limited = await _post(admin, path, body, 429)
            assert assert_json_error(limited, 429) == "rate_limited"
            assert int(limited.headers["retry-after"]) >= 1
        assert len(await _tenant_jobs(admin, TENANT_A)) == 3
        metrics = (await admin.http.get("/metrics")).text
        assert (f'gochatd_gateway_requests_total{{outcome="created",tenant="{TENANT_A}"}} 3.0'
                in metrics)

    overrides = {**gateway_overrides(), "gateway_listen": "127.0.0.1:0"}
    async with admin_worker(sqlite_stack, **overrides) as admin:
        before = len(await _tenant_jobs(admin, TENANT_A))
        elsewhere = await admin.http.post("/v1/batches", json={"jobs": [parked]},
                                          headers=auth(KEY_A))
        assert assert_json_error(elsewhere, 404) == "gateway_not_here"
        address = admin.worker.gateway_address
        assert address is not None
        async with httpx.AsyncClient(base_url=address, timeout=15.0) as gateway:
            chain = (await _post(gateway, "/v1/chains", {"jobs": [parked] * 2}, 201)).json()
            batch = (await _post(gateway, "/v1/batches", {"jobs": [parked],
                                                          "on_complete": parked}, 201)).json()
            assert batch["on_complete"]["queue"] == PARKED
            body = {**parked, "depends_on": [chain["jobs"][1]["id"]]}
            await _post(gateway, "/v1/jobs", body, 201)
            assert len(await _tenant_jobs(admin, TENANT_A)) == before + 5
