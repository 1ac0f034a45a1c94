"""The command line at its edges, as a user meets them: a PostgreSQL that refuses, hangs or
comes up late, Ctrl-C while waiting, a Redis URL naming a database the server lacks, Redis
down during an enqueue (stdout stays one JSON document), the library inside someone else's
program (it prints nothing of its own), and the common flags on either side of the
subcommand."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gochatd.client.client import Client
from gochatd.errors import StoreUnavailable
from tests.support.daemon_process import (
    DaemonFactory,
    assert_clean,
    child_env,
    gochatd_command,
    run_cli,
)
from tests.support.redis_server import free_port

SECRET = "s3cret-pw-77"


def _sqlite(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'gochatd.db'}"
    done = run_cli(["db", "upgrade", "--database-url", url], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return url


def _one_line(result: subprocess.CompletedProcess[str], code: int, expect: str) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gochatd: "), result.stderr
    assert expect in lines[0], lines[0]
    assert SECRET not in result.stderr
    assert_clean(result.stderr, "stderr")
    return lines[0]


# -- PostgreSQL that is not there --------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expect"),
    [
        (f"postgresql://root:{SECRET}@127.0.0.1:{{closed}}/test",
         "cannot connect to PostgreSQL at 127.0.0.1:{closed}: connection refused"),
        (f"postgresql://root:{SECRET}@127.0.0.1:5432/gochatd_no_such_db",
         'cannot connect to PostgreSQL at 127.0.0.1:5432: database "gochatd_no_such_db" does '
         "not exist"),
        (f"postgresql://gochatd_no_such_role:{SECRET}@127.0.0.1:5432/test",
         "cannot connect to PostgreSQL at 127.0.0.1:5432: "),
    ],
    ids=["refused", "no-database", "no-role"],
)
@pytest.mark.parametrize("command", [["jobs", "list"], ["enqueue", "sys:noop"], ["db", "upgrade"]],
                         ids=["list", "enqueue", "db-upgrade"])
def test_unreachable_postgres_is_one_line_exit_1(
    tmp_path: Path, url: str, expect: str, command: list[str]
) -> None:
    closed = str(free_port())
    url, expect = url.replace("{closed}", closed), expect.replace("{closed}", closed)
    started = time.monotonic()
    result = run_cli([*command, "--database-url", url], cwd=tmp_path)
    assert time.monotonic() - started < 10  # no retry loop in a command
    _one_line(result, 1, expect)


async def test_the_client_open_names_the_servers_reason() -> None:
    url = f"postgresql://root:{SECRET}@127.0.0.1:5432/gochatd_no_such_db"
    with pytest.raises(StoreUnavailable) as info:
        async with Client(url):
            pass
    assert str(info.value) == ('cannot connect to PostgreSQL at 127.0.0.1:5432: database '
                               '"gochatd_no_such_db" does not exist')


def _default_sigint() -> None:
    """In the child: SIGINT's default action, as a terminal gives it. A suite started in the
    background of a non-interactive shell inherits SIGINT ignored (POSIX), and Python keeps an
    ignored SIGINT ignored, so Ctrl-C would never reach the command under test."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def _silent_server() -> Iterator[tuple[socket.socket, int]]:
    """A TCP listener that accepts and never answers: a hung "PostgreSQL"."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(20)
        yield listener, listener.getsockname()[1]


@pytest.mark.parametrize("command", [["jobs", "list"], ["enqueue", "sys:noop"], ["serve"]],
                         ids=["list", "enqueue", "serve"])
def test_ctrl_c_while_waiting_for_postgres(tmp_path: Path, command: list[str]) -> None:
    with _silent_server() as (listener, port):
        url = f"postgresql://root:{SECRET}@127.0.0.1:{port}/test"
        proc = subprocess.Popen(
            [gochatd_command(), *command, "--database-url", url], env=child_env(), cwd=tmp_path,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=_default_sigint,
        )
        try:
            conn, _ = listener.accept()  # the process is now waiting for the server
            with conn:
                proc.send_signal(signal.SIGINT)
                out, err = proc.communicate(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)  # closes the pipes, also after a timed-out wait
    assert proc.returncode == 130, (proc.returncode, err)
    assert out == ""
    if command == ["serve"]:  # the daemon's signal watcher: its log says why it stopped
        events = [json.loads(line)["event"] for line in err.splitlines()]
        assert events == ["stop_requested_while_starting", "worker_stopped"], err
    else:
        assert err.splitlines() in ([], ["gochatd: interrupted"]), err
    assert SECRET not in err


class _Forwarder:
    """A TCP port forwarded to PostgreSQL, opened when the test says: PostgreSQL "comes up"
    on a port the daemon has been failing to reach."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.port, self.target = port, target
        self._listener = socket.socket()
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []

    def start(self) -> None:
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", self.port))
        self._listener.listen()
        self._listener.settimeout(0.2)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for sock in self._sockets:
            sock.close()


