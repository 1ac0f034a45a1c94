"""A private PostgreSQL cluster whose data directory (WAL included) is on a small tmpfs of
its own (``mount -t tmpfs``: needs root), and a ballast file that fills that filesystem to
the last byte and is removed again: a disk that fills up while the server runs. The mount
is undone on every way out (stop)."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from pathlib import Path

from benchmarks.chaos.postgres import PgCluster
from benchmarks.chaos.redis_server import free_port

SIZE_MB = 160


class DiskCluster(PgCluster):
    def __init__(self, base: Path, size_mb: int = SIZE_MB) -> None:
        self.mount_point = base / "pg-disk" / "mnt"
        self.size_mb = size_mb
        self.mounted = False
        super().__init__(base, free_port(), name="pg-disk", data=self.mount_point / "data")
        self.ballast = self.mount_point / "ballast"

    def start(self) -> None:
        if os.geteuid() != 0:
            raise RuntimeError("a tmpfs mount needs root")
        self.mount_point.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0755",
                        "chaos-pg-disk", str(self.mount_point)], check=True,
                       capture_output=True, timeout=30)
        self.mounted = True
        self.init()
        super().start()
        self.create_app_role()

    def stop(self, mode: str = "immediate") -> None:
        try:
            self.release()
            super().stop(mode)
        finally:
            if self.mounted:
                proc = subprocess.run(["umount", str(self.mount_point)], capture_output=True,
                                      timeout=30, check=False)
                if proc.returncode != 0:  # something still holds it: detach it
                    subprocess.run(["umount", "-l", str(self.mount_point)],
                                   capture_output=True, timeout=30, check=False)
                self.mounted = False

    def fill(self) -> int:
        """Write the ballast until the filesystem refuses (ENOSPC): the bytes written."""
        chunk = b"\0" * (1 << 20)
        written = 0
        with self.ballast.open("wb", buffering=0) as f:
            while True:
                try:
                    written += f.write(chunk) or 0
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
            with contextlib.suppress(OSError):  # the last partial MiB, byte pages at a time
                small = b"\0" * 4096
                while True:
                    written += f.write(small) or 0
        return written

    def release(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.ballast.unlink()

    def free_bytes(self) -> int:
        st = os.statvfs(self.mount_point)
        return st.f_bavail * st.f_frsize
