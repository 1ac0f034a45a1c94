"""Real ``gochatd`` processes for end-to-end tests: started with an explicit environment,
JSON log (stderr) redirected to a file, readiness read from that log, signals, kill -9 and
bounded waits. Nothing here sleeps to synchronise: every wait polls with a deadline."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

T = TypeVar("T")

REPO_ROOT = Path(__file__).resolve().parents[2]
_BIN = Path(sys.executable).parent / "gochatd"
#: The ``gochatd`` these helpers start, read when each one starts: the test virtualenv's
#: (editable) by default; tests/e2e switch it to a non-editable install of the checkout
#: (tests/support/installed.py), the command a user runs.
GOCHATD = str(_BIN) if _BIN.exists() else (shutil.which("gochatd") or "gochatd")


def gochatd_command() -> str:
    """The ``gochatd`` in use now (``GOCHATD`` as the running tier set it)."""
    return GOCHATD

#: Strings that must never show up in a daemon's or the CLI's output.
FORBIDDEN_OUTPUT = ("Traceback", "ClosedResourceError")


def poll_until(
    probe: Callable[[], T | None], *, timeout_s: float, what: str, interval_s: float = 0.05
) -> T:
    """Call ``probe`` until it returns something truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")
        time.sleep(interval_s)


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test process's environment without any GOCHAT_* variable, plus ``extra``.

    PYTHONPATH gets the repository root so ``--handlers tests.support.…`` imports."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOCHAT_")}
    env.pop("PYTHONPATH", None)
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    # Several daemons run at once: each admin server takes an ephemeral port.
    env["GOCHAT_ADMIN_LISTEN"] = "127.0.0.1:0"
    env.update(extra or {})
    return env


def run_cli(
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    cwd: Path | str = REPO_ROOT,
    timeout_s: float = 30.0,
) -> subprocess.CompletedProcess[str]:
    """Run ``gochatd ARGS`` to completion (killed at the deadline) and capture its output."""
    return subprocess.run(
        [GOCHATD, *args], env=child_env(env), cwd=cwd, capture_output=True, text=True,
        timeout=timeout_s, check=False, stdin=subprocess.DEVNULL,
    )


def assert_clean(text: str, who: str = "output") -> None:
    for bad in FORBIDDEN_OUTPUT:
        assert bad not in text, f"{who} contains {bad!r}:\n{text[-4000:]}"


class DaemonProcess:
    """One ``gochatd`` process. stderr (the JSON log) goes to ``<name>.log``, stdout (where
    the daemon prints nothing) to ``<name>.out``, both in ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        name: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        cwd: Path | str = REPO_ROOT,
    ) -> None:
        self.name = name
        self.args = [GOCHATD, *args]
        # Debug: the tests follow jobs by their ``job_completed`` lines (debug since issue 22).
        self.env = child_env({"GOCHAT_LOG_LEVEL": "debug", **(env or {})})
        self.cwd = cwd
        self.log_path = workdir / f"{name}.log"
        self.out_path = workdir / f"{name}.out"
        self.proc: subprocess.Popen[bytes] | None = None
        self._files: list[IO[bytes]] = []

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> DaemonProcess:
        assert self.proc is None, "already started"
        log = self.log_path.open("wb")
        out = self.out_path.open("wb")
        self._files = [log, out]
        self.proc = subprocess.Popen(
            self.args, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=out,
            stderr=log, start_new_session=True,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        assert self.proc is not None
        return self.proc.poll()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        """SIGKILL the daemon and reap it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def wait(self, timeout_s: float) -> int:
        """The exit code; fails the test if the process is still running at the deadline."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} did not exit within {timeout_s}s\n{self.output()[-4000:]}"
            ) from None

    def stop(self, timeout_s: float = 20.0) -> int:
        """SIGTERM and wait for the exit code."""
        self.send(signal.SIGTERM)
        return self.wait(timeout_s)

    def cleanup(self) -> None:
        """Kill whatever is left of the process group and close the log files."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for f in self._files:
            f.close()
        self._files = []

    # -- output ----------------------------------------------------------------------------

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def out_text(self) -> str:
        """What the process printed besides its log (stdout): nothing, for a daemon."""
        return self.out_path.read_text(encoding="utf-8", errors="replace") if self.out_path.exists() else ""

    #: The output that is not the log (the name predates the log's move to stderr).
    err_text = out_text

    def output(self) -> str:
        return (f"--- {self.name} log (stderr) ---\n{self.log_text()}"
                f"--- {self.name} stdout ---\n{self.out_text()}")

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """Parsed JSON log events (non-JSON lines are skipped), optionally of one name."""
        out: list[dict[str, Any]] = []
        for line in self.log_text().splitlines():
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line still being written
            if isinstance(event, dict) and (name is None or event.get("event") == name):
                out.append(event)
        return out

    def wait_for_event(
        self,
        name: str,
        predicate: Callable[[dict[str, Any]], bool] = lambda _e: True,
        *,
        count: int = 1,
        timeout_s: float = 20.0,
    ) -> dict[str, Any]:
        """The ``count``-th event called ``name`` that matches; fails early if the process
        exits first."""

        def probe() -> dict[str, Any] | None:
            found = [e for e in self.events(name) if predicate(e)]
            if len(found) >= count:
                return found[count - 1]
            if not self.alive():
                raise AssertionError(
                    f"{self.name} exited ({self.returncode}) before logging {name!r}\n"
                    f"{self.output()[-4000:]}"
                )
            return None

        return poll_until(probe, timeout_s=timeout_s, what=f"{self.name}: event {name!r}")

    def wait_ready(self, mode: str | None = None, timeout_s: float = 30.0) -> dict[str, Any]:
        """Ready: the intake announced its dispatch mode (``streams`` or ``polling``)."""
        return self.wait_for_event(
            "dispatch_mode", lambda e: mode is None or e.get("mode") == mode, timeout_s=timeout_s
        )

    def assert_clean_output(self) -> None:
        assert_clean(self.log_text(), f"{self.name} log")
        assert_clean(self.out_text(), f"{self.name} stdout")


class DaemonFactory:
    """Starts daemons for one test and kills every one still running at teardown."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[DaemonProcess] = []

    def start(
        self,
        name: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        cwd: Path | str = REPO_ROOT,
        ready: bool = True,
        mode: str | None = None,
    ) -> DaemonProcess:
        daemon = DaemonProcess(self.workdir, name, args, env, cwd=cwd)
        self.started.append(daemon)
        daemon.start()
        if ready:
            daemon.wait_ready(mode)
        return daemon

    def cleanup(self) -> None:
        for daemon in self.started:
            daemon.cleanup()
