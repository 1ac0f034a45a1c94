"""Job controls from the command line and the admin API against daemon processes: each
control prints its result on stdout and logs one ``job_control`` audit line (who, what,
when; never the payload), and run now makes a delayed job start at once on a daemon that
streams through Redis and on one that polls (woken by the database)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.admin.helpers import daemon_admin_url
from tests.support.daemon_process import DaemonFactory, assert_clean, run_cli

SECRET = "s3cr3t-in-the-payload"


def _audit(stderr: str) -> list[dict[str, object]]:
    return [e for e in map(json.loads, stderr.splitlines()) if e.get("event") == "job_control"]


def _enqueue(env: dict[str, str], cwd: Path, *extra: str) -> int:
    done = run_cli(["enqueue", "sys:noop", "--payload", json.dumps({"secret": SECRET}), *extra],
                   env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return int(json.loads(done.stdout)["id"])


def test_cli_controls_print_their_result_and_audit_who_did_what(tmp_path: Path) -> None:
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'controls.db'}"}
    assert run_cli(["db", "upgrade"], env, cwd=tmp_path).returncode == 0
    first, second, third = (_enqueue(env, tmp_path, "--delay", "3600") for _ in range(3))

    now = run_cli(["jobs", "run-now", str(first)], env, cwd=tmp_path)
    assert now.returncode == 0, now.stderr
    assert json.loads(now.stdout)["status"] == "queued"
    (line,) = _audit(now.stderr)
    assert (line["action"], line["job_id"], line["outcome"], line["changed"]) == (
        "run_now", first, "changed", 1)
    assert str(line["actor"]).startswith("cli ") and "@" in str(line["actor"])
    assert line["at"] and line["level"] == "info"

    discarded = run_cli(["jobs", "discard", str(second)], env, cwd=tmp_path)
    assert discarded.returncode == 0, discarded.stderr
    assert json.loads(discarded.stdout)["error_class"] == "discarded"
    deleted = run_cli(["jobs", "delete", str(second)], env, cwd=tmp_path)
    assert (deleted.returncode, json.loads(deleted.stdout)) == (0, {"id": second, "deleted": True})

    bulk = run_cli(["jobs", "bulk", "run-now", "--ids", f"{first},{third}", "--queue", "default"],
                   env, cwd=tmp_path)
    assert bulk.returncode == 0, bulk.stderr
    assert json.loads(bulk.stdout) == {"action": "run_now", "matched": 2, "changed": 1}
    (line,) = _audit(bulk.stderr)
    assert line["ids"] == [first, third] and line["filter"] == {"queue": "default"}
    assert (line["matched"], line["changed"]) == (2, 1)

    gone = run_cli(["jobs", "bulk", "delete", "--status", "queued"], env, cwd=tmp_path)
    assert json.loads(gone.stdout) == {"action": "delete", "matched": 2, "changed": 2}
    for result in (now, discarded, deleted, bulk, gone):
        assert SECRET not in result.stderr
        assert_clean(result.stderr, "stderr")

    # A refusal is the one-line error of any bad input (and changes nothing).
    kept = _enqueue(env, tmp_path)
    run_cli(["jobs", "discard", str(kept)], env, cwd=tmp_path)
    again = run_cli(["jobs", "discard", str(kept)], env, cwd=tmp_path)
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.splitlines() == [
        f"gochatd: cannot discard job {kept}: it is dead, not queued or retrying"]


@pytest.mark.parametrize("stack", ["postgres+redis", "postgres", "sqlite"])
def test_run_now_starts_a_delayed_job_at_once(
    tmp_path: Path, daemons: DaemonFactory, request: pytest.FixtureRequest, stack: str
) -> None:
    """Streams (the scheduler XADDs it), polling woken by NOTIFY, polling woken by SQLite's
    data version."""
    env = {"GOCHAT_LOG_FORMAT": "json", "GOCHAT_ADMIN_LISTEN": "127.0.0.1:0",
           "GOCHAT_ADMIN_TOKEN": "t0ken-never-logged"}
    if stack == "sqlite":
        env["GOCHAT_DATABASE_URL"] = f"sqlite:///{tmp_path / 'controls.db'}"
        assert run_cli(["db", "upgrade"], env, cwd=tmp_path).returncode == 0
    else:
        env["GOCHAT_DATABASE_URL"] = request.getfixturevalue("pg_clean")
    if stack == "postgres+redis":
        env["GOCHAT_REDIS_URL"] = request.getfixturevalue("redis_url")
    mode = "streams" if stack == "postgres+redis" else "polling"
    daemon = daemons.start(f"controls-{mode}", env=env, cwd=tmp_path, mode=mode)
    by_cli, by_admin = (_enqueue(env, tmp_path, "--delay", "3600") for _ in range(2))

    # From another process (the command line): the database wakes the daemon.
    now = run_cli(["jobs", "run-now", str(by_cli)], env, cwd=tmp_path)
    assert now.returncode == 0, now.stderr
    asked = time.monotonic()
    daemon.wait_for_event("job_completed", lambda e: e.get("job_id") == by_cli, timeout_s=10)
    assert time.monotonic() - asked < 5.0

    # Through the admin API: its own daemon takes it at once, and logs who asked.
    admin = daemon_admin_url(daemon)
    headers = {"Authorization": "Bearer t0ken-never-logged"}
    asked = time.monotonic()
    response = httpx.post(f"{admin}/v1/jobs/{by_admin}/run-now", headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    daemon.wait_for_event("job_completed", lambda e: e.get("job_id") == by_admin, timeout_s=10)
    assert time.monotonic() - asked < 5.0
    line = daemon.wait_for_event("job_control", lambda e: e.get("job_id") == by_admin)
    assert (line["action"], line["actor"], line["outcome"]) == ("run_now", "admin 127.0.0.1",
                                                                 "changed")
    bulk = httpx.post(f"{admin}/v1/jobs/bulk", headers=headers, timeout=10,
                      json={"action": "delete", "status": "completed"})
    assert bulk.json() == {"action": "delete", "matched": 2, "changed": 2}
    line = daemon.wait_for_event("job_control", lambda e: e.get("action") == "delete")
    assert line["filter"] == {"status": "completed"} and line["changed"] == 2
    assert "t0ken-never-logged" not in daemon.log_text() and SECRET not in daemon.log_text()

    assert daemon.stop() == 0
    daemon.assert_clean_output()
