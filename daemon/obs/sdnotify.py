"""systemd's notify protocol over ``$NOTIFY_SOCKET`` (a datagram socket), without libsystemd.

READY=1 once serving, STATUS= lines, WATCHDOG=1 pings sent from the event loop itself (so a
wedged loop gets the process restarted), STOPPING=1 on drain and shutdown.

``NOTIFY_SOCKET`` is a filesystem path or, starting with ``@``, a name in the abstract
namespace. Sending never blocks and never raises: a full or missing socket drops the message
(``send`` returns False), as ``sd_notify(3)`` does.
"""

from __future__ import annotations

import os
import socket


class Notifier:
    def __init__(self, path: str | None = None) -> None:
        self.path = path if path is not None else os.environ.get("NOTIFY_SOCKET", "")
        usec = os.environ.get("WATCHDOG_USEC", "")
        pid = os.environ.get("WATCHDOG_PID", "")
        # systemd sets WATCHDOG_PID to the process it watches; an inherited value that names
        # another process (our parent, say) means the pings are not ours to send.
        owned = not pid or pid == str(os.getpid())
        #: Seconds between watchdog pings (half systemd's timeout), or None when disabled.
        self.watchdog_interval_s: float | None = (
            int(usec) / 2e6 if usec.isdigit() and int(usec) > 0 and owned else None
        )

    @property
    def enabled(self) -> bool:
        return bool(self.path)

    def send(self, **fields: str) -> bool:
        """One datagram of ``KEY=value`` lines. False when disabled or not delivered."""
        if not self.path:
            return False
        message = "\n".join(f"{k}={_one_line(v)}" for k, v in fields.items()).encode()
        address = "\0" + self.path[1:] if self.path.startswith("@") else self.path
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(address)
                # Never block the event loop on a receiver that is not reading.
                sock.send(message, socket.MSG_DONTWAIT)
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


def _one_line(value: str) -> str:
    # A newline would start a new assignment in the datagram.
    return " ".join(str(value).splitlines())
