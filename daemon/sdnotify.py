"""systemd's notify protocol over ``$NOTIFY_SOCKET`` (a datagram socket), without libsystemd.

READY=1 once serving, STATUS= lines, WATCHDOG=1 pings sent from the event loop itself (so a
wedged loop gets the process restarted), STOPPING=1 on drain and shutdown.
"""

from __future__ import annotations

import os
import socket


class Notifier:
    def __init__(self, path: str | None = None) -> None:
        self.path = path if path is not None else os.environ.get("NOTIFY_SOCKET", "")
        usec = os.environ.get("WATCHDOG_USEC", "")
        pid = os.environ.get("WATCHDOG_PID", "")
        owned = not pid or pid == str(os.getpid())
        #: Seconds between watchdog pings (half systemd's timeout), or None when disabled.
        self.watchdog_interval_s: float | None = (
            int(usec) / 2e6 if usec.isdigit() and int(usec) > 0 and owned else None
        )

    @property
    def enabled(self) -> bool:
        return bool(self.path)

    def send(self, **fields: str) -> bool:
        if not self.path:
            return False
        message = "\n".join(f"{k}={v}" for k, v in fields.items()).encode()
        address = "\0" + self.path[1:] if self.path.startswith("@") else self.path
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(address)
                sock.sendall(message)
        except OSError:
            return False
        return True

    def ready(self, status: str) -> None:
        self.send(READY="1", STATUS=status)

    def status(self, status: str) -> None:
        self.send(STATUS=status)

    def watchdog(self) -> None:
        self.send(WATCHDOG="1")

    def stopping(self, status: str) -> None:
        self.send(STOPPING="1", STATUS=status)