def test_serve_waits_for_postgres_with_backoff(
    tmp_path: Path, daemons: DaemonFactory, pg_migrated: str
) -> None:
    port = free_port()
    late = pg_migrated.replace("127.0.0.1:5432", f"127.0.0.1:{port}")
    assert late != pg_migrated
    env = {"GOCHAT_DATABASE_URL": late, "GOCHAT_LOG_FORMAT": "json"}
    daemon = daemons.start("late-pg", ["--worker-only"], env=env, cwd=tmp_path, ready=False)
    failed = daemon.wait_for_event("store_connect_failed", count=3, timeout_s=30)
    attempts = daemon.events("store_connect_failed")
    assert [e["retry_in_s"] for e in attempts[:3]] == [0.5, 1.0, 2.0]
    assert failed["error"] == f"cannot connect to PostgreSQL at 127.0.0.1:{port}: connection refused"
    assert daemon.out_text() == ""  # the log is on stderr; stdout stays empty
    forwarder = _Forwarder(port, ("127.0.0.1", 5432))
    forwarder.start()
    try:
        daemon.wait_ready(timeout_s=30)
        connected = daemon.events("store_connected")
        assert len(connected) == 1 and connected[0]["attempts"] >= 4
        assert daemon.stop() == 0
    finally:
        forwarder.close()
    daemon.assert_clean_output()


def test_sigterm_while_waiting_for_postgres_exits_cleanly(
    tmp_path: Path, daemons: DaemonFactory, pg_migrated: str
) -> None:
    """PostgreSQL never comes up (a closed port): SIGHUP changes nothing, SIGTERM (what
    systemd sends) ends the start with a log line and exit 0, not the signal's default
    death. Ctrl-C keeps its own exit (130, above)."""
    late = pg_migrated.replace("127.0.0.1:5432", f"127.0.0.1:{free_port()}")
    env = {"GOCHAT_DATABASE_URL": late, "GOCHAT_LOG_FORMAT": "json"}
    daemon = daemons.start("never-pg", ["--worker-only"], env=env, cwd=tmp_path, ready=False)
    daemon.wait_for_event("store_connect_failed", count=1, timeout_s=30)
    daemon.send(signal.SIGHUP)
    daemon.wait_for_event("store_connect_failed", count=3, timeout_s=30)
    assert daemon.returncode is None  # SIGHUP did not end it
    daemon.send(signal.SIGTERM)
    assert daemon.wait(timeout_s=20) == 0
    assert daemon.events("stop_requested_while_starting")[0]["signal"] == "SIGTERM"
    assert daemon.events("worker_stopped")[0]["before_start"] is True
    daemon.assert_clean_output()


