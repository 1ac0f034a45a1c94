"""The run's own redis-server: no persistence, so a restart loses every stream and group."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path


class RedisServer:
    def __init__(self, base: Path, port: int, binary: str | None = None) -> None:
        self.dir = base / "redis"
        self.port = port
        self.binary = binary or shutil.which("redis-server") or "redis-server"
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir), "--logfile", str(self.dir / "log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ping():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def kill(self) -> None:
        """SIGKILL: nothing is saved (there is no persistence anyway)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None

    def restart(self, down_s: float = 0.0) -> None:
        self.kill()
        if down_s > 0:
            time.sleep(down_s)  # the fault's own timing: Redis stays down this long
        self.start()
        self.restarts += 1

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def ping(self) -> bool:
        try:
            return self.command("PING").startswith(b"+PONG")
        except OSError:
            return False

    def command(self, *args: str) -> bytes:
        parts = [f"*{len(args)}\r\n".encode()]
        for a in args:
            data = a.encode()
            parts.append(f"${len(data)}\r\n".encode() + data + b"\r\n")
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(b"".join(parts))
            return s.recv(65536)

    def flushall(self) -> None:
        with contextlib.suppress(OSError):
            self.command("FLUSHALL")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
