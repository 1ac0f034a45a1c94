"""Auth: the bearer token guards every mutation (reads stay open), cross-site POSTs are
refused, a tokenless server answers loopback Host names only, and a daemon refuses to listen
beyond loopback without a token."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.admin.helpers import Stack, admin_worker, assert_json_error, daemon_admin_url
from tests.support.daemon_process import DaemonFactory, assert_clean, run_cli

TOKEN = "adm1n-T0ken-for-tests"
MUTATIONS = ("/v1/pause", "/v1/resume", "/v1/drain", "/v1/reload", "/v1/queues/default/pause",
             "/v1/queues/default/resume", "/v1/jobs/retry", "/v1/jobs/1/retry", "/v1/jobs/1/cancel",
             "/v1/outbox/1/retry")
READS = ("/healthz", "/readyz", "/metrics", "/v1/status", "/v1/queues", "/v1/jobs",
         "/v1/jobs/1", "/v1/outbox", "/v1/openapi.json", "/")
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


async def test_mutations_need_the_bearer_token(sqlite_stack: Stack) -> None:
    async with admin_worker(sqlite_stack, admin_token=TOKEN) as admin:
        job = await admin.worker.client.enqueue("sys:noop", {}, queue="parked")
        for headers in WRONG:
            for path in MUTATIONS:
                response = await admin.http.post(path, headers=headers)
                assert assert_json_error(response, 401, f"{path} {headers}") == "unauthorized"
                assert response.headers["www-authenticate"] == 'Bearer realm="gochatd"'
        # Nothing of the above took effect.
        status = await admin.status()
        assert (status["paused"], status["draining"], status["paused_queues"]) == (False, False, [])
        assert (await admin.job(job.id))["status"] == "queued"

        # Reads need no token.
        for path in READS:
            response = await admin.http.get(path)
            assert response.status_code == 200, (path, response.text)
        doc = await admin.get("/v1/openapi.json")
        assert doc["security"] == [{"bearer": []}]
        assert doc["paths"]["/v1/status"]["get"]["security"] == []

        good = {"Authorization": f"Bearer {TOKEN}"}
        assert (await admin.post("/v1/pause", headers=good))["paused"] is True
        # The scheme is case-insensitive (RFC 9110); the token is not.
        lower = {"Authorization": f"bearer {TOKEN}"}
        assert (await admin.post("/v1/resume", headers=lower))["paused"] is False
        cancelled = await admin.post(f"/v1/jobs/{job.id}/cancel", headers=good)
        assert cancelled["status"] == "cancelled"

        # A page on another site cannot drive the API, even with the token.
        for origin in ("https://evil.example", f"http://127.0.0.1:{admin.port + 1}", "null",
                       f"https://127.0.0.1:{admin.port}.evil.example"):
            refused = await admin.http.post("/v1/pause", headers={**good, "Origin": origin})
            assert assert_json_error(refused, 403, origin) == "cross_origin"
        assert (await admin.status())["paused"] is False
        same = await admin.http.post(
            "/v1/pause", headers={**good, "Origin": f"http://127.0.0.1:{admin.port}"})
        assert same.status_code == 200 and same.json()["paused"] is True
        # Reads with a foreign Origin are fine (nothing changes).
        read = await admin.http.get("/v1/status", headers={"Origin": "https://evil.example"})
        assert read.status_code == 200


async def test_without_a_token_only_loopback_host_names_are_served(
    sqlite_stack: Stack
) -> None:
    async with admin_worker(sqlite_stack) as admin:
        port = admin.port
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
        paused = http.post("/v1/pause", headers={"Authorization": f"Bearer {TOKEN}"})
        assert paused.status_code == 200 and paused.json()["paused"] is True
        # With a token, any Host name is served (the token is the guard).
        assert http.get("/v1/status", headers={"Host": "gochatd.internal"}).status_code == 200
    assert daemon.stop() == 0
    daemon.assert_clean_output()
    assert TOKEN not in daemon.log_text() + daemon.err_text()
