"""A daemon's life on SQLite: the new user's first run, stop signals, SIGHUP reload."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import yaml

from tests.support.daemon_process import DaemonFactory, assert_clean, poll_until, run_cli
from tests.support.e2e_jobs import (
    enqueue_many,
    executions,
    query,
    reset_executions,
    status_counts,
)

HANDLERS = "tests.support.recording_handlers"


def test_new_user_flow_on_sqlite(tmp_path: Path, daemons: DaemonFactory) -> None:
    """Nothing configured but the database URL; jobs from the CLI and from a client."""
    db_url = f"sqlite:///{tmp_path / 'gochatd.db'}"
    env = {"GOCHAT_DATABASE_URL": db_url}
    daemon = daemons.start("first-run", env=env, cwd=tmp_path, mode="polling")
    starting = daemon.events("worker_starting")[0]
    assert starting["database"] == db_url
    assert starting["redis"] is None

    cli_ids = []
    for extra in ([], ["--payload", '{"n": 1}'], ["--queue", "high", "--priority", "5"]):
        result = run_cli(["enqueue", "sys:noop", *extra], env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        job = json.loads(result.stdout)
        assert job["status"] == "queued" and job["job_type"] == "sys:noop"
        cli_ids.append(job["id"])
    client_ids = enqueue_many(db_url, "sys:noop", [{"n": n} for n in range(300)])
    wanted = set(cli_ids) | set(client_ids)
    assert len(wanted) == 303

    def completed_ids() -> set[int] | None:
        result = run_cli(
            ["jobs", "list", "--status", "completed", "--json", "--limit", "10000"], env,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr
        done = {j["id"] for j in json.loads(result.stdout)}
        return done if done >= wanted else None

    done = poll_until(completed_ids, timeout_s=60, interval_s=0.2, what="303 jobs completed")
    assert done == wanted

    shown = run_cli(["jobs", "show", str(cli_ids[0]), "--json"], env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    job = json.loads(shown.stdout)
    assert (job["status"], job["attempts"], job["fence"]) == ("completed", 1, 1)

    daemon.send(signal.SIGTERM)
    started = time.monotonic()
    assert daemon.wait(10) == 0
    assert time.monotonic() - started < 5
    daemon.assert_clean_output()
    assert daemon.err_text() == ""
    stopped = daemon.events("worker_stopped")
    assert len(stopped) == 1 and stopped[0]["forced"] is False
    assert len(daemon.events("job_completed")) == 303


@pytest.mark.parametrize("backend", ["sqlite", "postgres+redis"])
def test_second_signal_interrupts_now_and_refunds(
    backend: str, tmp_path: Path, daemons: DaemonFactory, request: pytest.FixtureRequest
) -> None:
    """The README's promise under a second SIGTERM: handlers are cancelled at once and the
    jobs go back to ``retrying`` with their attempt refunded, within the 2 s bound; exit 0."""
    if backend == "sqlite":
        db_url = f"sqlite:///{tmp_path / 'gochatd.db'}"
        env = {"GOCHAT_DATABASE_URL": db_url}
    else:
        db_url = request.getfixturevalue("pg_clean")
        env = {"GOCHAT_DATABASE_URL": db_url, "GOCHAT_REDIS_URL": request.getfixturevalue("redis_url")}
    env |= {
        "GOCHAT_LOG_FORMAT": "json",
        "GOCHAT_HANDLERS": HANDLERS,
        "GOCHAT_WORKER_SHUTDOWN_GRACE_S": "30",
        "GOCHAT_WORKER_CONCURRENCY": "4",
    }
    daemon = daemons.start("blocker", env=env, cwd=tmp_path)
    reset_executions(db_url)
    job_ids = enqueue_many(db_url, "test:block", [{}, {}, {}])
    poll_until(lambda: len(executions(db_url)) == 3, timeout_s=20, what="3 test:block running")

    daemon.send(signal.SIGTERM)
    draining = daemon.wait_for_event("worker_draining")
    assert draining["in_flight"] == 3
    assert daemon.alive()  # waiting out its 30 s grace for the blocked handlers

    daemon.send(signal.SIGTERM)
    started = time.monotonic()
    code = daemon.wait(15)
    elapsed_s = time.monotonic() - started
    assert code == 0, daemon.output()
    assert elapsed_s < 8, f"took {elapsed_s:.1f}s to stop after the second signal"
    [now] = daemon.events("worker_stop_now")
    assert now["in_flight"] == 3 and now["bound_s"] == 2.0
    stopped = daemon.events("worker_stopped")[-1]
    assert stopped["forced"] is False and stopped["stop_now"] is True
    assert len(daemon.events("job_interrupted")) == 3
    assert_clean(daemon.err_text(), "stderr")
    rows = query(db_url, "SELECT id, status, attempts, error_class FROM background_jobs ORDER BY id")
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (job_id, "retrying", 0, "interrupted") for job_id in job_ids
    ], "interrupted jobs go back to retrying with the attempt refunded"
    runs = query(db_url, "SELECT job_id, attempt, outcome, worker, error_class FROM job_attempts"
                         " ORDER BY job_id")
    worker_id = daemon.events("worker_starting")[0]["worker_id"]
    assert [tuple(r) for r in runs] == [
        (job_id, 1, "interrupted", worker_id, "interrupted") for job_id in job_ids
    ], "each interrupted run is in the jobs' attempt history"
    assert sorted(e.job_id for e in executions(db_url)) == sorted(job_ids)


def _write_yaml(path: Path, doc: dict[str, object]) -> None:
    """Replace the file atomically so the daemon never reads half of it."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(doc), encoding="utf-8")
    os.replace(tmp, path)


