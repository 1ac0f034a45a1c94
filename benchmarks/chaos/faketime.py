"""libfaketime (Debian's ``faketime`` package) for the clock-jump scenarios: the process
(a daemon, a PostgreSQL server and its backends) is started with ``LD_PRELOAD`` and reads
its offset from a file that the runner rewrites, so the clock jumps while it runs. Only the
wall clock (``CLOCK_REALTIME``) moves: ``CLOCK_MONOTONIC`` is left alone, as when an
operator or NTP steps a host's clock."""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

#: The offset file's variable; the handlers read it to keep recording the real time.
OFFSET_FILE_ENV = "FAKETIME_TIMESTAMP_FILE"


def library() -> str:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    if not found:
        raise RuntimeError("libfaketime is required (apt-get install faketime)")
    return found[0]


def read_offset_s(path: str | Path) -> float:
    """The offset a faketime file sets ("+3600", "-3600", "+0": seconds)."""
    text = Path(path).read_text(encoding="ascii").strip() or "+0"
    return float(text)


class FakeClock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset_s = 0
        self.set(0)

    def env(self, *, exact: bool) -> dict[str, str]:
        """``exact``: read the file at every clock read (a PostgreSQL server: its audit
        trigger subtracts the offset it reads from the same file); otherwise at most once
        a second (a daemon: time is read often)."""
        cache = {"FAKETIME_NO_CACHE": "1"} if exact else {"FAKETIME_CACHE_DURATION": "1"}
        return {"LD_PRELOAD": library(), OFFSET_FILE_ENV: str(self.path),
                "FAKETIME_DONT_FAKE_MONOTONIC": "1", **cache}

    def set(self, offset_s: int) -> float:
        """Jump: the wall clock of every process reading the file is now ``offset_s`` off
        (within a second for a cached reader). Returns the real time of the jump."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"{offset_s:+d}\n", encoding="ascii")
        os.chmod(tmp, 0o644)
        os.replace(tmp, self.path)
        self.offset_s = offset_s
        return time.time()
