"""``gochatd-worker@.service``: four instances side by side on one host.

There is no systemd (PID 1) here, so each instance is started as systemd would start it: the
unit's own ExecStartPre and ExecStart with ``%i`` and ``%t`` substituted, its
RuntimeDirectory made (mode RuntimeDirectoryMode) under a scratch runtime root and passed as
``$RUNTIME_DIRECTORY``, and the environment an operator's env files give (one shared file,
one per instance). Each instance must answer on its own socket, take its jobs and exit 0 on
SIGTERM, removing its socket."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import trio

from gochatd.client.client import Client
from tests.support.daemon_process import DaemonFactory, poll_until, run_cli
from tests.support.e2e_jobs import reset_executions
from tests.support.unix_admin import admin_status
from tests.systemd.test_units import INSTALLED_BINARY, TEMPLATE, gochatd_binary, read_unit

INSTANCES = (1, 2, 3, 4)
JOBS_PER_INSTANCE = 5


@pytest.fixture
def runtime_root() -> Iterator[Path]:
    """systemd's ``%t`` (/run for system units), short enough for a socket path."""
    root = Path(tempfile.mkdtemp(prefix="gw-", dir="/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def instance_argv(directive: str, instance: int, runtime_root: Path) -> list[str]:
    """The unit's command line for one instance, as systemd expands it."""
    line = read_unit(TEMPLATE).one(f"Service.{directive}")
    line = line.replace("%t", str(runtime_root)).replace("%i", str(instance))
    argv = line.split()
    assert argv[0] == INSTALLED_BINARY, argv
    return [str(gochatd_binary()), *argv[1:]]


def runtime_directory(instance: int, runtime_root: Path) -> Path:
    """Made as systemd makes RuntimeDirectory= before ExecStartPre."""
    unit = read_unit(TEMPLATE)
    relative = unit.one("Service.RuntimeDirectory").replace("%i", str(instance))
    path = runtime_root / relative
    path.mkdir(parents=True)
    path.chmod(int(unit.one("Service.RuntimeDirectoryMode"), 8))
    return path


def enqueue_per_queue(database_url: str, redis_url: str) -> dict[int, list[int]]:
    async def run() -> dict[int, list[int]]:
        ids: dict[int, list[int]] = {}
        async with Client(database_url, redis_url) as client:
            for n in INSTANCES:
                ids[n] = [(await client.enqueue("test:record", {}, queue=f"w{n}")).id
                          for _ in range(JOBS_PER_INSTANCE)]
        return ids

    return trio.run(run)


@pytest.mark.slow
def test_four_template_instances_run_side_by_side(
    pg_clean: str, redis_url: str, runtime_root: Path, daemons: DaemonFactory
) -> None:
    reset_executions(pg_clean)
    # /etc/gochatd/gochatd.env: the shared settings, including an admin.listen that every
    # instance would otherwise fight over; the unit's command line overrides it.
    shared_env = {"GOCHAT_DATABASE_URL": pg_clean, "GOCHAT_REDIS_URL": redis_url,
                  "GOCHAT_ADMIN_LISTEN": "127.0.0.1:8410", "GOCHAT_LOG_FORMAT": "json",
                  "GOCHAT_HANDLERS": "tests.support.recording_handlers"}
    directories = {n: runtime_directory(n, runtime_root) for n in INSTANCES}
    # Each instance's ExecStartPre (the schema is there: each run changes nothing).
    for n in INSTANCES:
        pre = run_cli(instance_argv("ExecStartPre", n, runtime_root)[1:], shared_env)
        assert pre.returncode == 0, pre.stderr
    workers = {}
    for n in INSTANCES:
        # /etc/gochatd/gochatd-worker-N.env: instance N reads queue wN only, so each
        # instance's share of the jobs is known.
        env = {**shared_env, "GOCHAT_WORKER_QUEUES": f"w{n}=1",
               "RUNTIME_DIRECTORY": str(directories[n])}
        argv = instance_argv("ExecStart", n, runtime_root)
        workers[n] = daemons.start(f"worker-{n}", argv[1:], env, ready=False)
    for n, worker in workers.items():
        worker.wait_ready("streams", timeout_s=60)
        socket_path = directories[n] / "admin.sock"
        event = worker.wait_for_event("admin_listening")
        assert event["address"] == f"unix:{socket_path}"
        mode = os.stat(socket_path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o660, oct(mode)
        status = admin_status(socket_path)
        assert status["admin_address"] == f"unix:{socket_path}"
        assert status["queues"] == {f"w{n}": 1}
    assert len({admin_status(directories[n] / "admin.sock")["worker_id"]
                for n in INSTANCES}) == len(INSTANCES)

    ids = enqueue_per_queue(pg_clean, redis_url)

    def ran_by() -> dict[int, set[int]] | None:
        with psycopg.connect(pg_clean, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT e.job_id, e.pid FROM test_executions e JOIN background_jobs j "
                "ON j.id = e.job_id WHERE j.status = 'completed'").fetchall()
        pids: dict[int, set[int]] = {}
        for job_id, pid in rows:
            pids.setdefault(int(job_id), set()).add(int(pid))
        return pids if len(pids) == len(INSTANCES) * JOBS_PER_INSTANCE else None

    pids = poll_until(ran_by, timeout_s=60, what="every instance's jobs completed")
    for n in INSTANCES:
        assert {pid for job in ids[n] for pid in pids[job]} == {workers[n].pid}

    for worker in workers.values():
        worker.send(signal.SIGTERM)
    for n, worker in workers.items():
        assert worker.wait(60) == 0, worker.output()
        assert not (directories[n] / "admin.sock").exists()
        worker.assert_clean_output()