def test_sigterm_while_a_silent_postgres_holds_the_connect(tmp_path: Path) -> None:
    """The server accepts and never answers: the connect in progress is abandoned too."""
    with _silent_server() as (listener, port):
        url = f"postgresql://root:{SECRET}@127.0.0.1:{port}/test"
        proc = subprocess.Popen(
            [gochatd_command(), "serve", "--database-url", url], env=child_env(), cwd=tmp_path,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            conn, _ = listener.accept()
            with conn:
                proc.send_signal(signal.SIGTERM)
                out, err = proc.communicate(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)  # closes the pipes, also after a timed-out wait
    assert proc.returncode == 0, (proc.returncode, err)
    assert out == "" and SECRET not in err
    assert "stop_requested_while_starting" in err and "Traceback" not in err


def test_serve_refuses_a_database_without_the_schema(
    tmp_path: Path, fresh_pg_url: str
) -> None:
    result = run_cli(["--worker-only"], {"GOCHAT_DATABASE_URL": fresh_pg_url}, cwd=tmp_path)
    line = _one_line(result, 2, "no gochatd schema in postgresql://")
    assert line.endswith("run 'gochatd db upgrade' or start with --upgrade")


def test_serve_logs_the_absolute_sqlite_path(tmp_path: Path, daemons: DaemonFactory) -> None:
    env = {"GOCHAT_DATABASE_URL": "sqlite:///relative.db", "GOCHAT_LOG_FORMAT": "json"}
    daemon = daemons.start("relative", ["--worker-only"], env=env, cwd=tmp_path)
    [starting] = daemon.events("worker_starting")
    assert starting["database_file"] == str(tmp_path / "relative.db")
    assert daemon.stop() == 0


# -- Redis --------------------------------------------------------------------------------------


def test_redis_db_index_out_of_range_is_the_users_url(tmp_path: Path, redis_url: str) -> None:
    url = _sqlite(tmp_path)
    bad = redis_url.rpartition("/")[0] + "/99"
    enq = run_cli(["enqueue", "sys:noop", "--database-url", url, "--redis-url", bad],
                  cwd=tmp_path)
    _one_line(enq, 2, "redis_url: the Redis server has no database with that index")
    listed = run_cli(["jobs", "list", "--json", "--database-url", url], cwd=tmp_path)
    assert json.loads(listed.stdout) == []  # refused before anything was written
    serve = run_cli(["--worker-only", "--database-url", url, "--redis-url", bad], cwd=tmp_path)
    _one_line(serve, 2, "DB index is out of range")


def test_enqueue_with_redis_down_prints_one_json_document(tmp_path: Path) -> None:
    url = _sqlite(tmp_path)
    down = f"redis://127.0.0.1:{free_port()}/0"
    result = run_cli(["enqueue", "sys:noop", "--database-url", url, "--redis-url", down],
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    job = json.loads(result.stdout)  # the whole of stdout is one document
    assert job["status"] == "queued"  # durable: the sweep dispatches it later
    # Redis did not answer the client's check: no XADD is tried, one warning on stderr.
    assert '"event": "redis_unavailable"' in result.stderr
    assert_clean(result.stderr, "stderr")


LIBRARY_USER = """
import sys
import trio
import gochatd

async def main() -> None:
    async with gochatd.Client(sys.argv[1], sys.argv[2]) as client:
        job = await client.enqueue("sys:noop", {"n": 1})
        job = await client.get_job(job.id)
    print(f"my program enqueued {job.id}")

trio.run(main)
"""


def test_the_library_prints_nothing_into_its_hosts_output(tmp_path: Path) -> None:
    url = _sqlite(tmp_path)
    down = f"redis://127.0.0.1:{free_port()}/0"
    program = tmp_path / "producer.py"
    program.write_text(LIBRARY_USER)
    done = subprocess.run([sys.executable, str(program), url, down], env=child_env(),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "my program enqueued 1\n"
    assert "debug" not in done.stderr.lower() and "info" not in done.stderr.lower()
    # What the host configured nothing for: the one warning, on stderr.
    assert done.stderr.count("\n") <= 1 and "redis_unavailable" in done.stderr


# -- the common flags --------------------------------------------------------------------------


def test_common_flags_before_or_after_the_subcommand(tmp_path: Path) -> None:
    first = _sqlite(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    second = _sqlite(other)
    enq = run_cli(["--database-url", first, "enqueue", "sys:noop"], cwd=tmp_path)
    assert enq.returncode == 0, enq.stderr
    # Both given: the one after the subcommand wins.
    listed = run_cli(["--database-url", first, "jobs", "list", "--json", "--database-url",
                      second], cwd=tmp_path)
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stderr
    listed = run_cli(["--database-url=" + first, "jobs", "list", "--json"], cwd=tmp_path)
    assert [j["id"] for j in json.loads(listed.stdout)] == [json.loads(enq.stdout)["id"]]


def test_a_common_flag_first_still_means_serve(tmp_path: Path, daemons: DaemonFactory) -> None:
    url = f"sqlite:///{tmp_path / 'alone.db'}"
    daemon = daemons.start("alone", ["--database-url", url, "--worker-only"],
                           env={"GOCHAT_LOG_FORMAT": "json"}, cwd=tmp_path)
    assert daemon.events("worker_starting")[0]["database_file"] == str(tmp_path / "alone.db")
    assert daemon.stop() == 0


def test_periodic_list_reads_no_clock_from_a_database_that_is_not_there(tmp_path: Path) -> None:
    env = {"GOCHAT_PERIODIC": '{"a:b": {"cron": "* * * * *"}}'}
    result = run_cli(["periodic", "list", "--json", "--database-url", "sqlite:///none/x.db"],
                     env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["clock"] == "local"
    assert list(tmp_path.iterdir()) == []  # neither the file nor its directory was made
