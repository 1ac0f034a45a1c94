"""A pgbouncer process of our own (Debian's package; .ci/test installs it): transaction
pooling in front of a PostgreSQL server, on a free loopback port. The tests, the chaos
runner (scenario ``pgbouncer_restart``) and ``gochatd bench --pgbouncer`` use it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

BINARY_PATHS = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")


def pgbouncer_binary() -> str | None:
    found = os.environ.get("GOCHAT_TEST_PGBOUNCER") or shutil.which("pgbouncer")
    return found or next((p for p in BINARY_PATHS if Path(p).exists()), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgBouncer:
    """``pool_mode = transaction``, a small server pool (so consecutive transactions of one
    client land on different server connections), trust auth as the test server has. Any
    database name goes to the same server; ``users`` are the roles it lets in (the
    server URL's user always)."""

    def __init__(self, binary: str, server_url: str, *, pool_size: int = 4,
                 users: Sequence[str] = ()) -> None:
        self.binary = binary
        self.server = urlsplit(server_url)
        self.dbname = self.server.path.lstrip("/")
        self.user = self.server.username or "root"
        self.users = [self.user, *(u for u in users if u != self.user)]
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="gochatd-pgbouncer-"))
        self.pool_size = pool_size
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.url_for(self.dbname)

    def url_for(self, dbname: str, user: str | None = None) -> str:
        return f"postgresql://{user or self.user}@127.0.0.1:{self.port}/{dbname}"

    def _write_config(self) -> None:
        host, port = self.server.hostname, self.server.port or 5432
        (self.dir / "users.txt").write_text(
            "".join(f'"{u}" ""\n' for u in self.users), encoding="utf-8")
        (self.dir / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"{self.dbname} = host={host} port={port} dbname={self.dbname}\n"
            # Any other database name (a test's fresh one) goes to the same server.
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            f"unix_socket_dir = {self.dir}\n"
            "auth_type = trust\n"
            f"auth_file = {self.dir / 'users.txt'}\n"
            "pool_mode = transaction\nserver_round_robin = 1\n"
            f"default_pool_size = {self.pool_size}\nmin_pool_size = {self.pool_size}\n"
            "max_client_conn = 500\n"
            "ignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {self.dir / 'pgbouncer.log'}\n"
            f"pidfile = {self.dir / 'pgbouncer.pid'}\n",
            encoding="utf-8",
        )

    def start(self, timeout_s: float = 15.0) -> None:
        """Start it (again, on the same port after ``kill``) and wait until it answers."""
        self._write_config()
        argv = [self.binary, str(self.dir / "pgbouncer.ini")]
        if os.geteuid() == 0:  # pgbouncer refuses to run as root: it switches to nobody
            shutil.chown(self.dir, user="nobody")
            for name in ("users.txt", "pgbouncer.ini"):
                shutil.chown(self.dir / name, user="nobody")
            argv[1:1] = ["-u", "nobody"]
        self.proc = subprocess.Popen(argv,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
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

    def kill(self) -> None:
        """Stop it at once (SIGTERM: immediate shutdown, every connection cut)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
