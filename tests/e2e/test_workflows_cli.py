"""Dependent jobs and batches through the installed ``gochatd`` (docs/workflows.md):
``enqueue --depends-on [--run-if-failed]``, the dependencies ``jobs show`` prints (text and
``--json``), ``batches show`` (text and ``--json``), and the one-line errors. The operator's
``jobs cancel`` releases what waits, as a worker's finish would. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

import gochatd
from gochatd.workflows.model import EnqueuedBatch
from tests.support.daemon_process import assert_clean, run_cli

PARKED = ["--queue", "parked", "--max-attempts", "3"]  # no daemon runs here: nothing claims


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'gochatd.db'}"
        upgraded = run_cli(["db", "upgrade"], {"GOCHAT_DATABASE_URL": url}, cwd=tmp_path)
        assert upgraded.returncode == 0, upgraded.stderr
        return url
    return str(request.getfixturevalue("pg_clean"))


def _ok(args: list[str], url: str, cwd: Path) -> str:
    done = run_cli(args, {"GOCHAT_DATABASE_URL": url}, cwd=cwd)
    assert done.returncode == 0 and done.stderr == "", (args, done.returncode, done.stderr)
    assert_clean(done.stdout, "stdout")
    return done.stdout


def _cancel(job_id: int, url: str, cwd: Path) -> None:
    """``jobs cancel``: its one audit line on stderr (client/job_controls.py)."""
    done = run_cli(["jobs", "cancel", str(job_id)], {"GOCHAT_DATABASE_URL": url}, cwd=cwd)
    assert done.returncode == 0, done.stderr
    [audit] = done.stderr.splitlines()
    assert json.loads(audit)["event"] == "job_control"
    assert json.loads(done.stdout)["status"] == "cancelled"


def _json(args: list[str], url: str, cwd: Path) -> Any:
    return json.loads(_ok([*args, "--json"] if args[0] != "enqueue" else args, url, cwd))


def _refused(args: list[str], url: str, cwd: Path) -> str:
    done: subprocess.CompletedProcess[str] = run_cli(args, {"GOCHAT_DATABASE_URL": url}, cwd=cwd)
    assert (done.returncode, done.stdout) == (2, ""), (args, done.returncode, done.stdout)
    assert done.stderr.startswith("gochatd: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def test_depends_on_from_the_command_line(tmp_path: Path, database_url: str) -> None:
    url, cwd = database_url, tmp_path
    parent = _json(["enqueue", "sys:noop", *PARKED], url, cwd)["id"]
    waiting = _json(["enqueue", "sys:noop", *PARKED, "--depends-on", f"{parent},{parent}"],
                    url, cwd)
    assert waiting["status"] == "queued" and waiting["scheduled_at"].startswith("9999-12-31")
    anyway = _json(["enqueue", "sys:noop", *PARKED, "--depends-on", str(parent),
                    "--run-if-failed"], url, cwd)["id"]

    shown = _json(["jobs", "show", str(waiting["id"])], url, cwd)
    assert (shown["waits_on"], shown["batch_id"], shown["attempt_history"]) == (1, None, [])
    assert shown["depends_on"] == [{"job_id": parent, "status": "queued",
                                    "run_if_failed": False, "resolved": False}]
    text = _ok(["jobs", "show", str(waiting["id"])], url, cwd)
    assert "dependencies: 1, waits on 1\n" in text
    [row] = [line.split() for line in text.splitlines() if line.split()[:1] == [str(parent)]]
    assert row == [str(parent), "queued", "no", "no"]
    assert "dependencies: none\n" in _ok(["jobs", "show", str(parent)], url, cwd)
    alone = _json(["jobs", "show", str(parent)], url, cwd)
    assert (alone["waits_on"], alone["depends_on"]) == (0, [])

    # Missing, and another tenant's: the same answer, nothing written.
    assert _refused(["enqueue", "sys:noop", "--depends-on", "424242"], url, cwd) == (
        "gochatd: --depends-on: job 424242 not found\n")
    assert _refused(["enqueue", "sys:noop", "--tenant", "other", "--depends-on", str(parent)],
                    url, cwd) == f"gochatd: --depends-on: job {parent} not found\n"
    assert _json(["jobs", "list", "--tenant", "other"], url, cwd) == []

    # The operator cancels the parent: the dependent is cancelled, the other runs anyway.
    _cancel(parent, url, cwd)
    cancelled = _json(["jobs", "show", str(waiting["id"])], url, cwd)
    assert (cancelled["status"], cancelled["error_class"]) == ("cancelled", "dependency_failed")
    assert cancelled["depends_on"][0]["status"] == "cancelled"
    assert cancelled["depends_on"][0]["resolved"] is True
    released = _json(["jobs", "show", str(anyway)], url, cwd)
    assert released["status"] == "queued" and released["waits_on"] == 0
    assert not released["scheduled_at"].startswith("9999")
    assert released["depends_on"][0]["run_if_failed"] is True


def _batch(url: str) -> EnqueuedBatch:
    async def write() -> EnqueuedBatch:
        async with gochatd.Client(url) as client:
            return await client.batch(
                [gochatd.NewJob("sys:noop", {"n": n}, queue="parked") for n in range(3)],
                on_success=gochatd.NewJob("sys:noop", {"cb": "success"}, queue="parked"),
                on_complete=gochatd.NewJob("sys:noop", {"cb": "complete"}, queue="parked"))

    return trio.run(write)


def test_batches_show(tmp_path: Path, database_url: str) -> None:
    url, cwd = database_url, tmp_path
    batch = _batch(url)
    assert batch.on_success is not None and batch.on_complete is not None
    shown = _json(["batches", "show", str(batch.id)], url, cwd)
    assert {k: shown[k] for k in ("id", "tenant_id", "size", "counts", "finished", "done")} == {
        "id": batch.id, "tenant_id": "default", "size": 3, "counts": {"queued": 3},
        "finished": 0, "done": False}
    assert shown["callbacks"] == {
        "on_success": {"id": batch.on_success.id, "status": "queued", "job_type": "sys:noop"},
        "on_complete": {"id": batch.on_complete.id, "status": "queued", "job_type": "sys:noop"}}
    member = _json(["jobs", "show", str(batch.jobs[0].id)], url, cwd)
    assert (member["batch_id"], member["depends_on"]) == (batch.id, [])
    assert f"dependencies: none; batch {batch.id}\n" in _ok(
        ["jobs", "show", str(batch.jobs[0].id)], url, cwd)
    callback = _json(["jobs", "show", str(batch.on_complete.id)], url, cwd)
    assert sorted(d["job_id"] for d in callback["depends_on"]) == [j.id for j in batch.jobs]
    assert callback["waits_on"] == 3

    # One member cancelled: on_success is cancelled; all finished: on_complete is released.
    for job in batch.jobs:
        _cancel(job.id, url, cwd)
    shown = _json(["batches", "show", str(batch.id)], url, cwd)
    assert (shown["counts"], shown["finished"], shown["done"]) == ({"cancelled": 3}, 3, True)
    assert shown["callbacks"]["on_success"]["status"] == "cancelled"
    assert shown["callbacks"]["on_complete"]["status"] == "queued"
    text = _ok(["batches", "show", str(batch.id)], url, cwd)
    lines = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in text.splitlines()}
    assert (lines["size"], lines["finished"], lines["counts"]) == ("3", "3 of 3 (done)",
                                                                   "cancelled 3")
    assert lines["on_success"] == f"job {batch.on_success.id} cancelled (sys:noop)"
    assert lines["on_complete"] == f"job {batch.on_complete.id} queued (sys:noop)"

    assert _refused(["batches", "show", "424242"], url, cwd) == (
        "gochatd: batch 424242 not found\n")
    assert "batch id" in _refused(["batches", "show", "0"], url, cwd)
    assert "required" in _refused(["batches"], url, cwd)
