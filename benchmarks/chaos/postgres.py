"""The run's private PostgreSQL cluster: initdb on a free port, started and restarted with
pg_ctl, stopped and removed at the end. One cluster serves every scenario of a run; each
scenario gets a fresh database.

Two roles: ``chaos`` (the superuser that initdb creates; the runner and the handlers'
execution recorder use it, so they keep working in superuser-reserved slots when the
daemons exhaust the others) and ``gochat`` (an ordinary role: the daemons, through the
fault proxy, and the handlers' own connections).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Protocol

import psycopg

SUPERUSER = "chaos"
APP_ROLE = "gochat"
MAX_CONNECTIONS = 100
RESERVED = 10  # superuser_reserved_connections: the runner and the recorder always get in

_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{sockdir}'
max_connections = {max_connections}
superuser_reserved_connections = {reserved}
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 64MB
log_min_messages = warning
log_connections = off
"""


class ClusterLike(Protocol):
    """What a scenario's database lives on: the run's cluster, or a scenario's own
    (a primary and its standby; a cluster on a small disk; one under faketime)."""

    def url(self, dbname: str, user: str = SUPERUSER, port: int | None = None) -> str: ...


def find_bindir() -> Path:
    """``CHAOS_PG_BINDIR``, else the newest /usr/lib/postgresql/*/bin, else ``pg_config``."""
    explicit = os.environ.get("CHAOS_PG_BINDIR")
    if explicit:
        return Path(explicit)
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        versions = sorted(
            (p for p in root.iterdir() if (p / "bin" / "initdb").exists()),
            key=lambda p: int(p.name) if p.name.isdigit() else 0,
        )
        if versions:
            return versions[-1] / "bin"
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True)
        return Path(out.stdout.strip())
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise RuntimeError("PostgreSQL binaries not found (set CHAOS_PG_BINDIR)")


class PgCluster:
    """``name`` names its directory under ``base``; ``settings`` are appended to its
    postgresql.conf (the last setting wins); ``env`` is added to the server's environment
    (``LD_PRELOAD`` of libfaketime: scenario db_clock_jump)."""

    def __init__(self, base: Path, port: int, bindir: Path | None = None, *, name: str = "pg",
                 settings: dict[str, str] | None = None, env: dict[str, str] | None = None,
                 data: Path | None = None) -> None:
        self.base = base / name
        self.data = data or self.base / "data"
        self.logfile = self.base / "postgres.log"
        self.port = port
        self.bindir = bindir or find_bindir()
        self.settings = settings or {}
        self.env = env or {}
        self.running = False
        self.restarts = 0

    # -- commands (as the postgres OS user when we are root) ----------------------------------

    def _as_owner(self, args: list[str]) -> list[str]:
        if os.geteuid() == 0:
            return ["runuser", "-u", "postgres", "--", *args]
        return args

    def _run(self, args: list[str], timeout_s: float = 60.0) -> None:
        if self.env:  # runuser resets the environment: env(1) sets it again
            args = ["env", *(f"{k}={v}" for k, v in self.env.items()), *args]
        proc = subprocess.run(
            self._as_owner(args), capture_output=True, text=True, timeout=timeout_s,
            stdin=subprocess.DEVNULL, start_new_session=True, check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}\n"
                f"{self.log_tail()}"
            )

    def _chown(self, path: Path) -> None:
        if os.geteuid() == 0:
            shutil.chown(path, "postgres", "postgres")

    def init(self, *initdb_args: str) -> None:
        self._prepare_dirs()
        self._run([str(self.bindir / "initdb"), "-D", str(self.data), "-U", SUPERUSER,
                   "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C", *initdb_args],
                  timeout_s=120)
        conf = _CONF.format(port=self.port, sockdir=self.base, max_connections=MAX_CONNECTIONS,
                            reserved=RESERVED)
        self.configure(conf)

    def _prepare_dirs(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self._chown(self.base)
        os.chmod(self.base.parent, 0o755)  # postgres must traverse the run's temp dir
        if self.data.parent != self.base and self.data.parent.exists():
            self._chown(self.data.parent)

    def configure(self, text: str = "") -> None:
        """Append ``text`` and this cluster's own ``settings`` to its postgresql.conf."""
        extra = "".join(f"{k} = {v}\n" for k, v in self.settings.items())
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as f:
            f.write(text + extra)

    def basebackup(self, primary: PgCluster, application_name: str) -> None:
        """This cluster becomes a streaming standby of ``primary`` (``pg_basebackup``, then
        standby.signal; primary_conninfo names ``application_name``, the name
        ``synchronous_standby_names`` lists)."""
        self._prepare_dirs()
        self._run([str(self.bindir / "pg_basebackup"), "-D", str(self.data), "-h", "127.0.0.1",
                   "-p", str(primary.port), "-U", SUPERUSER, "-X", "stream", "--no-sync"],
                  timeout_s=120)
        self._run(["touch", str(self.data / "standby.signal")])
        conninfo = (f"host=127.0.0.1 port={primary.port} user={SUPERUSER} "
                    f"application_name={application_name}")
        self.configure(f"port = {self.port}\nunix_socket_directories = '{self.base}'\n"
                       f"primary_conninfo = '{conninfo}'\nsynchronous_standby_names = ''\n")

    def promote(self) -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60",
                   "promote"])

    def kill9(self) -> list[int]:
        """SIGKILL the postmaster and every process it started (a host that died: nothing
        is shut down, nothing flushed). The pids killed."""
        pid = self.postmaster_pid()
        if pid is None:
            return []
        pids = [pid, *_children(pid)]
        for p in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.02)
        self.running = False
        return pids

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def start(self) -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.logfile),
                   "-w", "-t", "60", "start"])
        self.running = True
        self.wait_accepting(30)

    def restart(self, mode: str = "fast") -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.logfile),
                   "-m", mode, "-w", "-t", "60", "restart"])
        self.restarts += 1
        self.wait_accepting(30)

    def stop(self, mode: str = "immediate") -> None:
        if not self.running and self.postmaster_pid() is None:
            return
        with contextlib.suppress(Exception):
            self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w",
                       "-t", "30", "stop"])
        self.running = False

    def create_app_role(self) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN")

    # -- addresses -------------------------------------------------------------------------

    def url(self, dbname: str, user: str = SUPERUSER, port: int | None = None) -> str:
        return f"postgresql://{user}@127.0.0.1:{port or self.port}/{dbname}?sslmode=disable"

    def wait_accepting(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.url("postgres"), connect_timeout=2):
                    return
            except psycopg.Error as exc:
                last = exc
            time.sleep(0.05)
        raise RuntimeError(f"PostgreSQL did not accept connections in {timeout_s}s: {last}")

    def is_in_recovery(self) -> bool:
        with psycopg.connect(self.url("postgres"), connect_timeout=2, autocommit=True) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            return bool(row and row[0])

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.logfile.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
