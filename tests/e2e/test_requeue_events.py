"""An operator's retry of a finished job is a requeue inside the daemon (docs/architecture.md,
"Names"): ``POST /v1/jobs/{id}/retry`` logs ``job_requeued`` and the bulk ``POST
/v1/jobs/retry`` logs ``jobs_requeued``, never the runner's ``job_retry``."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.admin.helpers import daemon_admin_url
from tests.support.daemon_process import DaemonFactory, run_cli


def test_an_operators_retry_logs_a_requeue(tmp_path: Path, daemons: DaemonFactory) -> None:
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'requeue.db'}",
           "GOCHAT_ADMIN_LISTEN": "127.0.0.1:0", "GOCHAT_LOG_FORMAT": "json"}
    assert run_cli(["db", "upgrade"], env, cwd=tmp_path).returncode == 0
    daemon = daemons.start("requeue", env=env, cwd=tmp_path)
    admin = daemon_admin_url(daemon)
    ids = []
    for _ in range(2):
        enq = run_cli(["enqueue", "sys:fail", "--payload", '{"retryable": false}'], env,
                      cwd=tmp_path)
        assert enq.returncode == 0, enq.stderr
        ids.append(json.loads(enq.stdout)["id"])
    for job_id in ids:
        daemon.wait_for_event("job_dead", lambda e, j=job_id: e.get("job_id") == j)

    one = httpx.post(f"{admin}/v1/jobs/{ids[0]}/retry", timeout=10)
    assert one.status_code == 200 and one.json()["status"] == "queued", one.text
    assert daemon.wait_for_event("job_requeued")["job_id"] == ids[0]
    # The requeued job runs and dies again; then the bulk retry takes both.
    daemon.wait_for_event("job_dead", lambda e: e.get("job_id") == ids[0], count=2)
    bulk = httpx.post(f"{admin}/v1/jobs/retry", json={}, timeout=10)
    assert bulk.status_code == 200 and bulk.json()["retried"] == 2, bulk.text
    assert daemon.wait_for_event("jobs_requeued")["count"] == 2
    assert daemon.events("job_retry") == []  # the runner's retry is another operation

    assert daemon.stop() == 0
    daemon.assert_clean_output()
