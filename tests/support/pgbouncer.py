"""A pgbouncer process owned by a test: transaction pooling in front of the test server,
on a free loopback port (Debian's package; .ci/test installs it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

from tests.support.redis_server import free_port

BINARY_PATHS = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")


def pgbouncer_binary() -> str | None:
    found = os.environ.get("GOCHAT_TEST_PGBOUNCER") or shutil.which("pgbouncer")
    return found or next((p for p in BINARY_PATHS if Path(p).exists()), None)


class PgBouncer:
    """``pool_mode = transaction``, a small server pool (so consecutive transactions of one
    client land on different server connections), trust auth as the test server has."""

    def __init__(self, binary: str, server_url: str, *, pool_size: int = 4) -> None:
        self.binary = binary
        self.server = urlsplit(server_url)
        self.dbname = self.server.path.lstrip("/")
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="gochatd-pgbouncer-"))
        self.pool_size = pool_size
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        user = self.server.username or "root"
        return f"postgresql://{user}@127.0.0.1:{self.port}/{self.dbname}"

    def start(self) -> None:
        user = self.server.username or "root"
        (self.dir / "users.txt").write_text(f'"{user}" ""\n', encoding="utf-8")
        (self.dir / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"{self.dbname} = host={self.server.hostname} port={self.server.port or 5432}"
            f" dbname={self.dbname}\n"
            # Any other database name (a test's fresh one) goes to the same server.
            f"* = host={self.server.hostname} port={self.server.port or 5432}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            f"unix_socket_dir = {self.dir}\n"
            "auth_type = trust\n"
            f"auth_file = {self.dir / 'users.txt'}\n"
            "pool_mode = transaction\nserver_round_robin = 1\n"
            f"default_pool_size = {self.pool_size}\nmin_pool_size = {self.pool_size}\n"
            "max_client_conn = 200\n"
            "ignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {self.dir / 'pgbouncer.log'}\n"
            f"pidfile = {self.dir / 'pgbouncer.pid'}\n",
            encoding="utf-8",
        )
        argv = [self.binary, str(self.dir / "pgbouncer.ini")]
        if os.geteuid() == 0:  # pgbouncer refuses to run as root: it switches to nobody
            shutil.chown(self.dir, user="nobody")
            for name in ("users.txt", "pgbouncer.ini"):
                shutil.chown(self.dir / name, user="nobody")
            argv[1:1] = ["-u", "nobody"]
        self.proc = subprocess.Popen(argv,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while True:
            try:
                psycopg.connect(self.url, connect_timeout=2).close()
                self._warm()
                return
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = (self.dir / "pgbouncer.log")
                    raise RuntimeError("pgbouncer did not start: " + (
                        log.read_text(encoding="utf-8")[-2000:] if log.exists() else "")
                    ) from None
                time.sleep(0.05)

    def _warm(self) -> None:
        """Open every server connection now (transactions held at once need one each): with
        server_round_robin, a client's consecutive transactions then take turns on them."""
        clients = [psycopg.connect(self.url, connect_timeout=5) for _ in range(self.pool_size)]
        try:
            for conn in clients:
                conn.execute("SELECT 1")  # opens a transaction: holds a server connection
            for conn in clients:
                conn.commit()  # back to the pool, idle (closing mid-transaction drops it)
        finally:
            for conn in clients:
                conn.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)
