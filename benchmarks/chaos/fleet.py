"""The fleet: K real ``gochatd`` processes (the venv's console script), each in its own
session, its JSON log in the scenario's work dir (one file per generation: a restarted
daemon starts a new one). The fleet remembers every death (pid, time, cause) so the
invariants can tell a killed handler from a lost one, and restarts daemons that exit on
their own (like systemd's ``Restart=on-failure``), counting those exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from benchmarks.chaos.wait import poll_until

REPO_ROOT = Path(__file__).resolve().parents[2]
_BIN = Path(sys.executable).parent / "gochatd"
GOCHATD = str(_BIN) if _BIN.exists() else (shutil.which("gochatd") or "gochatd")
HANDLERS = "benchmarks.chaos.handlers"
#: Restarted no more often than this, so a daemon that cannot start does not spin.
RESTART_BACKOFF_S = 1.0


@dataclass(frozen=True)
class Death:
    slot: int
    pid: int
    at: float  # wall clock, when the runner killed it or first saw it gone
    cause: str  # "sigkill", "sigterm", "exit:<code>"
    expected: bool


@dataclass(eq=False)
class Daemon:
    slot: int
    workdir: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    generation: int = 0
    logs: list[Path] = field(default_factory=list)
    _files: list[IO[bytes]] = field(default_factory=list)
    _scan: tuple[Path, int] | None = None
    ready: bool = False
    restart_at: float = 0.0
    held_down: bool = False  # stopped by the runner: not restarted by tick()

    @property
    def name(self) -> str:
        return f"w{self.slot}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self._close_files()
        self.held_down = False
        self.generation += 1
        log = self.workdir / f"{self.name}.{self.generation}.log"
        err = self.workdir / f"{self.name}.{self.generation}.err"
        out_f, err_f = log.open("wb"), err.open("wb")
        self._files = [out_f, err_f]
        self.logs.append(log)
        self.ready = False
        self._scan = (log, 0)
        self.proc = subprocess.Popen(
            [GOCHATD, "serve", "--worker-only", "--handlers", HANDLERS],
            env=self.env, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=err_f,
            stderr=out_f, start_new_session=True,  # the log is on stderr
        )

    def check_ready(self) -> bool:
        """Ready once the intake announced its dispatch mode (read incrementally)."""
        if self.ready or self._scan is None:
            return self.ready
        path, offset = self._scan
        try:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return False
        end = data.rfind(b"\n")
        if end < 0:
            return False
        self._scan = (path, offset + end + 1)
        if b'"dispatch_mode"' in data[:end]:
            self.ready = True
        return self.ready

    def signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def wait(self, timeout_s: float) -> int | None:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def kill_group(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        self._close_files()

    def _close_files(self) -> None:
        for f in self._files:
            f.close()
        self._files = []

    def stderr_texts(self) -> list[tuple[Path, str]]:
        out = []
        for log in self.logs:
            err = log.with_suffix(".err")
            with contextlib.suppress(OSError):
                out.append((err, err.read_text(errors="replace")))
        return out


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            yield event


class Fleet:
    def __init__(
        self,
        workdir: Path,
        count: int,
        base_env: Mapping[str, str],
        slot_env: Mapping[int, Mapping[str, str]] | None = None,
    ) -> None:
        self.workdir = workdir
        self.daemons: list[Daemon] = []
        for slot in range(count):
            env = dict(base_env)
            env["CHAOS_WORKER_NAME"] = f"w{slot}"
            env.update((slot_env or {}).get(slot, {}))
            self.daemons.append(Daemon(slot, workdir, env))
        self.deaths: list[Death] = []
        self.restarts = 0
        self.pids_seen: dict[int, int] = {}  # pid -> slot

    # -- starting --------------------------------------------------------------------------

    def start(self, slots: list[int] | None = None, *, ready_timeout_s: float = 30.0) -> None:
        chosen = list(range(len(self.daemons))) if slots is None else slots
        for slot in chosen:
            self._spawn(slot)
        self.wait_ready(chosen, ready_timeout_s)

    def _spawn(self, slot: int) -> None:
        daemon = self.daemons[slot]
        daemon.start()
        self.pids_seen[daemon.pid] = slot

    def wait_ready(self, slots: list[int], timeout_s: float = 30.0) -> None:
        def all_ready() -> bool:
            for slot in slots:
                daemon = self.daemons[slot]
                if not daemon.alive():
                    raise RuntimeError(
                        f"{daemon.name} exited ({daemon.proc.poll() if daemon.proc else None}) "
                        f"before it was ready:\n{self.tail(slot)}"
                    )
            return all(self.daemons[s].check_ready() for s in slots)

        poll_until(all_ready, timeout_s=timeout_s, what=f"daemons {slots} ready", interval_s=0.05)

    def restart(self, slot: int, *, ready_timeout_s: float = 30.0) -> None:
        self.restarts += 1
        self.start([slot], ready_timeout_s=ready_timeout_s)

    # -- faults ----------------------------------------------------------------------------

    def kill9(self, slot: int) -> Death:
        daemon = self.daemons[slot]
        pid = daemon.pid
        daemon.held_down = True
        daemon.signal(signal.SIGKILL)
        daemon.wait(10)
        death = Death(slot, pid, time.time(), "sigkill", expected=True)
        self.deaths.append(death)
        return death

    def terminate(self, slot: int, timeout_s: float = 30.0) -> tuple[Death, int | None]:
        """SIGTERM and wait for the exit code (None: still running at the deadline, then
        killed)."""
        daemon = self.daemons[slot]
        pid = daemon.pid
        daemon.held_down = True
        daemon.signal(signal.SIGTERM)
        code = daemon.wait(timeout_s)
        if code is None:
            daemon.kill_group()
        death = Death(slot, pid, time.time(), "sigterm", expected=True)
        self.deaths.append(death)
        return death, code

    def tick(self) -> None:
        """Notice daemons that exited on their own; restart them (with a backoff)."""
        now = time.monotonic()
        for daemon in self.daemons:
            if daemon.proc is None or daemon.held_down or daemon.alive():
                continue
            if not any(d.pid == daemon.pid for d in self.deaths):
                code = daemon.proc.poll()
                self.deaths.append(Death(daemon.slot, daemon.pid, time.time(), f"exit:{code}",
                                         expected=False))
                daemon.restart_at = max(now, daemon.restart_at)
            if now >= daemon.restart_at:
                daemon.restart_at = now + RESTART_BACKOFF_S
                self.restarts += 1
                self._spawn(daemon.slot)

    def stop_all(self, timeout_s: float = 30.0) -> dict[str, int | None]:
        """SIGTERM every live daemon at once; their exit codes by name."""
        live = [d for d in self.daemons if d.alive()]
        for daemon in self.daemons:
            daemon.held_down = True
        for daemon in live:
            daemon.signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        deadline = time.monotonic() + timeout_s
        for daemon in live:
            pid = daemon.pid
            code = daemon.wait(max(0.1, deadline - time.monotonic()))
            if code is None:
                daemon.kill_group()
            codes[f"{daemon.name}.{daemon.generation}"] = code
            self.deaths.append(Death(daemon.slot, pid, time.time(), "sigterm", expected=True))
        return codes

    def cleanup(self) -> None:
        for daemon in self.daemons:
            daemon.kill_group()

    # -- looking -------------------------------------------------------------------------------

    def pid(self, slot: int) -> int:
        return self.daemons[slot].pid

    def death_of(self, pid: int) -> Death | None:
        return next((d for d in self.deaths if d.pid == pid), None)

    def events(self, name: str, slot: int | None = None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for daemon in self.daemons:
            if slot is not None and daemon.slot != slot:
                continue
            for log in daemon.logs:
                out.extend(e for e in read_events(log) if e.get("event") == name)
        return out

    def unexpected_exits(self) -> list[Death]:
        return [d for d in self.deaths if not d.expected]

    def tail(self, slot: int, chars: int = 3000) -> str:
        daemon = self.daemons[slot]
        parts = []
        for log in daemon.logs[-1:]:
            with contextlib.suppress(OSError):
                parts.append(log.read_text(errors="replace")[-chars:])
            with contextlib.suppress(OSError):
                parts.append(log.with_suffix(".err").read_text(errors="replace")[-chars:])
        return "\n".join(parts)
