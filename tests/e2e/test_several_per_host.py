"""Several daemons on one host: the README's multi-worker command started twice, an
ephemeral admin port, and the admin API on a Unix socket (mode 0660, a stale file from a
killed daemon replaced, a live one refused in one line, the file removed on exit)."""

from __future__ import annotations

import os
import re
import shlex
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.daemon_process import (
    REPO_ROOT,
    DaemonFactory,
    DaemonProcess,
    poll_until,
    run_cli,
)
from tests.support.e2e_jobs import enqueue_many, status_counts
from tests.support.unix_admin import admin_status

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def readme_worker_command() -> list[str]:
    """The ``gochatd --worker-only …`` line of "Running several workers", as written."""
    start = README.index("\n## Running several workers against PostgreSQL + Redis\n")
    block = re.compile(r"```sh\n(.*?)```", re.S).search(README, start)
    assert block is not None
    text = block.group(1).replace("\\\n", " ")
    [line] = [line for line in text.splitlines() if line.startswith("gochatd --worker-only")]
    argv = shlex.split(line.split("#")[0])
    assert "myapp.jobs" in argv
    # The README's handler module is the reader's; the test's records its executions.
    return [("tests.support.recording_handlers" if a == "myapp.jobs" else a) for a in argv[1:]]


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory whose socket paths fit the kernel's 107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="gs-", dir="/tmp"))
    try:
        yield path
    finally:
        for child in path.iterdir():
            child.unlink()
        path.rmdir()


@pytest.mark.slow
def test_the_readme_worker_command_twice_on_one_host(
    pg_jobs: str, redis_url: str, daemons: DaemonFactory
) -> None:
    """"Start as many as you like": both serve, each on the admin port it was given, which
    /v1/status reports; the jobs complete; SIGTERM exits 0."""
    args = readme_worker_command()
    env = {"GOCHAT_DATABASE_URL": pg_jobs, "GOCHAT_REDIS_URL": redis_url}
    workers = []
    for name in ("first", "second"):
        worker = DaemonProcess(daemons.workdir, name, args, env)
        worker.env.pop("GOCHAT_ADMIN_LISTEN")  # the harness' own; the README sets none
        daemons.started.append(worker)
        workers.append(worker.start())
    addresses = []
    for worker in workers:
        worker.wait_ready("streams", timeout_s=60)
        address = str(worker.wait_for_event("admin_listening")["address"])
        port = urlsplit(address).port
        assert urlsplit(address).hostname == "127.0.0.1" and port, address
        status = httpx.get(f"{address}/v1/status", timeout=10, trust_env=False).json()
        assert status["admin_address"] == address and status["mode"] == "streams"
        addresses.append(address)
    assert addresses[0] != addresses[1]

    enqueue_many(pg_jobs, "test:record", [{} for _ in range(20)], redis_url)
    poll_until(lambda: status_counts(pg_jobs) == {"completed": 20}, timeout_s=60,
               what="20 jobs completed")
    for worker in workers:
        assert worker.stop(60) == 0, worker.output()
        worker.assert_clean_output()


@pytest.mark.slow
def test_the_admin_api_on_a_unix_socket(
    sqlite_url: str, short_dir: Path, tmp_path: Path, daemons: DaemonFactory
) -> None:
    sock = short_dir / "w1.sock"
    env = {"GOCHAT_DATABASE_URL": sqlite_url, "GOCHAT_ADMIN_LISTEN": f"unix:{sock}"}
    first = daemons.start("first", ["--worker-only"], env, cwd=tmp_path)
    assert first.wait_for_event("admin_listening")["address"] == f"unix:{sock}"
    mode = os.stat(sock).st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o660, oct(mode)
    assert admin_status(sock)["admin_address"] == f"unix:{sock}"

    # A second daemon on the same socket: one line, exit 2, and the first keeps its file.
    second = run_cli(["--worker-only"], env, cwd=tmp_path)
    assert second.returncode == 2, second.stderr
    assert [line for line in second.stderr.splitlines() if line.startswith("gochatd:")] == [
        f"gochatd: admin.listen: unix:{sock} is already in use (another gochatd on this "
        "host?); set admin.listen (GOCHAT_ADMIN_LISTEN) to a socket of its own, for example "
        "unix:/run/gochatd/worker-2.sock"], second.stderr
    assert "Traceback" not in second.stdout + second.stderr
    assert admin_status(sock)["worker_id"] == admin_status(sock)["worker_id"]

    # Killed, the daemon leaves its socket file: the next one replaces it.
    first.kill9()
    assert stat.S_ISSOCK(os.stat(sock).st_mode)
    third = daemons.start("third", ["--worker-only"], env, cwd=tmp_path)
    status = admin_status(sock)
    assert status["admin_address"] == f"unix:{sock}" and status["mode"] == "polling"
    assert third.stop(60) == 0, third.output()
    assert not sock.exists()
    third.assert_clean_output()


def test_a_file_that_is_not_a_socket_is_left_alone(
    sqlite_url: str, short_dir: Path, tmp_path: Path
) -> None:
    taken = short_dir / "notes.txt"
    taken.write_text("mine", encoding="utf-8")
    env = {"GOCHAT_DATABASE_URL": sqlite_url, "GOCHAT_ADMIN_LISTEN": f"unix:{taken}"}
    result = run_cli(["--worker-only"], env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("gochatd:")] == [
        f"gochatd: admin.listen: {taken} exists and is not a socket; remove it or set "
        "admin.listen to another path"], result.stderr
    assert taken.read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize("listen", ["unix:", "unix:/" + "x" * 200 + ".sock"])
def test_a_bad_socket_path_is_one_line(listen: str, tmp_path: Path) -> None:
    result = run_cli(["config", "check", "--admin-listen", listen],
                     {"GOCHAT_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}, cwd=tmp_path)
    assert result.returncode == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "admin.listen" in lines[0] and "unix:PATH" in lines[0], lines


def test_a_missing_socket_directory_is_one_line(sqlite_url: str, tmp_path: Path) -> None:
    listen = f"unix:{tmp_path}/absent/w.sock"
    env = {"GOCHAT_DATABASE_URL": sqlite_url, "GOCHAT_ADMIN_LISTEN": listen}
    result = run_cli(["--worker-only"], env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("gochatd:")] == [
        f"gochatd: admin.listen: cannot listen on {listen}: No such file or directory"]


def test_a_taken_gateway_port_is_one_line(sqlite_url: str, tmp_path: Path) -> None:
    """gateway.listen on a port something else holds: the same one line as admin.listen."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = {"GOCHAT_DATABASE_URL": sqlite_url, "GOCHAT_GATEWAY_LISTEN": f"127.0.0.1:{port}"}
        result = run_cli(["serve"], env, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert [line for line in result.stderr.splitlines() if line.startswith("gochatd:")] == [
        f"gochatd: gateway.listen: 127.0.0.1:{port} is already in use (another gochatd on this "
        "host?); set gateway.listen (GOCHAT_GATEWAY_LISTEN) to a free port, 127.0.0.1:0 for "
        "any, or off"], result.stderr
    assert "Traceback" not in result.stdout + result.stderr
