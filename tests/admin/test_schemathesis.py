"""The OpenAPI document fuzzed with schemathesis against a live daemon process: no 5xx,
every response matches its schema, every status code and content type is documented,
schema-valid requests are accepted and schema-violating ones refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import trio

from gochatd.client.client import Client
from gochatd.gateway.keys import hash_key
from gochatd.model import JobFilter
from gochatd.new_job import NewJob
from tests.admin.helpers import PARKED, Stack, daemon_admin_url
from tests.support.daemon_process import DaemonFactory, child_env, poll_until
from tests.support.e2e_jobs import enqueue_many, jobs, reset_executions

TOKEN = "fuzz-T0ken-4d1b"
#: The gateway's operations take a tenant API key instead of the admin token.
TENANT_KEY = "gck_fuzz-tenant-key-9c2e"
ST = str(Path(sys.executable).parent / "schemathesis")
EXAMPLES = 25

CONFIG = """
# POST /v1/drain?exit=true would end the daemon under test: drain, but stay up.
[[operations]]
include-name = "POST /v1/drain"
parameters = {{ "query.exit" = "false" }}

# Not ready (drained by a fuzzed POST /v1/drain) is a documented 503, not a server fault.
[[operations]]
include-name = "GET /readyz"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]

# A long poll holds its request up to wait_s (60 s at most, past the fuzzer's 10 s timeout):
# fuzzed at 0, answered at once. Its waits and bad values: tests/gateway/test_gateway_results.py.
[[operations]]
include-name = "GET /v1/jobs/{{job_id}}"
parameters = {{ "query.wait_s" = "0" }}

# The gateway's POSTs authenticate a tenant (its key), not the admin.
[[operations]]
include-name-regex = "^POST /v1/(jobs(:batch)?|chains|batches)$"
headers = {{ Authorization = "Bearer {tenant_key}" }}

# Ids and queue names that exist, so the fuzzer reaches real records too.
[dictionaries.job_ids]
values = {job_ids}

[dictionaries.batch_ids]
values = {batch_ids}

[dictionaries.queues]
values = ["default", "high", "{parked}"]

