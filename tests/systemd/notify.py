"""The receiving end of systemd's notify protocol, as PID 1 has it: a real AF_UNIX datagram
socket (a path or an abstract name) with SO_PASSCRED, so every message carries the sender's
pid. Waits poll the socket with deadlines; nothing sleeps to synchronise."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support.daemon_process import DaemonProcess

_UCRED = struct.Struct("iII")  # struct ucred: pid, uid, gid
#: sun_path holds 108 bytes including the terminating NUL.
_MAX_PATH = 107


@dataclass(frozen=True)
class Message:
    index: int
    at: float  # time.monotonic() when it was received
    pid: int  # the sender, from SCM_CREDENTIALS
    raw: str
    fields: dict[str, str]

    @property
    def status(self) -> str | None:
        return self.fields.get("STATUS")

    def has(self, key: str, value: str = "1") -> bool:
        return self.fields.get(key) == value


def is_ready(m: Message) -> bool:
    return m.has("READY")


def is_watchdog(m: Message) -> bool:
    return m.has("WATCHDOG")


def is_stopping(m: Message) -> bool:
    return m.has("STOPPING")


def is_status_only(m: Message) -> bool:
    return set(m.fields) == {"STATUS"}


class NotifyListener:
    """Bound on construction; ``address`` is the value for ``$NOTIFY_SOCKET``."""

    def __init__(self, address: str) -> None:
        self.address = address
        bind_to = "\0" + address[1:] if address.startswith("@") else address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.bind(bind_to)
        self.messages: list[Message] = []

    @classmethod
    def at_path(cls, directory: Path) -> NotifyListener:
        path = directory / "notify.sock"
        if len(str(path)) > _MAX_PATH:  # a very deep basetemp: fall back to a short name
            path = Path("/tmp") / f"gochatd-notify-{uuid.uuid4().hex[:12]}.sock"
        return cls(str(path))

    @classmethod
    def abstract(cls) -> NotifyListener:
        return cls(f"@gochatd-test/{uuid.uuid4().hex}")

    def close(self) -> None:
        self.sock.close()
        if not self.address.startswith("@"):
            with contextlib.suppress(FileNotFoundError):
                Path(self.address).unlink()

    # -- receiving --------------------------------------------------------------------------

    def _receive(self, timeout_s: float) -> Message | None:
        readable, _, _ = select.select([self.sock], [], [], max(0.0, timeout_s))
        if not readable:
            return None
        data, ancdata, _flags, _addr = self.sock.recvmsg(65536, socket.CMSG_SPACE(_UCRED.size))
        pid = -1
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid = _UCRED.unpack(payload[: _UCRED.size])[0]
        raw = data.decode("utf-8", errors="replace")
        fields: dict[str, str] = {}
        for line in raw.split("\n"):
            key, _, value = line.partition("=")
            if key:
                fields[key] = value
        message = Message(len(self.messages), time.monotonic(), pid, raw, fields)
        self.messages.append(message)
        return message

    def receive_pending(self) -> None:
        """Take in whatever is queued now, without waiting."""
        while self._receive(0.0) is not None:
            pass

    def wait_for(
        self,
        predicate: Callable[[Message], bool],
        *,
        what: str,
        after: int = -1,
        count: int = 1,
        timeout_s: float = 20.0,
        process: DaemonProcess | None = None,
    ) -> Message:
        """The ``count``-th message with index above ``after`` that matches ``predicate``.

        Fails at the deadline, or once ``process`` has exited and nothing is left queued."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = [m for m in self.messages[after + 1:] if predicate(m)]
            if len(found) >= count:
                return found[count - 1]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"timed out after {timeout_s}s waiting for {what}; received:\n{self.transcript()}"
                    + (f"\n{process.output()[-4000:]}" if process is not None else "")
                )
            if self._receive(min(remaining, 0.1)) is None and process is not None and not process.alive():
                self.receive_pending()
                found = [m for m in self.messages[after + 1:] if predicate(m)]
                if len(found) >= count:
                    return found[count - 1]
                raise AssertionError(
                    f"{process.name} exited ({process.returncode}) before {what}; received:\n"
                    f"{self.transcript()}\n{process.output()[-4000:]}"
                )

    def pump_until(self, condition: Callable[[], bool], *, what: str, timeout_s: float = 20.0) -> None:
        """Keep receiving (so receive times stay send times) until ``condition()`` holds."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"timed out after {timeout_s}s waiting for {what}; received:\n{self.transcript()}"
                )
            self._receive(min(remaining, 0.05))

    def collect_until_exit(self, process: DaemonProcess, timeout_s: float) -> int:
        """Keep receiving until ``process`` exits (its exit code), then take in the rest."""
        deadline = time.monotonic() + timeout_s
        while process.alive():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"{process.name} did not exit within {timeout_s}s; received:\n"
                    f"{self.transcript()}\n{process.output()[-4000:]}"
                )
            self._receive(min(remaining, 0.1))
        code = process.wait(5)
        self.receive_pending()
        return code

    def transcript(self, last: int = 60) -> str:
        return "\n".join(
            f"  #{m.index} +{m.at - self.messages[0].at:.3f}s pid={m.pid} {m.raw!r}"
            for m in self.messages[-last:]
        )
