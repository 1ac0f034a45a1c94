"""Every entry point as a user starts it, with the installed command (a non-editable
install, tests/support/installed.py): a handler module per runtime started with
``gochatd --handlers`` and stopped with SIGTERM or Ctrl-C, a third signal, output piped into
``head``, a misspelt variable, a Redis that is down (issue 23)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gochatd.client.sync_client import SyncClient
from tests.support import daemon_process, installed
from tests.support.daemon_process import (
    DaemonFactory,
    DaemonProcess,
    child_env,
    poll_until,
    run_cli,
)
from tests.support.e2e_jobs import query
from tests.support.redis_server import RedisServer, free_port

#: One module per runtime, as a user writes them: each runs its job on its own runtime
#: (and says so by failing otherwise), and waits for the test's release file when asked.
HANDLERS = {
    "trio": '''
        import os
        import trio
        import gochatd

        @gochatd.job("demo:trio")
        async def on_trio(ctx: gochatd.JobContext) -> None:
            trio.lowlevel.current_trio_token()  # raises outside Trio
            while "wait_for" in ctx.payload and not os.path.exists(ctx.payload["wait_for"]):
                await trio.sleep(0.05)
    ''',
    "asyncio": '''
        import asyncio
        import os
        import gochatd

        @gochatd.job("demo:asyncio", runtime="asyncio")
        async def on_asyncio(ctx: gochatd.JobContext) -> None:
            asyncio.get_running_loop()  # raises outside asyncio
            await asyncio.sleep(0)
            while "wait_for" in ctx.payload and not os.path.exists(ctx.payload["wait_for"]):
                await asyncio.sleep(0.05)
    ''',
    "thread": '''
        import os
        import threading
        import time
        import gochatd

        @gochatd.job("demo:thread")
        def on_thread(ctx: gochatd.JobContext) -> None:
            if threading.current_thread() is threading.main_thread():
                raise gochatd.NonRetryable("ran on the main thread")
            while "wait_for" in ctx.payload and not os.path.exists(ctx.payload["wait_for"]):
                time.sleep(0.05)
    ''',
}

#: A handler that ignores its cancellation: only a third signal ends its daemon.
STUBBORN = '''
    import trio
    import gochatd

    @gochatd.job("demo:stubborn")
    async def stubborn(ctx: gochatd.JobContext) -> None:
        with trio.CancelScope(shield=True):
            await trio.sleep(600)
'''


def _project(tmp_path: Path, modules: dict[str, str]) -> Path:
    """A user's project directory holding handler modules (imported from the cwd)."""
    project = tmp_path / "project"
    project.mkdir()
    for name, source in modules.items():
        (project / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    return project


def _enqueue(project: Path, job_type: str, payload: dict[str, Any] | None = None) -> int:
    result = run_cli(["enqueue", job_type, "--payload", json.dumps(payload or {})], cwd=project)
    assert result.returncode == 0, result.stderr
    return int(json.loads(result.stdout)["id"])


def _status(project: Path, job_id: int) -> str | None:
    rows = query(f"sqlite:///{project / 'gochatd.db'}",
                 "SELECT status FROM background_jobs WHERE id = %s", (job_id,))
    return str(rows[0][0]) if rows else None


def _wait_status(project: Path, job_id: int, status: str, daemon: DaemonProcess) -> None:
    def probe() -> bool:
        assert daemon.alive(), daemon.output()[-4000:]
        return _status(project, job_id) == status

    poll_until(probe, timeout_s=60, what=f"job {job_id} {status}")


def test_the_tier_runs_the_installed_command() -> None:
    """Not the checkout's editable install: the wheel's files in a virtualenv of its own."""
    assert daemon_process.gochatd_command() == str(installed.VENV / "bin" / "gochatd")
    where = subprocess.run(
        [str(installed.python()), "-c", "import gochatd, gochatd.sql; "
         "print(gochatd.__file__); print(gochatd.sql.__file__)"],
        env=child_env(), capture_output=True, text=True, timeout=60, check=True)
    for line in where.stdout.splitlines():
        path = Path(line).resolve()
        assert path.is_relative_to(installed.VENV.resolve()), path
        assert "site-packages" in path.parts, path
    version = run_cli(["--version"])
    assert (version.returncode, version.stdout.startswith("gochatd ")) == (0, True)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
@pytest.mark.parametrize("runtime", list(HANDLERS))
def test_a_handler_module_of_each_runtime_runs_and_stops_cleanly(
    tmp_path: Path, daemons: DaemonFactory, runtime: str, sig: signal.Signals
) -> None:
    """``gochatd --handlers mymod`` in the project directory (the README's way, on the
    embedded SQLite default): its jobs run; a signal lets the one in flight finish, exit 0."""
    module = f"{runtime}_jobs"
    project = _project(tmp_path, {module: HANDLERS[runtime]})
    daemon = daemons.start(runtime, ["--handlers", module], {"GOCHAT_LOG_FORMAT": "json"},
                           cwd=project)
    job_type = f"demo:{runtime}"
    quick = [_enqueue(project, job_type) for _ in range(3)]
    for job_id in quick:
        _wait_status(project, job_id, "completed", daemon)
    release = tmp_path / "release"
    held = _enqueue(project, job_type, {"wait_for": str(release)})
    _wait_status(project, held, "running", daemon)
    daemon.send(sig)
    daemon.wait_for_event("worker_draining", timeout_s=30)
    release.touch()  # the handler in flight finishes within the grace
    assert daemon.wait(timeout_s=60) == 0, daemon.output()[-4000:]
    assert _status(project, held) == "completed"
    assert daemon.events("worker_stopped")[-1]["forced"] is False
    daemon.assert_clean_output()


def test_one_daemon_runs_all_three_runtimes(tmp_path: Path, daemons: DaemonFactory) -> None:
    modules = {f"{runtime}_jobs": source for runtime, source in HANDLERS.items()}
    project = _project(tmp_path, modules)
    daemon = daemons.start("mixed", ["--handlers", ",".join(modules)],
                           {"GOCHAT_LOG_FORMAT": "json"}, cwd=project)
    ids = [_enqueue(project, f"demo:{runtime}") for runtime in HANDLERS for _ in range(2)]
    for job_id in ids:
        _wait_status(project, job_id, "completed", daemon)
    assert daemon.stop(timeout_s=60) == 0
    daemon.assert_clean_output()


def test_ctrl_c_three_times_exits_1_even_with_a_stubborn_handler(
    tmp_path: Path, daemons: DaemonFactory
) -> None:
    """1st: stop claiming, 2nd: interrupt now, 3rd: abandon (exit 1, not a death by the
    signal). The handler ignores its cancellation, so only the third ends the process."""
    project = _project(tmp_path, {"stubborn_jobs": STUBBORN})
    daemon = daemons.start("stubborn", ["--handlers", "stubborn_jobs"],
                           {"GOCHAT_LOG_FORMAT": "json"}, cwd=project)
    job_id = _enqueue(project, "demo:stubborn")
    _wait_status(project, job_id, "running", daemon)
    for event in ("worker_draining", "worker_stop_now", "worker_stop_abandoned"):
        daemon.send(signal.SIGINT)
        daemon.wait_for_event(event, timeout_s=30)
    assert daemon.wait(timeout_s=30) == 1
    assert daemon.events("worker_exit_forced"), daemon.output()[-4000:]
    daemon.assert_clean_output()


# -- stdout into a pipe whose reader left ---------------------------------------------------


def _sqlite_with_jobs(tmp_path: Path, n: int) -> str:
    url = f"sqlite:///{tmp_path / 'many.db'}"
    upgraded = run_cli(["db", "upgrade", "--database-url", url], cwd=tmp_path)
    assert upgraded.returncode == 0, upgraded.stderr
    with SyncClient(url) as client:
        client.enqueue_many([{"job_type": "sys:noop", "payload": {"n": i}} for i in range(n)])
    return url


def _piped(args: Sequence[str], reader: Sequence[str], cwd: Path) -> tuple[int, str, str]:
    """``gochatd ARGS | READER``: gochatd's exit code and stderr, the reader's output."""
    err_path = cwd / "piped.err"
    with err_path.open("wb") as err:
        writer = subprocess.Popen([daemon_process.gochatd_command(), *args], env=child_env(),
                                  cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=err)
        assert writer.stdout is not None
        with writer.stdout:  # after head, the reader's end is head's alone, and it left
            head = subprocess.run(list(reader), stdin=writer.stdout, capture_output=True,
                                  timeout=60, check=False)
        code = writer.wait(60)
    return code, err_path.read_text(), head.stdout.decode()


def test_jobs_list_piped_into_head_stops_quietly(tmp_path: Path) -> None:
    """Far more output than a pipe holds: gochatd is still writing when head leaves."""
    url = _sqlite_with_jobs(tmp_path, 5000)
    code, err, out = _piped(["jobs", "list", "--database-url", url], ["head", "-2"], tmp_path)
    assert out.split()[:6] == ["ID", "STATUS", "QUEUE", "TENANT", "ATT", "JOB"]
    assert len(out.splitlines()) == 2
    assert (code, err) == (141, ""), (code, err[-3000:])


@pytest.mark.parametrize("command", [
    ["jobs", "list"], ["jobs", "list", "--json"], ["jobs", "show", "1"],
    ["jobs", "show", "1", "--json"], ["enqueue", "sys:noop"], ["jobs", "prune", "--dry-run"],
    ["migrate", "status", "--from", "{url}"], ["config", "check"], ["periodic", "list"],
    ["outbox", "list"], ["gateway", "hash-key", "--generate"], ["--version"], ["--help"],
], ids=lambda c: " ".join(c).replace("{url}", "URL"))
def test_every_command_writing_stdout_stops_quietly_when_its_reader_left(
    tmp_path: Path, command: list[str]
) -> None:
    """``| head -1`` after head already left: a pipe whose read end is closed. Exit 141
    (128 + SIGPIPE, as git and coreutils), nothing on stderr."""
    url = f"sqlite:///{tmp_path / 'one.db'}"
    assert run_cli(["db", "upgrade", "--database-url", url], cwd=tmp_path).returncode == 0
    assert run_cli(["enqueue", "sys:noop", "--database-url", url], cwd=tmp_path).returncode == 0
    args = [a.replace("{url}", url) for a in command]
    env = child_env({"GOCHAT_DATABASE_URL": url})
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run([daemon_process.gochatd_command(), *args], env=env,
                                cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=write_end,
                                stderr=subprocess.PIPE, timeout=60, check=False, text=True)
    finally:
        os.close(write_end)
    # argparse prints --help and --version itself and drops a write error: exit 0, as quiet.
    expected = 0 if command[0] in ("--help", "--version") else 141
    assert (result.returncode, result.stderr) == (expected, ""), result.stderr[-3000:]


# -- what a user is told at start -----------------------------------------------------------


def test_a_misspelt_variable_is_named_with_its_close_match(
    tmp_path: Path, daemons: DaemonFactory
) -> None:
    env = {"GOCHAT_WORKER_CONCURENCY": "5", "GOCHAT_LOG_FORMAT": "json"}
    daemon = daemons.start("typo", [], env, cwd=tmp_path)
    [warning] = daemon.events("unknown_env_ignored")
    assert warning["variable"] == "GOCHAT_WORKER_CONCURENCY"
    assert warning["did_you_mean"] == "GOCHAT_WORKER_CONCURRENCY"
    assert warning["level"] == "warning"
    checked = run_cli(["config", "check"], env, cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.splitlines()[-1] == (
        "# warning: unknown GOCHAT_ variables ignored: GOCHAT_WORKER_CONCURENCY "
        "(did you mean GOCHAT_WORKER_CONCURRENCY?)")
    assert daemon.stop() == 0


def _get_json(address: str, path: str) -> Any:
    with urllib.request.urlopen(f"{address}{path}", timeout=10) as response:
        return json.loads(response.read())


def _metric(address: str, name: str) -> float:
    with urllib.request.urlopen(f"{address}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_a_redis_that_is_down_is_said_counted_and_shown(
    tmp_path: Path, daemons: DaemonFactory, redis_binary: str
) -> None:
    """Ready but degraded: jobs run (polling); the log warns with the masked address and
    backs off; the counter counts; /readyz and /v1/status say why. Redis comes up: streams."""
    port = free_port()
    secret = "redis-pw-23"
    env = {"GOCHAT_REDIS_URL": f"redis://:{secret}@127.0.0.1:{port}/1",
           "GOCHAT_LOG_FORMAT": "json"}
    daemon = daemons.start("no-redis", [], env, cwd=tmp_path, mode="polling")
    address = daemon.wait_for_event("admin_listening")["address"]
    first = daemon.wait_for_event("redis_unavailable")
    masked = f"redis://:***@127.0.0.1:{port}/1"
    assert (first["redis"], first["level"], first["next_warning_in_s"]) == (masked, "warning", 5.0)
    second = daemon.wait_for_event("redis_unavailable", count=2, timeout_s=60)
    assert second["next_warning_in_s"] == 10.0 and second["failures"] >= 1
    ready = _get_json(address, "/readyz")
    assert (ready["status"], ready["dispatch"]) == ("ready", "polling")
    assert ready["degraded"].startswith(f"polling the database: Redis at {masked} does not answer")
    assert _get_json(address, "/v1/status")["degraded"] == ready["degraded"]
    assert _metric(address, "gochatd_redis_errors_total") >= 2
    job_id = _enqueue(tmp_path, "sys:noop")  # jobs still run
    poll_until(lambda: _status(tmp_path, job_id) == "completed", timeout_s=60, what="job ran")

    redis = RedisServer(redis_binary, port)
    redis.start()
    try:
        daemon.wait_for_event("redis_available", timeout_s=60)
        daemon.wait_ready("streams", timeout_s=60)
        assert _get_json(address, "/readyz")["degraded"] is None
        assert daemon.stop() == 0
    finally:
        redis.stop()
    assert secret not in daemon.log_text()
    daemon.assert_clean_output()