def test_sighup_reloads_config_file(tmp_path: Path, daemons: DaemonFactory) -> None:
    db_url = f"sqlite:///{tmp_path / 'gochatd.db'}"
    config = tmp_path / "gochatd.yaml"
    doc: dict[str, object] = {
        "database_url": db_url,
        "handlers": [HANDLERS],
        "worker": {"concurrency": 2, "shutdown_grace_s": 0.5},
        "log": {"format": "json"},
    }
    _write_yaml(config, doc)
    daemon = daemons.start(
        "reloader", ["--config", str(config)], env={"RECORDING_DATABASE_URL": db_url},
        cwd=tmp_path,
    )
    assert daemon.events("worker_starting")[0]["concurrency"] == 2
    reset_executions(db_url)

    enqueue_many(db_url, "test:block", [{} for _ in range(5)])
    poll_until(lambda: len(executions(db_url)) >= 2, timeout_s=20, what="2 handlers running")
    assert len(executions(db_url)) == 2  # blocked handlers fill the 2 slots

    doc["worker"] = {"concurrency": 5, "shutdown_grace_s": 0.5}
    _write_yaml(config, doc)
    daemon.send(signal.SIGHUP)
    reloaded = daemon.wait_for_event("config_reloaded")
    assert "worker.concurrency" in reloaded["changed"]
    assert reloaded["needs_restart"] == []
    poll_until(lambda: len(executions(db_url)) == 5, timeout_s=20, what="5 handlers running")

    doc["database_url"] = f"sqlite:///{tmp_path / 'other.db'}"
    _write_yaml(config, doc)
    daemon.send(signal.SIGHUP)
    second = daemon.wait_for_event("config_reloaded", count=2)
    assert second["needs_restart"] == ["database_url"]
    assert second["changed"] == []
    assert daemon.alive()

    # A file that no longer parses is rejected and the daemon keeps running.
    config.write_text("worker: [\n", encoding="utf-8")
    daemon.send(signal.SIGHUP)
    daemon.wait_for_event("reload_rejected")
    assert daemon.alive()

    assert daemon.stop() == 0  # the blocked handlers are interrupted after the grace
    daemon.assert_clean_output()
    counts = status_counts(db_url)
    assert counts["running"] == 0
    assert counts["retrying"] == 5  # interrupted handlers go back to retrying
