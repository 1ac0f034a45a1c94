"""The gateway's HTTP contract on one worker: tenant keys, the tenant from the key only,
Idempotency-Key replays and conflicts, batches, and bodies it refuses."""

from __future__ import annotations

from pathlib import Path

import httpx
import trio
import yaml

from gochatd.gateway.keys import hash_key
from gochatd.model import JobFilter
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

ADMIN_TOKEN = "adm1n-T0ken-for-gateway-tests"


async def _jobs(admin: Admin) -> list[dict[str, object]]:
    jobs = await admin.worker.store.list_jobs(JobFilter(limit=1000))
    return [j.to_dict() for j in jobs]


async def test_a_tenant_key_is_required(sqlite_stack: Stack) -> None:
    async with admin_worker(sqlite_stack, admin_token=ADMIN_TOKEN, **gateway_overrides()) as admin:
        wrong = [
            {},
            {"Authorization": "Bearer not-a-key"},
            {"Authorization": f"Bearer {KEY_A}x"},
            {"Authorization": f"Basic {KEY_A}"},
            {"Authorization": KEY_A},
            {"Authorization": "Bearer"},
            auth(ADMIN_TOKEN),  # the admin token is not a tenant key
        ]
        for headers in wrong:
            for path, body in (("/v1/jobs", job_body()), ("/v1/jobs:batch", {"jobs": [job_body()]})):
                response = await admin.http.post(path, json=body, headers=headers)
                assert assert_json_error(response, 401, f"{path} {headers}") == "unauthorized"
                assert response.headers["www-authenticate"].startswith("Bearer ")
        assert await _jobs(admin) == []
        # ...and a tenant key never opens the admin API.
        response = await admin.http.post("/v1/pause", headers=auth(KEY_A))
        assert assert_json_error(response, 403) == "tenant_key"
        status = await admin.get("/v1/status", headers=auth(ADMIN_TOKEN))
        assert status["paused"] is False
        # The right key works; the scheme is case-insensitive.
        created = await admin.post("/v1/jobs", 201, json=job_body(),
                                   headers={"Authorization": f"bearer {KEY_A}"})
        assert created["job"]["tenant_id"] == TENANT_A


async def test_the_tenant_comes_from_the_key(stack: Stack) -> None:
    async with admin_worker(stack, **gateway_overrides()) as admin:
        for tenant in (TENANT_B, TENANT_A, "default"):
            response = await admin.http.post(
                "/v1/jobs", json=job_body(tenant_id=tenant), headers=auth(KEY_A))
            assert assert_json_error(response, 400) == "bad_request"
            assert "tenant_id" in response.json()["error"]["message"]
        response = await admin.http.post(
            "/v1/jobs:batch", json={"jobs": [job_body(tenant_id=TENANT_B)]}, headers=auth(KEY_A))
        assert assert_json_error(response, 400) == "bad_request"
        assert await _jobs(admin) == []

        # One Idempotency-Key, two tenants: two jobs, each the key holder's own.
        key = {"Idempotency-Key": "im:message:42"}
        a = await admin.post("/v1/jobs", 201, json=job_body(), headers={**auth(KEY_A), **key})
        b = await admin.post("/v1/jobs", 201, json=job_body(payload={"other": True}),
                             headers={**auth(KEY_B), **key})
        assert a["job"]["id"] != b["job"]["id"]
        assert (a["job"]["tenant_id"], b["job"]["tenant_id"]) == (TENANT_A, TENANT_B)
        assert a["job"]["idempotency_key"] == b["job"]["idempotency_key"] == "im:message:42"
        stored = await admin.job(a["job"]["id"])
        assert (stored["tenant_id"], stored["queue"], stored["payload"]) == (
            TENANT_A, PARKED, {"n": 1})


async def test_a_duplicated_delivery_makes_one_job(stack: Stack) -> None:
    async with admin_worker(stack, **gateway_overrides()) as admin:
        headers = {**auth(KEY_A), "Idempotency-Key": "im:delivery:7"}
        body = job_body(payload={"message_id": 7, "text": "hi"})
        responses: list[httpx.Response] = []

        async def post() -> None:
            responses.append(await admin.http.post("/v1/jobs", json=body, headers=headers))

        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(post)
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200] * 9 + [201], [r.text for r in responses]
        assert {r.json()["job"]["id"] for r in responses} != set()
        assert len({r.json()["job"]["id"] for r in responses}) == 1
        for r in responses:
            replay = r.headers.get("idempotent-replay")
            assert replay == ("true" if r.status_code == 200 else None), r.headers
        assert len(await _jobs(admin)) == 1

        # The same payload with its keys in another order is the same job.
        reordered = job_body(payload={"text": "hi", "message_id": 7})
        replay = await admin.http.post("/v1/jobs", json=reordered, headers=headers)
        assert replay.status_code == 200 and replay.headers["idempotent-replay"] == "true"
        # A different body under the same key is a conflict, and writes nothing.
        for other in (job_body(payload={"message_id": 8}),
                      job_body(job_type="sys:sleep", payload={"message_id": 7, "text": "hi"})):
            response = await admin.http.post("/v1/jobs", json=other, headers=headers)
            assert assert_json_error(response, 409) == "idempotency_conflict"
        jobs = await _jobs(admin)
        assert len(jobs) == 1 and jobs[0]["payload"] == {"message_id": 7, "text": "hi"}