[parameters]
"path.job_id" = {{ dictionary = "job_ids", probability = 0.5 }}
"path.queue" = {{ dictionary = "queues", probability = 0.5 }}
"path.batch_id" = {{ dictionary = "batch_ids", probability = 0.5 }}
"""


def test_schemathesis_finds_no_5xx_and_no_schema_mismatch(
    tmp_path: Path, daemons: DaemonFactory, stack: Stack
) -> None:
    db_url = stack.database_url
    env = {"GOCHAT_DATABASE_URL": db_url, "GOCHAT_REDIS_URL": stack.redis_url,
           "GOCHAT_LOG_FORMAT": "json",
           "GOCHAT_ADMIN_TOKEN": TOKEN, "GOCHAT_HANDLERS": "tests.support.recording_handlers",
           "GOCHAT_WORKER_SHUTDOWN_GRACE_S": "0.5",
           "GOCHAT_GATEWAY_KEYS": f"{hash_key(TENANT_KEY)}=fuzzed"}
    daemon = daemons.start("fuzzed", env=env, cwd=tmp_path)
    base = daemon_admin_url(daemon)
    reset_executions(db_url)
    # Records in every state: completed, dead, running, queued (a queue nobody reads).
    ids = enqueue_many(db_url, "sys:noop", [{"n": n} for n in range(3)], stack.redis_url)
    ids += enqueue_many(db_url, "sys:fail", [{"retryable": False}] * 3, stack.redis_url)
    ids += enqueue_many(db_url, "test:block", [{}] * 2, stack.redis_url)
    poll_until(lambda: sum(j.status in {"completed", "dead", "running"}
                           for j in jobs(db_url).values()) == len(ids),
               timeout_s=20, what="seed jobs settled")

    async def parked() -> tuple[list[int], int, list[int]]:
        async with Client(db_url, stack.redis_url or None) as client:
            held = [(await client.enqueue("sys:noop", {}, queue=PARKED)).id for _ in range(3)]
            # A finished batch (one member dead: on_success cancelled, on_complete run), so
            # job answers carry links and a batch id is known. Its edges are all resolved:
            # a DELETE of a job still waited for leaves its dependent an open edge to no row,
            # which job_links cannot read yet (no status to give it).
            batch = await client.batch([NewJob("sys:noop", {}),
                                        NewJob("sys:fail", {"retryable": False})],
                                       on_success=NewJob("sys:noop", {}),
                                       on_complete=NewJob("sys:noop", {}))
            assert batch.on_success is not None and batch.on_complete is not None
            return held, batch.id, [*(j.id for j in batch.jobs), batch.on_success.id,
                                    batch.on_complete.id]

    held_ids, batch_id, batch_ids = trio.run(parked)
    poll_until(lambda: {jobs(db_url)[i].status for i in batch_ids[2:]} == {"cancelled",
                                                                           "completed"},
               timeout_s=20, what="the seed batch's callbacks final")
    ids += held_ids + batch_ids
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG.format(job_ids=json.dumps(ids), batch_ids=json.dumps([batch_id]),
                                    parked=PARKED,
                                    tenant_key=TENANT_KEY), encoding="utf-8")
    report = tmp_path / "st-report.json"

    result = subprocess.run(
        [ST, "--config-file", str(config), "run", f"{base}/v1/openapi.json",
         "--header", f"Authorization: Bearer {TOKEN}",
         "--checks", "all", "--max-examples", str(EXAMPLES), "--workers", "1",
         "--request-timeout", "10", "--no-color",
         "--report", "json", "--report-json-path", str(report),
         "--report-dir", str(tmp_path / "st-reports")],
        cwd=tmp_path, env=child_env(), capture_output=True, text=True, timeout=360, check=False,
        stdin=subprocess.DEVNULL,
    )
    output = result.stdout + result.stderr
    assert report.exists(), output[-6000:]
    summary = json.loads(report.read_text(encoding="utf-8"))
    figures = {
        "operations": summary["operations"]["tested"],
        "generated": summary["test_cases"]["generated"],
        "failures": summary["failures"],
        "errors": summary["errors"],
        "seed": summary["seed"],
    }
    print(f"\n[schemathesis] {stack.name}: {figures}")
    assert summary["failures"] == [], output[-8000:]
    assert summary["errors"] == [], output[-8000:]
    assert result.returncode == 0, output[-8000:]
    # Every operation was reached with working credentials (the admin token, or for the
    # gateway's the tenant key), not just refused.
    assert "Authentication failed" not in output, output[-8000:]
    # Every documented operation but GET /v1/openapi.json, the document itself, which
    # schemathesis leaves out.
    document = httpx.get(f"{base}/v1/openapi.json", timeout=10.0,
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()
    operations = sum(len(ops) for ops in document["paths"].values()) - 1
    assert "post" in document["paths"]["/v1/jobs"] and "/v1/jobs:batch" in document["paths"]
    assert summary["operations"]["tested"] == summary["operations"]["total"] == operations
    assert summary["test_cases"]["generated"] >= operations * 10

    # The gateway took the fuzzer's schema-valid jobs with the tenant key, as that tenant's.
    async def fuzzed_jobs() -> list[str]:
        async with Client(db_url) as client:
            return [j.tenant_id for j in await client.list_jobs(
                JobFilter(tenant_id="fuzzed", limit=10))]

    assert trio.run(fuzzed_jobs) != []

    # The daemon logged no request failure, and still answers.
    assert not daemon.events("admin_request_failed")
    with httpx.Client(base_url=base, timeout=10.0) as http:
        assert http.get("/healthz").status_code == 200
    assert daemon.stop() == 0
    daemon.assert_clean_output()
