"""Job results through the installed ``gochatd`` (docs/results.md): a daemon started as a
user starts it stores what its handler returned, ``gochatd jobs show`` prints it (text and
``--json``), and a result over ``GOCHAT_WORKER_MAX_RESULT_BYTES`` makes the job dead with an
error that gives the size and not the value. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.daemon_process import DaemonFactory, assert_clean, poll_until, run_cli


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'gochatd.db'}"
    return str(request.getfixturevalue("pg_clean"))


def test_jobs_show_prints_the_result(tmp_path: Path, daemons: DaemonFactory,
                                     database_url: str) -> None:
    env = {"GOCHAT_DATABASE_URL": database_url, "GOCHAT_HANDLERS": "tests.support.result_handlers",
           "GOCHAT_WORKER_MAX_RESULT_BYTES": "200"}
    daemon = daemons.start("results", env=env, cwd=tmp_path, mode="polling")
    ids = {}
    for job_type, payload in (("test:answer", {"n": 21}), ("test:huge", {})):
        created = run_cli(["enqueue", job_type, "--payload", json.dumps(payload)], env,
                          cwd=tmp_path)
        assert created.returncode == 0, created.stderr
        ids[job_type] = json.loads(created.stdout)["id"]

    def shown(job_id: int, status: str) -> dict[str, object] | None:
        result = run_cli(["jobs", "show", str(job_id), "--json"], env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        job: dict[str, object] = json.loads(result.stdout)
        return job if job["status"] == status else None

    done = poll_until(lambda: shown(ids["test:answer"], "completed"), timeout_s=30,
                      what="job completed")
    assert done["result"] == {"answer": 42, "text": "héllo"}
    text = run_cli(["jobs", "show", str(ids["test:answer"])], env, cwd=tmp_path)
    assert text.returncode == 0 and text.stderr == "", text.stderr
    assert_clean(text.stdout, "stdout")
    [line] = [ln for ln in text.stdout.splitlines() if ln.startswith("result ")]
    assert json.loads(line.removeprefix("result").strip()) == {"answer": 42, "text": "héllo"}

    dead = poll_until(lambda: shown(ids["test:huge"], "dead"), timeout_s=30, what="job dead")
    assert dead["error_class"] == "result_too_large" and dead["result"] is None
    assert "1009 bytes" in str(dead["last_error"]) and "secret" not in str(dead["last_error"])
    assert dead["attempts"] == 1
    assert daemon.stop() == 0
    daemon.assert_clean_output()