async def test_batches(stack: Stack) -> None:
    async with admin_worker(stack, **gateway_overrides()) as admin:
        held = await admin.post("/v1/jobs", 201, json=job_body(payload={"n": 0}),
                                headers={**auth(KEY_A), "Idempotency-Key": "k0"})
        batch = {"jobs": [
            job_body(payload={"n": 0}, idempotency_key="k0"),     # replay
            job_body(payload={"n": 99}, idempotency_key="k0"),    # conflict
            job_body(payload={"n": 1}, idempotency_key="k1", priority=5, max_attempts=3),
            job_body(payload={"n": 2}, delay_s=3600),
            {"job_type": "sys:noop", "queue": PARKED, "scheduled_at": "2030-01-01T00:00:00Z"},
            # RFC 3339 allows offsets PostgreSQL does not: stored in UTC.
            {"job_type": "sys:noop", "queue": PARKED, "scheduled_at": "2030-01-01T20:43:00+20:43"},
        ]}
        body = await admin.post("/v1/jobs:batch", 200, json=batch, headers=auth(KEY_A))
        results = body["results"]
        assert [r["outcome"] for r in results] == [
            "replayed", "conflict", "created", "created", "created", "created"]
        assert [r["status"] for r in results] == [200, 409, 201, 201, 201, 201]
        assert (body["created"], body["replayed"], body["conflicts"]) == (4, 1, 1)
        assert results[0]["job"]["id"] == held["job"]["id"]
        assert results[1]["error"]["code"] == "idempotency_conflict"
        assert {r["job"]["tenant_id"] for r in results if "job" in r} == {TENANT_A}
        assert (results[2]["job"]["priority"], results[2]["job"]["max_attempts"]) == (5, 3)
        assert results[4]["job"]["scheduled_at"].startswith("2030-01-01")
        assert results[5]["job"]["scheduled_at"].startswith("2030-01-01T00:00:00")
        assert len(await _jobs(admin)) == 5

        # All or nothing: one bad item refuses the whole batch, naming it.
        bad_batches = [
            ({"jobs": [job_body(), job_body(), job_body(queue="no spaces")]}, "jobs[2]"),
            ({"jobs": [job_body(), {"payload": {}}]}, "jobs[1]"),
            ({"jobs": [job_body(), job_body(surprise=1)]}, "jobs[1]"),
            ({"jobs": [job_body()] * 1001}, "at most 1000"),
            ({"jobs": []}, "jobs"),
            ({"jobs": job_body()}, "jobs"),
            ({"jobs": [job_body()], "extra": 1}, "extra"),
            ([job_body()], "object"),
        ]
        for bad, needle in bad_batches:
            response = await admin.http.post("/v1/jobs:batch", json=bad, headers=auth(KEY_A))
            assert assert_json_error(response, 400) == "bad_request"
            assert needle in response.json()["error"]["message"], response.text
        assert len(await _jobs(admin)) == 5


async def test_rate_limited_locally_without_redis(sqlite_stack: Stack) -> None:
    from gochatd.gateway.settings import TenantLimits

    overrides = gateway_overrides(**{TENANT_A: TenantLimits(rate_per_s=0.2, burst=3)})
    async with admin_worker(sqlite_stack, **overrides) as admin:
        statuses = []
        for n in range(5):
            response = await admin.http.post("/v1/jobs", json=job_body(payload={"n": n}),
                                             headers=auth(KEY_A))
            statuses.append(response.status_code)
            if response.status_code == 429:
                assert assert_json_error(response, 429) == "rate_limited"
                # 1 job every 5 s: the next one is admitted within 5 s, in whole seconds.
                assert response.headers["retry-after"] in {"4", "5"}, response.headers
        assert statuses == [201, 201, 201, 429, 429]
        # Another tenant has its own bucket; a batch larger than the burst is refused.
        await admin.post("/v1/jobs", 201, json=job_body(), headers=auth(KEY_B))
        response = await admin.http.post("/v1/jobs:batch", json={"jobs": [job_body()] * 4},
                                         headers=auth(KEY_A))
        assert assert_json_error(response, 400) == "over_burst"
        assert len(await _jobs(admin)) == 4
        metrics = (await admin.http.get("/metrics")).text
        assert 'gochatd_gateway_rate_limit_mode{mode="local"} 1.0' in metrics
        assert (f'gochatd_gateway_requests_total{{outcome="rate_limited",tenant="{TENANT_A}"}} 2.0'
                in metrics)
        assert KEY_A not in metrics and KEY_B not in metrics


