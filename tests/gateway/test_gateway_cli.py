"""The gateway from the command line: ``gochatd gateway hash-key``, config checks, and no
gateway in ``--worker-only`` daemons."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import httpx
import pytest
import trio
import yaml

from gochatd.config.settings import load_settings
from gochatd.errors import ConfigError, UserError
from gochatd.gateway.hash_key_cmd import run_hash_key
from gochatd.gateway.keys import hash_key
from tests.admin.helpers import daemon_admin_url
from tests.gateway.helpers import auth, job_body
from tests.support.daemon_process import GOCHATD, DaemonFactory, child_env, run_cli


def _hash_key(stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GOCHATD, "gateway", "hash-key", *args], input=stdin, env=child_env(),
                          capture_output=True, text=True, timeout=30, check=False)


def test_hash_key() -> None:
    done = _hash_key("", "--generate", "--tenant", "acme")
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(":", 1) for line in done.stdout.splitlines()[:2])
    key, digest = lines["key"].strip(), lines["hash"].strip()
    assert key.startswith("gck_") and len(key) > 40
    assert digest == hash_key(key)
    snippet = yaml.safe_load(done.stdout.split("\n", 2)[2])
    assert snippet == {"gateway": {"keys": {digest: "acme"}}}
    # A key from stdin: only its hash is printed, never the key.
    out = io.StringIO()
    assert run_hash_key(False, None, io.StringIO("my-existing-key\n"), out) == 0
    assert out.getvalue() == f"hash: {hash_key('my-existing-key')}\n"
    for stdin, generate, tenant in (("", False, None), ("two words\n", False, None),
                                    ("", True, "")):
        with pytest.raises(UserError):
            run_hash_key(generate, tenant, io.StringIO(stdin), io.StringIO())
    done = _hash_key("")
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.startswith("gochatd: ") and done.stderr.count("\n") == 1, done.stderr


def test_config_refuses_bad_gateway_settings(tmp_path: Path) -> None:
    token = "the-admin-token"
    bad = [
        ({"GOCHAT_GATEWAY_KEYS": '{"md5:abc": "t"}'}, "gateway.keys"),
        ({"GOCHAT_TENANTS": '{"t": {"max_running": 0}}'}, "max_running"),
        ({"GOCHAT_TENANTS": '{"t": {"rate": 5}}'}, "rate"),
        ({"GOCHAT_TENANTS": '[1, 2]'}, "tenants"),
        ({"GOCHAT_GATEWAY_LISTEN": "nowhere"}, "gateway.listen"),
        ({"GOCHAT_GATEWAY_BURST": "0"}, "gateway.burst"),
    ]
    for env, needle in bad:
        with pytest.raises(ConfigError, match=needle):
            load_settings(env=env)
    # The admin token's hash as a tenant key: refused by the command, one line, exit 2.
    env = {"GOCHAT_GATEWAY_KEYS": f'{{"{hash_key(token)}": "t"}}', "GOCHAT_ADMIN_TOKEN": token,
           "GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path}/x.db"}
    done = run_cli(["config", "check"], env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "admin.token" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert token not in done.stderr
    good = {"GOCHAT_TENANTS": '{"t": {"max_running": 3, "rate_per_s": 2.5}}',
            "GOCHAT_GATEWAY_KEYS": f"{hash_key('k')}=t",
            "GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path}/x.db"}
    done = run_cli(["config", "check"], good)
    assert done.returncode == 0, done.stderr
    assert '{"t": {"rate_per_s": 2.5, "max_running": 3}}' in done.stdout


async def test_no_gateway_with_worker_only(
    daemons: DaemonFactory, tmp_path: Path
) -> None:
    from tests.gateway.helpers import KEY_A, KEYS

    config = tmp_path / "gochatd.yaml"
    config.write_text(yaml.safe_dump({"gateway": {"keys": KEYS}}))
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path}/jobs.db", "GOCHAT_LOG_FORMAT": "json",
           "GOCHAT_CONFIG": str(config)}
    worker = await trio.to_thread.run_sync(
        lambda: daemons.start("worker-only", ["--worker-only"], env=env))
    full = await trio.to_thread.run_sync(lambda: daemons.start("default", [], env=env))
    async with httpx.AsyncClient(timeout=10.0) as http:
        response = await http.post(f"{daemon_admin_url(worker)}/v1/jobs", json=job_body(),
                                   headers=auth(KEY_A))
        # Not 405: the path exists (GET lists jobs), and the answer says why POST does not.
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "gateway_off", response.text
        assert "gateway is off" in response.json()["error"]["message"]
        response = await http.post(f"{daemon_admin_url(full)}/v1/jobs", json=job_body(),
                                   headers=auth(KEY_A))
        assert response.status_code == 201, response.text
