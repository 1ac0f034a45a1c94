"""The ``gochatd`` command line as a user meets it: bad input is one line and exit 2 with
nothing written, secrets are masked, idempotent enqueue, schema upgrades."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.daemon_process import DaemonFactory, assert_clean, poll_until, run_cli
from tests.support.e2e_jobs import query


def _db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'gochatd.db'}"


def _job_rows(tmp_path: Path) -> int:
    """Jobs in the test's SQLite file (0 when the file was never created)."""
    if not (tmp_path / "gochatd.db").exists():
        return 0
    tables = query(_db_url(tmp_path), "SELECT name FROM sqlite_master WHERE name = 'background_jobs'")
    if not tables:
        return 0
    return int(query(_db_url(tmp_path), "SELECT count(*) FROM background_jobs")[0][0])


def _upgrade(tmp_path: Path) -> None:
    done = run_cli(["db", "upgrade"], {"GOCHAT_DATABASE_URL": _db_url(tmp_path)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def _assert_one_line_error(result: subprocess.CompletedProcess[str], expect: str) -> str:
    stderr = result.stderr
    assert result.returncode == 2, f"exit {result.returncode}\nstdout={result.stdout}\nstderr={stderr}"
    assert result.stdout == "", result.stdout
    lines = stderr.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{stderr}"
    assert lines[0].startswith("gochatd: "), lines[0]
    assert expect.lower() in lines[0].lower(), f"{expect!r} not in {lines[0]!r}"
    assert_clean(stderr, "stderr")
    return lines[0]


@dataclass(frozen=True)
class BadInput:
    args: list[str]
    expect: str  # a piece of the one-line message
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # name -> content, in tmp_path
    upgraded: bool = False  # run against a database made by 'gochatd db upgrade'


BAD_INPUTS: dict[str, BadInput] = {
    "payload-not-json": BadInput(["enqueue", "sys:noop", "--payload", "{bad"], "--payload"),
    "payload-array": BadInput(["enqueue", "sys:noop", "--payload", "[1, 2]"], "JSON object"),
    "payload-missing-file": BadInput(["enqueue", "sys:noop", "--payload", "@nope.json"], "nope.json"),
    "unknown-flag-enqueue": BadInput(["enqueue", "sys:noop", "--bogus"], "--bogus"),
    "unknown-flag-serve": BadInput(["--bogus"], "--bogus"),
    "bad-job-type": BadInput(["enqueue", "bad type!"], "job_type"),
    "negative-delay": BadInput(["enqueue", "sys:noop", "--delay", "-1"], "--delay"),
    "max-attempts-zero": BadInput(["enqueue", "sys:noop", "--max-attempts", "0"], "max_attempts"),
    "concurrency-zero-config-check": BadInput(
        ["config", "check"], "worker.concurrency", env={"GOCHAT_WORKER_CONCURRENCY": "0"}
    ),
    "concurrency-zero-serve": BadInput(
        [], "worker.concurrency", env={"GOCHAT_WORKER_CONCURRENCY": "0"}
    ),
    "concurrency-flag-zero-serve": BadInput(["--concurrency", "0"], "worker.concurrency"),
    "yaml-unknown-key": BadInput(
        ["config", "check", "--config", "{tmp}/cfg.yaml"], "unknown config key 'worker.concurency'",
        files={"cfg.yaml": "worker:\n  concurency: 3\n"},
    ),
    "yaml-unknown-key-serve": BadInput(
        ["serve", "--config", "{tmp}/cfg.yaml"], "unknown config key 'colour'",
        files={"cfg.yaml": "colour: blue\n"},
    ),
    "yaml-invalid": BadInput(
        ["--config", "{tmp}/cfg.yaml"], "not valid YAML",
        files={"cfg.yaml": "worker:\n  concurrency: [1, 2\n"},
    ),
    "yaml-not-mapping": BadInput(
        ["config", "check", "--config", "{tmp}/cfg.yaml"], "mapping", files={"cfg.yaml": "- 1\n"},
    ),
    "config-file-missing": BadInput(["--config", "{tmp}/missing.yaml"], "missing.yaml"),
    "payload-over-limit": BadInput(
        ["enqueue", "sys:noop", "--payload", json.dumps({"text": "x" * 200})], "over the limit",
        env={"GOCHAT_WORKER_MAX_PAYLOAD_BYTES": "64"},
    ),
    "show-missing-job": BadInput(["jobs", "show", "999999"], "not found", upgraded=True),
    "retry-missing-job": BadInput(["jobs", "retry", "999999"], "not found", upgraded=True),
    "show-bad-id": BadInput(["jobs", "show", "abc"], "job id"),
    "list-bad-status": BadInput(["jobs", "list", "--status", "finished"], "--status"),
    "bad-database-scheme": BadInput(
        ["enqueue", "sys:noop"], "database_url", env={"GOCHAT_DATABASE_URL": "mysql://x/y"}
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path: Path, case: BadInput) -> None:
    for name, content in case.files.items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    env = {"GOCHAT_DATABASE_URL": _db_url(tmp_path), **case.env}
    if case.upgraded:
        _upgrade(tmp_path)
    args = [a.replace("{tmp}", str(tmp_path)) for a in case.args]
    result = run_cli(args, env, cwd=tmp_path)
    _assert_one_line_error(result, case.expect)
    assert _job_rows(tmp_path) == 0


def test_retry_of_a_queued_job_is_refused(tmp_path: Path) -> None:
    env = {"GOCHAT_DATABASE_URL": _db_url(tmp_path)}
    _upgrade(tmp_path)
    created = run_cli(["enqueue", "sys:noop"], env, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["id"]

    result = run_cli(["jobs", "retry", str(job_id)], env, cwd=tmp_path)
    _assert_one_line_error(result, str(job_id))

    shown = run_cli(["jobs", "show", str(job_id), "--json"], env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    job = json.loads(shown.stdout)
    assert job["status"] == "queued"
    assert job["attempts"] == 0
    assert _job_rows(tmp_path) == 1


@pytest.mark.parametrize("via", ["flags", "env"])
def test_config_check_masks_passwords(tmp_path: Path, via: str) -> None:
    database_url = "postgresql://u:secret@127.0.0.1:5432/db"
    redis_url = "redis://:redispw42@127.0.0.1:6379/0"
    if via == "flags":
        result = run_cli(
            ["config", "check", "--database-url", database_url, "--redis-url", redis_url],
            cwd=tmp_path,
        )
    else:
        result = run_cli(
            ["config", "check"],
            {"GOCHAT_DATABASE_URL": database_url, "GOCHAT_REDIS_URL": redis_url},
            cwd=tmp_path,
        )
    assert result.returncode == 0, result.stderr
    text = result.stdout + result.stderr
    assert "secret" not in text
    assert "redispw42" not in text
    assert "postgresql://u:***@127.0.0.1:5432/db" in result.stdout
    assert "redis://:***@127.0.0.1:6379/0" in result.stdout
    source = "flag" if via == "flags" else "env"
    assert any(
        line.startswith("database_url") and f"[{source}]" in line
        for line in result.stdout.splitlines()
    ), result.stdout


def test_enqueue_with_idempotency_key(tmp_path: Path) -> None:
    env = {"GOCHAT_DATABASE_URL": _db_url(tmp_path)}
    _upgrade(tmp_path)
    args = ["enqueue", "sys:noop", "--idempotency-key", "order-42", "--payload", '{"n": 1}']
    first = run_cli(args, env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    second = run_cli(args, env, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    job1, job2 = json.loads(first.stdout), json.loads(second.stdout)
    assert job1["id"] == job2["id"]
    assert job2["idempotency_key"] == "order-42"
    assert job2["payload"] == {"n": 1}

    # Same key, same payload written differently (key order, spacing): still the same job.
    reordered = run_cli(
        ["enqueue", "sys:noop", "--idempotency-key", "order-42", "--payload", '{ "n":1 }'],
        env, cwd=tmp_path,
    )
    assert reordered.returncode == 0, reordered.stderr
    assert json.loads(reordered.stdout)["id"] == job1["id"]

    conflict = run_cli(
        ["enqueue", "sys:noop", "--idempotency-key", "order-42", "--payload", '{"n": 2}'],
        env, cwd=tmp_path,
    )
    line = _assert_one_line_error(conflict, "idempotency key 'order-42'")
    assert f"job {job1['id']}" in line

    # Another tenant may use the same key for its own job.
    other = run_cli([*args, "--tenant", "acme"], env, cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    assert json.loads(other.stdout)["id"] != job1["id"]
    assert _job_rows(tmp_path) == 2


def test_enqueue_a_unique_job(tmp_path: Path) -> None:
    """--unique-for / --unique-key (docs/unique-jobs.md): the second enqueue prints the job
    still waiting; a bad value is one line, exit 2."""
    env = {"GOCHAT_DATABASE_URL": _db_url(tmp_path)}
    _upgrade(tmp_path)
    args = ["enqueue", "sys:noop", "--unique-for", "300", "--payload", '{"account": 7}']
    first = run_cli(args, env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    same = run_cli(["enqueue", "sys:noop", "--unique-for", "300", "--payload", '{ "account":7 }'],
                   env, cwd=tmp_path)
    assert same.returncode == 0, same.stderr
    assert json.loads(same.stdout)["id"] == json.loads(first.stdout)["id"]
    keyed = [run_cli(["enqueue", "sys:noop", "--unique-key", "acct-7", "--payload",
                      f'{{"n": {n}}}'], env, cwd=tmp_path) for n in (1, 2)]
    assert all(r.returncode == 0 for r in keyed), [r.stderr for r in keyed]
    assert len({json.loads(r.stdout)["id"] for r in keyed}) == 1
    assert _job_rows(tmp_path) == 2
    _assert_one_line_error(run_cli([*args[:2], "--unique-for", "-5"], env, cwd=tmp_path),
                           "--unique-for")
    _assert_one_line_error(run_cli([*args[:2], "--unique-key", "k" * 513], env, cwd=tmp_path),
                           "unique_key")
    assert _job_rows(tmp_path) == 2


def test_db_upgrade_and_unmigrated_start(
    tmp_path: Path, fresh_pg_url: str, daemons: DaemonFactory
) -> None:
    env = {"GOCHAT_DATABASE_URL": fresh_pg_url}

    refused = run_cli([], env, cwd=tmp_path, timeout_s=30)
    line = _assert_one_line_error(refused, "gochatd db upgrade")
    assert "schema" in line

    first = run_cli(["db", "upgrade"], env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("applied: "), first.stdout
    assert "0001" in first.stdout
    assert_clean(first.stderr, "stderr")

    second = run_cli(["db", "upgrade"], env, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "schema is up to date"

    # Now the daemon starts and works without --migrate.
    daemon = daemons.start("upgraded", env={**env, "GOCHAT_LOG_FORMAT": "json"}, cwd=tmp_path)
    enq = run_cli(["enqueue", "sys:noop"], env, cwd=tmp_path)
    assert enq.returncode == 0, enq.stderr
    job_id = json.loads(enq.stdout)["id"]
    daemon.wait_for_event("job_completed", lambda e: e.get("job_id") == job_id)
    assert daemon.stop() == 0
    daemon.assert_clean_output()


def test_jobs_show_lists_every_attempt(tmp_path: Path, daemons: DaemonFactory) -> None:
    """A job that fails, is retried by the operator and completes: ``jobs show`` prints both
    runs, newest first, with the worker and the redacted error (``--json`` as the API)."""
    env = {"GOCHAT_DATABASE_URL": _db_url(tmp_path),
           "GOCHAT_HANDLERS": "tests.support.flaky_handlers"}
    daemon = daemons.start("attempts", env=env, cwd=tmp_path, mode="polling")
    worker_id = daemon.events("worker_starting")[0]["worker_id"]
    marker = tmp_path / "marker"
    created = run_cli(["enqueue", "test:fail_once", "--payload",
                       json.dumps({"marker": str(marker)})],
                      env, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["id"]

    def shown(status: str) -> dict[str, object] | None:
        result = run_cli(["jobs", "show", str(job_id), "--json"], env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        job: dict[str, object] = json.loads(result.stdout)
        return job if job["status"] == status else None

    dead = poll_until(lambda: shown("dead"), timeout_s=30, what="job dead")
    retried = run_cli(["jobs", "retry", str(job_id)], env, cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    done = poll_until(lambda: shown("completed"), timeout_s=30, what="job completed")
    history = done["attempt_history"]
    assert isinstance(history, list)
    assert [(a["attempt"], a["outcome"], a["worker"], a["error_class"]) for a in history] == [
        (2, "completed", worker_id, None), (1, "dead", worker_id, "non_retryable")]
    assert history[1]["error"] == dead["last_error"]
    assert "first attempt fails on purpose" in str(history[1]["error"])

    text = run_cli(["jobs", "show", str(job_id)], env, cwd=tmp_path)
    assert text.returncode == 0 and text.stderr == "", text.stderr
    assert_clean(text.stdout, "stdout")
    lines = text.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ATTEMPT"))
    newest, oldest = lines[header + 1].split(), lines[header + 2].split()
    assert newest[:2] == ["2", "completed"] and worker_id in newest
    assert oldest[:2] == ["1", "dead"] and "non_retryable:" in oldest


def test_a_failed_jobs_error_reads_once_and_shows_sys_fails_message(
    tmp_path: Path, daemons: DaemonFactory,
) -> None:
    """``jobs show`` of a dead ``sys:fail`` job: ``error_class: error`` names the class once
    (was ``SysFailError: SysFailError: [payload]``) and shows the message the job asked for;
    the payload's other strings stay masked."""
    env = {"GOCHAT_DATABASE_URL": _db_url(tmp_path)}
    daemon = daemons.start("sysfail", env=env, cwd=tmp_path, mode="polling")
    payload = {"message": "upstream said no to acme-corp", "customer": "acme-corp"}
    created = run_cli(["enqueue", "sys:fail", "--payload", json.dumps(payload),
                       "--max-attempts", "1"], env, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["id"]

    def dead() -> dict[str, object] | None:
        result = run_cli(["jobs", "show", str(job_id), "--json"], env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        job: dict[str, object] = json.loads(result.stdout)
        return job if job["status"] == "dead" else None

    job = poll_until(dead, timeout_s=30, what="sys:fail job dead")
    assert (job["error_class"], job["last_error"]) == (
        "SysFailError", "upstream said no to [payload]")
    text = run_cli(["jobs", "show", str(job_id)], env, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "SysFailError: upstream said no to [payload]" in text.stdout
    assert "SysFailError: SysFailError" not in text.stdout
    assert daemon.stop() == 0