async def test_a_separate_gateway_listener(sqlite_stack: Stack) -> None:
    overrides = {**gateway_overrides(), "gateway_listen": "127.0.0.1:0"}
    async with admin_worker(sqlite_stack, **overrides) as admin:
        address = admin.worker.gateway_address
        assert address is not None and address.startswith("http://127.0.0.1:"), address
        async with httpx.AsyncClient(base_url=address, timeout=10.0) as gateway:
            created = await gateway.post("/v1/jobs", json=job_body(), headers=auth(KEY_A))
            assert created.status_code == 201, created.text
            # Only the gateway is served there; the admin listener no longer takes jobs.
            for path in ("/v1/status", "/v1/queues", "/metrics", "/"):
                response = await gateway.get(path)
                assert assert_json_error(response, 404, path) == "not_found"
            response = await gateway.post("/v1/pause")
            assert response.status_code == 404
            response = await gateway.post("/v1/jobs", json=job_body(), headers=auth("nope"))
            assert assert_json_error(response, 401) == "unauthorized"
        response = await admin.http.post("/v1/jobs", json=job_body(), headers=auth(KEY_A))
        assert assert_json_error(response, 404) == "gateway_not_here"
        assert [j["id"] for j in await _jobs(admin)] == [created.json()["job"]["id"]]


async def test_keys_and_limits_reload_without_a_restart(
    sqlite_stack: Stack, tmp_path: Path
) -> None:
    config = tmp_path / "gochatd.yaml"
    config.write_text(yaml.safe_dump({"gateway": {"keys": {hash_key(KEY_A): TENANT_A}}}))
    overrides = {**gateway_overrides(), "gateway_keys": {hash_key(KEY_A): TENANT_A}}
    async with admin_worker(sqlite_stack, reload_args={"config_file": str(config)},
                            **overrides) as admin:
        await admin.post("/v1/jobs", 201, json=job_body(), headers=auth(KEY_A))
        assert (await admin.http.post("/v1/jobs", json=job_body(),
                                      headers=auth(KEY_B))).status_code == 401
        # Rotate: B in, A out, and B's tenant capped at one job in its bucket.
        config.write_text(yaml.safe_dump({
            "gateway": {"keys": {hash_key(KEY_B): TENANT_B}},
            "tenants": {TENANT_B: {"burst": 1, "rate_per_s": 0.01, "max_running": 3}}}))
        reloaded = await admin.post("/v1/reload")
        assert {"gateway.keys", "tenants"} <= set(reloaded["applied"])
        assert (await admin.http.post("/v1/jobs", json=job_body(),
                                      headers=auth(KEY_A))).status_code == 401
        await admin.post("/v1/jobs", 201, json=job_body(), headers=auth(KEY_B))
        limited = await admin.http.post("/v1/jobs", json=job_body(), headers=auth(KEY_B))
        assert assert_json_error(limited, 429) == "rate_limited"
        assert admin.worker.store.tenant_limits == {TENANT_B: 3}
        tenants = {t["tenant"]: t for t in (await admin.get("/v1/tenants"))["tenants"]}
        assert tenants[TENANT_B]["max_running"] == 3 and tenants[TENANT_B]["burst"] == 1


async def test_unique_jobs_through_the_gateway(stack: Stack) -> None:
    """docs/unique-jobs.md: a second POST of the same unique work returns the job that is
    still waiting (200, like a replay), even with another payload under an explicit key;
    concurrent POSTs make one job; a bad value is a 400 naming the field."""
    async with admin_worker(stack, **gateway_overrides()) as admin:
        first = await admin.post("/v1/jobs", 201, json=job_body(unique_for_s=600),
                                 headers=auth(KEY_A))
        again = await admin.http.post("/v1/jobs", json=job_body(unique_for_s=600),
                                      headers=auth(KEY_A))
        assert again.status_code == 200 and again.json()["job"]["id"] == first["job"]["id"]
        other_tenant = await admin.post("/v1/jobs", 201, json=job_body(unique_for_s=600),
                                        headers=auth(KEY_B))
        assert other_tenant["job"]["id"] != first["job"]["id"]
        responses: list[httpx.Response] = []

        async def post(n: int) -> None:
            body = job_body(payload={"n": n}, unique_key="nightly-report")
            responses.append(await admin.http.post("/v1/jobs", json=body, headers=auth(KEY_A)))

        async with trio.open_nursery() as nursery:
            for n in range(6):
                nursery.start_soon(post, n)
        assert sorted(r.status_code for r in responses) == [200] * 5 + [201]
        assert len({r.json()["job"]["id"] for r in responses}) == 1
        batch = await admin.post("/v1/jobs:batch", 200, headers=auth(KEY_A), json={"jobs": [
            job_body(unique_key="nightly-report"), job_body(payload={"n": 9}, unique_for_s=60)]})
        assert [r["outcome"] for r in batch["results"]] == ["replayed", "created"]
        for bad, field in ((job_body(unique_for_s=-1), "unique_for_s"),
                           (job_body(unique_for_s=10 ** 9), "unique_for_s"),
                           (job_body(unique_key="k" * 513), "unique_key")):
            response = await admin.http.post("/v1/jobs", json=bad, headers=auth(KEY_A))
            assert assert_json_error(response, 400) == "bad_request"
            assert response.json()["error"]["message"].startswith(field), response.text
        assert len(await _jobs(admin)) == 4
