"""Handler options reach producers that do not import the handler (docs/job-types.md): a
daemon whose handler says ``queue="low", max_attempts=2`` and that serves only ``low``
publishes them at start; ``gochatd enqueue``, the gateway and (on PostgreSQL) a plain SQL
INSERT then put the type's jobs in ``low`` with 2 attempts, and the daemon completes them.
Explicit values win; a type no daemon has published lands in ``default`` with 25 attempts,
and the CLI says so on stderr. On SQLite alone and on PostgreSQL + Redis Streams."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml

from tests.admin.helpers import daemon_admin_url
from tests.gateway.helpers import KEY_A, KEYS, auth
from tests.support.daemon_process import DaemonFactory, DaemonProcess, run_cli
from tests.support.typed_handlers import TYPED


@pytest.fixture(params=["sqlite", "postgres-redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(database URL, Redis URL or "")."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'jobs.db'}", ""
    return str(request.getfixturevalue("pg_clean")), str(request.getfixturevalue("redis_url"))


def _enqueue(env: dict[str, str], cwd: Path, *args: str) -> tuple[dict[str, Any], str]:
    """``gochatd enqueue ARGS``: the job it printed and its stderr."""
    done = run_cli(["enqueue", *args], env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def _show(env: dict[str, str], cwd: Path, job_id: int) -> dict[str, Any]:
    done = run_cli(["jobs", "show", str(job_id), "--json"], env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _assert_unpublished_warning(stderr: str, job_type: str) -> None:
    assert stderr.startswith("gochatd: warning: "), stderr
    assert stderr.count("\n") == 1, stderr
    assert repr(job_type) in stderr and "'default'" in stderr and "25" in stderr, stderr


def _completed(daemon: DaemonProcess, job_id: int) -> None:
    daemon.wait_for_event("job_completed", lambda e: e.get("job_id") == job_id)


def test_producers_get_the_published_defaults(
    backend: tuple[str, str], tmp_path: Path, daemons: DaemonFactory
) -> None:
    database_url, redis_url = backend
    env = {"GOCHAT_DATABASE_URL": database_url}
    if redis_url:
        env["GOCHAT_REDIS_URL"] = redis_url
    config = tmp_path / "gochatd.yaml"
    config.write_text(yaml.safe_dump({"gateway": {"keys": KEYS}}))

    # No daemon has run yet (the schema made by hand, as the CLI says to): the type is
    # unknown everywhere, so default/25 and a warning.
    upgraded = run_cli(["db", "upgrade"], env, cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    early, stderr = _enqueue(env, tmp_path, TYPED)
    assert (early["queue"], early["max_attempts"]) == ("default", 25)
    _assert_unpublished_warning(stderr, TYPED)

    daemon = daemons.start(
        "typed", ["--handlers", "tests.support.typed_handlers", "--queues", "low"],
        env={**env, "GOCHAT_LOG_FORMAT": "json", "GOCHAT_CONFIG": str(config)}, cwd=tmp_path)
    [published] = daemon.events("job_types_published")
    assert published["count"] >= 1  # e2e:typed and the built-in sys:* handlers

    # The CLI, with no handler imported: low/2, and no warning.
    cli, stderr = _enqueue(env, tmp_path, TYPED, "--payload", '{"via": "cli"}')
    assert (cli["queue"], cli["max_attempts"]) == ("low", 2)
    assert stderr == ""
    ids = [cli["id"]]
    # The gateway.
    with httpx.Client(timeout=10.0) as http:
        url = f"{daemon_admin_url(daemon)}/v1/jobs"
        response = http.post(url, json={"job_type": TYPED, "payload": {"via": "gateway"}},
                             headers=auth(KEY_A))
        assert response.status_code == 201, response.text
        job = response.json()["job"]
        assert (job["queue"], job["max_attempts"]) == ("low", 2)
        ids.append(job["id"])
        # An explicit value wins over the published one.
        response = http.post(url, json={"job_type": TYPED, "payload": {}, "queue": "default",
                                        "max_attempts": 3}, headers=auth(KEY_A))
        assert response.status_code == 201, response.text
        explicit_gateway = response.json()["job"]
        assert (explicit_gateway["queue"], explicit_gateway["max_attempts"]) == ("default", 3)
    # Plain SQL that leaves the columns out (PostgreSQL: the trigger fills them).
    if database_url.startswith("postgresql"):
        with psycopg.connect(database_url, autocommit=True) as conn:
            row = conn.execute(
                "INSERT INTO background_jobs (job_type, payload) VALUES (%s, '{}') "
                "RETURNING id, queue, max_attempts", (TYPED,)).fetchone()
        assert row is not None and (row[1], row[2]) == ("low", 2)
        ids.append(int(row[0]))

    for job_id in ids:
        _completed(daemon, job_id)
        done = _show(env, tmp_path, job_id)
        assert (done["status"], done["queue"], done["max_attempts"]) == ("completed", "low", 2)

    # Explicit CLI values win; the daemon serves only low, so these wait, as does the job
    # enqueued before any daemon published the type.
    explicit, stderr = _enqueue(env, tmp_path, TYPED, "--queue", "default", "--max-attempts", "5")
    assert (explicit["queue"], explicit["max_attempts"]) == ("default", 5) and stderr == ""
    # A type no daemon publishes: default/25, with the warning.
    unknown, stderr = _enqueue(env, tmp_path, "e2e:nobody")
    assert (unknown["queue"], unknown["max_attempts"]) == ("default", 25)
    _assert_unpublished_warning(stderr, "e2e:nobody")
    for job in (early, explicit, explicit_gateway, unknown):
        assert _show(env, tmp_path, job["id"])["status"] == "queued"

    assert daemon.stop() == 0
    daemon.assert_clean_output()


def test_daemons_that_disagree_the_last_one_to_start_wins(
    tmp_path: Path, daemons: DaemonFactory
) -> None:
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}"}
    logged = {**env, "GOCHAT_LOG_FORMAT": "json"}
    first = daemons.start("first", ["--handlers", "tests.support.typed_handlers", "--queues",
                                    "low"], env=logged, cwd=tmp_path)
    assert first.events("job_type_defaults_changed") == []
    job, _ = _enqueue(env, tmp_path, TYPED)
    assert (job["queue"], job["max_attempts"]) == ("low", 2)

    second = daemons.start("second", ["--handlers", "tests.support.typed_handlers_disagreeing",
                                      "--queues", "other"], env=logged, cwd=tmp_path)
    changed = second.events("job_type_defaults_changed")
    assert len(changed) == 1, changed  # one line, for the one type they disagree on
    [line] = changed
    assert line["job_type"] == TYPED
    assert line["previous"] == "queue=low max_attempts=2 timeout_s=30"
    assert line["published"] == "queue=other max_attempts=3 timeout_s=none"
    assert line["previous_by"] == first.events("worker_starting")[0]["worker_id"]
    assert line["level"] == "warning"

    job, _ = _enqueue(env, tmp_path, TYPED)
    assert (job["queue"], job["max_attempts"]) == ("other", 3)
    second.wait_for_event("job_completed", lambda e: e.get("job_id") == job["id"])
    for daemon in (first, second):
        assert daemon.stop() == 0
        daemon.assert_clean_output()


def test_the_cli_warns_only_about_what_was_left_out(tmp_path: Path) -> None:
    """Issue 23, item 10: with both --queue and --max-attempts nothing was left to a default,
    so nothing is said; with one of them the warning names only the other."""
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}"}
    assert run_cli(["db", "upgrade"], env, cwd=tmp_path).returncode == 0
    both, stderr = _enqueue(env, tmp_path, "demo:hello", "--queue", "default",
                            "--max-attempts", "5")
    assert (both["queue"], both["max_attempts"]) == ("default", 5) and stderr == ""
    queue_only, stderr = _enqueue(env, tmp_path, "demo:hello", "--queue", "low")
    assert queue_only["queue"] == "low" and stderr.count("\n") == 1, stderr
    assert stderr.startswith("gochatd: warning: ") and "'demo:hello'" in stderr, stderr
    assert "max_attempts 25" in stderr and stderr.rstrip().endswith("pass --max-attempts"), stderr
    assert "queue 'default'" not in stderr, stderr
    attempts_only, stderr = _enqueue(env, tmp_path, "demo:hello", "--max-attempts", "3")
    assert attempts_only["max_attempts"] == 3 and stderr.count("\n") == 1, stderr
    assert "went to queue 'default'" in stderr and "max_attempts" not in stderr, stderr
    assert stderr.rstrip().endswith("pass --queue"), stderr
    # Neither: the warning the docs show, word for word.
    _, stderr = _enqueue(env, tmp_path, "demo:hello")
    assert stderr == ("gochatd: warning: no daemon has published job type 'demo:hello' yet, "
                      "so the job went to queue 'default' with max_attempts 25; start a daemon "
                      "that has its handler once, or pass --queue and --max-attempts\n")


def test_http_handler_types_are_published(tmp_path: Path, daemons: DaemonFactory) -> None:
    """Issue 23, item 10: an exact-type HTTP route publishes like a Python handler (queue
    default, 25 attempts, the route's timeout), so producers get no warning; a prefix:* route
    names no type and publishes nothing."""
    env = {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'jobs.db'}"}
    url = "http://127.0.0.1:9/jobs"  # never called: nothing is enqueued for it to run
    routes = {"hook:exact": {"url": url, "timeout_s": 12}, "hook:*": {"url": url}}
    daemon = daemons.start("http", [], env={**env, "GOCHAT_LOG_FORMAT": "json",
                                            "GOCHAT_HANDLERS_HTTP": json.dumps(routes)},
                           cwd=tmp_path)
    with httpx.Client(timeout=10.0) as http:
        listed = http.get(f"{daemon_admin_url(daemon)}/v1/job-types").json()["job_types"]
    by_type = {t["job_type"]: t for t in listed}
    assert "hook:*" not in by_type
    exact = by_type["hook:exact"]
    assert (exact["queue"], exact["max_attempts"], exact["timeout_s"]) == ("default", 25, 12.0)
    assert exact["published_by"] == daemon.events("worker_starting")[0]["worker_id"]
    assert daemon.stop() == 0
    daemon.assert_clean_output()
    # The row stays after the daemon stops: the CLI finds it and says nothing.
    job, stderr = _enqueue(env, tmp_path, "hook:exact")
    assert (job["queue"], job["max_attempts"]) == ("default", 25) and stderr == ""
