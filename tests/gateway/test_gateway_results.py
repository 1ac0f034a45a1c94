"""The gateway's ``GET /v1/jobs/<id>[?wait_s=]`` (docs/results.md): a tenant reads its own
job and result with its key, long-polls until the job is final, and never sees another
tenant's job; the admin API answers the same path with the attempts. On the admin listener
(SQLite, PostgreSQL + Redis) and on the gateway's own listener."""

from __future__ import annotations

from typing import Any

import httpx
import trio

import gochatd
from gochatd.context import JobContext
from gochatd.worker.registry import HandlerSpec, Registry
from tests.admin.helpers import Stack, admin_worker, assert_json_error
from tests.gateway.helpers import KEY_A, KEY_B, auth, gateway_overrides
from tests.integration.helpers import make_registry

ADMIN_TOKEN = "adm1n-T0ken-for-result-tests"


def _registry(release: trio.Event) -> Registry:
    async def slow(ctx: JobContext) -> dict[str, Any]:
        await release.wait()
        return {"rendered": ctx.payload.get("n")}

    async def refused(ctx: JobContext) -> None:
        raise gochatd.NonRetryable("cannot render")

    return make_registry(HandlerSpec("r:slow", slow), HandlerSpec("r:refused", refused))


async def _enqueue(http: httpx.AsyncClient, job_type: str, key: str = KEY_A) -> int:
    response = await http.post("/v1/jobs", json={"job_type": job_type, "payload": {"n": 7}},
                               headers=auth(key))
    assert response.status_code == 201, response.text
    return int(response.json()["job"]["id"])


async def _long_poll(http: httpx.AsyncClient, job_id: int, wait_s: float,
                     key: str = KEY_A) -> httpx.Response:
    return await http.get(f"/v1/jobs/{job_id}", params={"wait_s": wait_s}, headers=auth(key),
                          timeout=wait_s + 15)


def _required(doc: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    """The fields a schema of the document requires, through its $refs and allOf parts."""
    if "$ref" in schema:
        return _required(doc, doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]])
    fields = set(schema.get("required", []))
    for part in schema.get("allOf", []):
        fields |= _required(doc, part)
    return fields


async def test_a_tenant_long_polls_its_jobs_result(stack: Stack) -> None:
    release = trio.Event()
    async with admin_worker(stack, registry=_registry(release), admin_token=ADMIN_TOKEN,
                            **gateway_overrides()) as admin:
        http = admin.http
        job_id = await _enqueue(http, "r:slow")
        early = await _long_poll(http, job_id, 0.2)  # not final yet: the job as it is
        assert early.status_code == 200, early.text
        assert early.json()["status"] in ("queued", "running") and early.json()["result"] is None
        assert "attempt_history" not in early.json()

        answers: list[httpx.Response] = []

        async def poll() -> None:
            answers.append(await _long_poll(http, job_id, 30))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            release.set()
            started = trio.current_time()
        assert trio.current_time() - started < 10
        [done] = answers
        assert done.status_code == 200, done.text
        assert (done.json()["status"], done.json()["result"]) == ("completed", {"rendered": 7})

        # Another tenant's key: no such job. The admin token: the job with its attempts.
        other = await _long_poll(http, job_id, 1, key=KEY_B)
        assert assert_json_error(other, 404) == "not_found"
        operator = await http.get(f"/v1/jobs/{job_id}", headers=auth(ADMIN_TOKEN))
        assert operator.json()["result"] == {"rendered": 7}
        assert [a["outcome"] for a in operator.json()["attempt_history"]] == ["completed"]
        # Both answers are ones the OpenAPI document allows: the tenant's has no attempts.
        doc = (await http.get("/v1/openapi.json", headers=auth(ADMIN_TOKEN))).json()
        answer = doc["paths"]["/v1/jobs/{job_id}"]["get"]["responses"]["200"]["content"][
            "application/json"]["schema"]
        allowed = [_required(doc, alt) for alt in answer.get("anyOf", [answer])]
        assert any(fields <= set(done.json()) for fields in allowed), allowed
        assert any(fields <= set(operator.json()) and "attempt_history" in fields
                   for fields in allowed), allowed
        # A tenant key opens that read only, not the rest of the admin API.
        refused = await http.get("/v1/jobs", headers=auth(KEY_A))
        assert assert_json_error(refused, 403) == "tenant_key"
        for bad in ("abc", "-1", "61", "nan"):
            response = await http.get(f"/v1/jobs/{job_id}", params={"wait_s": bad},
                                      headers=auth(KEY_A))
            assert assert_json_error(response, 400, bad) == "bad_request"

        dead_id = await _enqueue(http, "r:refused")
        dead = await _long_poll(http, dead_id, 30)
        assert dead.status_code == 200, dead.text
        assert (dead.json()["status"], dead.json()["error_class"]) == ("dead", "non_retryable")


async def test_the_gateways_own_listener_serves_the_read(sqlite_stack: Stack) -> None:
    release = trio.Event()
    release.set()
    overrides = {**gateway_overrides(), "gateway_listen": "127.0.0.1:0"}
    async with admin_worker(sqlite_stack, registry=_registry(release), **overrides) as admin:
        address = admin.worker.gateway_address
        assert address is not None
        async with httpx.AsyncClient(base_url=address, timeout=30.0) as gateway:
            job_id = await _enqueue(gateway, "r:slow")
            done = await _long_poll(gateway, job_id, 20)
            assert (done.json()["status"], done.json()["result"]) == ("completed", {"rendered": 7})
            anonymous = await gateway.get(f"/v1/jobs/{job_id}")
            assert assert_json_error(anonymous, 401) == "unauthorized"
            other = await _long_poll(gateway, job_id, 0, key=KEY_B)
            assert assert_json_error(other, 404) == "not_found"
            typo = await gateway.get(f"/v1/jobs/{job_id}", params={"wiat_s": "5"},
                                     headers=auth(KEY_A))
            assert assert_json_error(typo, 400) == "bad_request"
            assert "wait_s" in typo.json()["error"]["message"]
        # The admin listener does not take tenant keys while the gateway is elsewhere.
        response = await admin.http.get(f"/v1/jobs/{job_id}", headers=auth(KEY_A))
        assert assert_json_error(response, 403) == "tenant_key"
