"""Auth: with a token, every admin route needs it (reads included) but the probes and the
dashboard's static page; a tenant's gateway key never opens an admin route; cross-site POSTs
are refused; a tokenless server answers loopback Host names only, and a daemon refuses to
listen beyond loopback without a token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.admin.helpers import Stack, admin_worker, assert_json_error, daemon_admin_url
from tests.gateway.helpers import KEY_A, gateway_overrides
from tests.support.daemon_process import DaemonFactory, assert_clean, run_cli

TOKEN = "adm1n-T0ken-for-tests"
GOOD = {"Authorization": f"Bearer {TOKEN}"}
#: Served without the token: a load balancer's probes, the dashboard's static page and
#: whether a token is required.
OPEN = {("get", "/healthz"), ("get", "/readyz"), ("get", "/"), ("get", "/v1/auth")}
WRONG: tuple[dict[str, str], ...] = (
    {},
    {"Authorization": "Bearer wrong-token"},
    {"Authorization": f"Bearer {TOKEN}x"},
    {"Authorization": f"Bearer {TOKEN[:-1]}"},
    {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": TOKEN},
    {"Authorization": "Bearer"},
    {"Authorization": f"Bearer {TOKEN} {TOKEN}"},
    {"X-Admin-Token": TOKEN},
)


def _operations(doc: dict[str, Any], values: dict[str, str]) -> list[tuple[str, str, bool]]:
    """Every (method, concrete path, open) of the OpenAPI document, path parameters filled in:
    a route added later is walked without anyone listing it here."""
    ops = []
    for template, item in doc["paths"].items():
        path = template
        for name, value in values.items():
            path = path.replace("{" + name + "}", value)
        assert "{" not in path, f"no test value for a parameter of {template}"
        for method, op in item.items():
            if op.get("security") and op["security"] != [{"bearer": []}]:
                continue  # the gateway's tenant-key operations (tests/gateway)
            ops.append((method, path, op.get("security") == []))
    return ops


async def test_every_admin_route_needs_the_token_and_no_tenant_key_opens_one(
    sqlite_stack: Stack
) -> None:
    async with admin_worker(sqlite_stack, admin_token=TOKEN, **gateway_overrides()) as admin:
        job = await admin.worker.client.enqueue("sys:noop", {}, queue="parked")
        doc = (await admin.http.get("/v1/openapi.json", headers=GOOD)).json()
        assert doc["security"] == [{"bearer": []}]
        ops = _operations(doc, {"job_id": str(job.id), "queue": "default", "message_id": "1",
                                 "batch_id": "1",
                                 "daemon_id": "w1"})
        assert {(m, p) for m, p, is_open in ops if is_open} == OPEN
        assert len(ops) >= 20, ops
        for method, path, is_open in ops:
            for headers in WRONG:
                response = await admin.http.request(method.upper(), path, headers=headers)
                if is_open:
                    assert response.status_code in (200, 503), (method, path, response.text)
                    continue
                what = f"{method} {path} {headers}"
                assert assert_json_error(response, 401, what) == "unauthorized"
                assert response.headers["www-authenticate"] == 'Bearer realm="gochatd"'
            # A tenant's key is refused on every admin route, open or not, but the read of
            # one of its own jobs (docs/results.md): this job is another tenant's, so 404.
            tenant = await admin.http.request(method.upper(), path,
                                              headers={"Authorization": f"Bearer {KEY_A}"})
            refusal = "not_found" if (method, path) == ("get", f"/v1/jobs/{job.id}") else "tenant_key"
            status = 404 if refusal == "not_found" else 403
            assert assert_json_error(tenant, status, f"{method} {path}") == refusal
            if method == "get":
                with_token = await admin.http.get(path, headers=GOOD)  # past auth: 200 or 404
                assert with_token.status_code in (200, 404), (path, with_token.text)
        # The one answer without the token says only that a token is required.
        assert (await admin.http.get("/v1/auth")).json() == {"token_required": True}
        # Nothing of the above took effect: the job was neither cancelled nor retried.
        assert (await admin.job_as(job.id, GOOD))["status"] == "queued"
        status = (await admin.http.get("/v1/status", headers=GOOD)).json()
        assert (status["paused"], status["draining"], status["paused_queues"]) == (False, False, [])
        # The gateway on the shared listener still takes the tenant's key.
        created = await admin.http.post("/v1/jobs", headers={"Authorization": f"Bearer {KEY_A}"},
                                        json={"job_type": "sys:noop", "queue": "parked"})
        assert created.status_code == 201, created.text


async def test_mutations_with_the_token_and_cross_site_requests(sqlite_stack: Stack) -> None:
    async with admin_worker(sqlite_stack, admin_token=TOKEN) as admin:
        job = await admin.worker.client.enqueue("sys:noop", {}, queue="parked")
        assert (await admin.post("/v1/pause", headers=GOOD))["paused"] is True
        # The scheme is case-insensitive (RFC 9110); the token is not.
        lower = {"Authorization": f"bearer {TOKEN}"}
        assert (await admin.post("/v1/resume", headers=lower))["paused"] is False
        cancelled = await admin.post(f"/v1/jobs/{job.id}/cancel", headers=GOOD)
        assert cancelled["status"] == "cancelled"

        # A page on another site cannot drive the API, even with the token.
        for origin in ("https://evil.example", f"http://127.0.0.1:{admin.port + 1}", "null",
                       f"https://127.0.0.1:{admin.port}.evil.example"):
            refused = await admin.http.post("/v1/pause", headers={**GOOD, "Origin": origin})
            assert assert_json_error(refused, 403, origin) == "cross_origin"
        assert (await admin.get("/v1/status", headers=GOOD))["paused"] is False
        same = await admin.http.post(
            "/v1/pause", headers={**GOOD, "Origin": f"http://127.0.0.1:{admin.port}"})
        assert same.status_code == 200 and same.json()["paused"] is True
        # Reads with a foreign Origin and the token are fine (nothing changes).
        read = await admin.http.get("/v1/status", headers={**GOOD, "Origin": "https://evil.example"})
        assert read.status_code == 200


async def test_without_a_token_only_loopback_host_names_are_served(
    sqlite_stack: Stack
) -> None:
    async with admin_worker(sqlite_stack) as admin:
        port = admin.port
        assert (await admin.get("/v1/auth")) == {"token_required": False}
        assert (await admin.post("/v1/pause"))["paused"] is True  # loopback, no token: allowed
        # DNS rebinding: a browser sends the attacker's name as Host.
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.nip.io:{port}",
                     f"localhost.evil.example:{port}", "10.1.2.3", f"[2001:db8::1]:{port}"):
            for method, path in (("GET", "/v1/jobs"), ("GET", "/"), ("POST", "/v1/resume")):
                response = await admin.http.request(method, path, headers={"Host": host})
                assert assert_json_error(response, 403, f"{method} {path} Host={host}") \
                    == "host_not_allowed"
        assert (await admin.status())["paused"] is True
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}",
                     "127.9.8.7", f"LOCALHOST:{port}"):
            response = await admin.http.get("/v1/status", headers={"Host": host})
            assert response.status_code == 200, (host, response.text)
        resumed = await admin.http.post("/v1/resume", headers={"Host": f"localhost:{port}"})
        assert resumed.status_code == 200 and resumed.json()["paused"] is False
        cross = await admin.http.post("/v1/pause", headers={"Origin": "http://evil.example"})
        assert assert_json_error(cross, 403) == "cross_origin"


def test_non_loopback_listen_without_a_token_is_refused(tmp_path: Path) -> None:
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'gochatd.db'}",
           "GOCHAT_ADMIN_LISTEN": "0.0.0.0:0"}
    result = run_cli([], env, cwd=tmp_path, timeout_s=30)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gochatd: admin.listen '0.0.0.0:0' is not a loopback address")
    assert "GOCHAT_ADMIN_TOKEN" in lines[0]
    assert_clean(result.stdout + result.stderr)
    # The flag is checked the same way.
    flag = run_cli(["--admin-listen", "0.0.0.0:0"], {"GOCHAT_DATABASE_URL": env["GOCHAT_DATABASE_URL"]},
                   cwd=tmp_path, timeout_s=30)
    assert flag.returncode == 2 and len(flag.stderr.splitlines()) == 1, flag.stderr


def test_non_loopback_listen_with_a_token_starts(tmp_path: Path, daemons: DaemonFactory) -> None:
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'gochatd.db'}",
           "GOCHAT_ADMIN_LISTEN": "0.0.0.0:0", "GOCHAT_ADMIN_TOKEN": TOKEN,
           "GOCHAT_LOG_FORMAT": "json"}
    daemon = daemons.start("exposed", env=env, cwd=tmp_path)
    assert daemon.wait_for_event("admin_listening")["address"].startswith("http://0.0.0.0:")
    base = daemon_admin_url(daemon)
    with httpx.Client(base_url=base, timeout=10.0) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert assert_json_error(http.post("/v1/pause"), 401) == "unauthorized"
        assert assert_json_error(http.get("/v1/jobs"), 401) == "unauthorized"
        assert assert_json_error(http.get("/metrics"), 401) == "unauthorized"
        paused = http.post("/v1/pause", headers={"Authorization": f"Bearer {TOKEN}"})
        assert paused.status_code == 200 and paused.json()["paused"] is True
        # With a token, any Host name is served (the token is the guard).
        assert http.get("/v1/status", headers={"Host": "gochatd.internal",
                                               "Authorization": f"Bearer {TOKEN}"}
                        ).status_code == 200
    assert daemon.stop() == 0
    daemon.assert_clean_output()
    assert TOKEN not in daemon.log_text() + daemon.err_text()
