"""The servers and meters of ``--scenario budget``: a private PostgreSQL cluster and a private
redis-server for the run (so every backend, statement and Redis command counted is the run's
own), and the readings taken around a measured window.

PostgreSQL runs with the durable defaults (fsync, synchronous_commit and full_page_writes on)
plus ``pg_stat_statements``; the cluster is initdb'ed in a temporary directory and removed at
the end (benchmarks/chaos/postgres.py does the initdb and pg_ctl).

Readings (``Meter.read``): CPU (utime + stime, /proc/<pid>/stat) of each process given, of
the PostgreSQL backends of one database (the postmaster's children whose title names it,
found in /proc/<pid>/task/<pid>/children) and of the server's own processes; voluntary +
involuntary context switches of the daemons' threads; pg_stat_statements calls and execution
time per statement; INFO commandstats of the private Redis."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.chaos.postgres import PgCluster
from benchmarks.chaos.redis_server import RedisServer, free_port
from gochatd.errors import DispatchUnavailable, StoreUnavailable

_TICKS = os.sysconf("SC_CLK_TCK")
#: The role of the bench's own reads of a system's tables (left out of the counts).
PROBE = "budget_probe"
_DURABLE = """
fsync = on
synchronous_commit = on
full_page_writes = on
shared_preload_libraries = 'pg_stat_statements'
pg_stat_statements.max = 1000
max_connections = 200
"""


def cpu_s(pid: int) -> float:
    """utime + stime of a process (all its threads) in seconds; 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def switches(pid: int) -> int:
    """Context switches (voluntary + involuntary) of every thread of a process: each hand-off
    to a thread and each wake-up of a loop costs at least one."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            text = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except OSError:
            continue
        total += sum(int(n) for n in re.findall(r"ctxt_switches:\s+(\d+)", text))
    return total


class Servers:
    """The run's PostgreSQL cluster and redis-server; ``close`` stops and removes both."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="gochatd-bench-budget-")
        base = Path(self._tmp.name)
        self.pg = PgCluster(base, free_port())
        self.redis = RedisServer(base, 0)  # its port is chosen in start()
        self.children: list[subprocess.Popen[Any]] = []
        self.closed = False
        self._lock = threading.Lock()

    def start(self) -> None:
        """initdb and start PostgreSQL, then a redis-server on a port free at that moment
        (another process may take a free port before we bind it: a few tries)."""
        try:
            self.pg.init()
            with (self.pg.data / "postgresql.conf").open("a", encoding="utf-8") as f:
                f.write(_DURABLE)  # later lines win over chaos's fast, non-durable settings
            self.pg.start()
            with psycopg.connect(self.pg.url("postgres"), autocommit=True) as conn:
                conn.execute(b"CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.execute(f"CREATE ROLE {PROBE} LOGIN SUPERUSER".encode())
        except (OSError, RuntimeError, subprocess.SubprocessError, psycopg.Error) as exc:
            raise StoreUnavailable(f"bench budget: could not start a PostgreSQL cluster: "
                                   f"{str(exc).strip().splitlines()[0][:200]}") from None
        for attempt in range(3):
            self.redis.port = free_port()
            try:
                self.redis.start(timeout_s=30.0)
                return
            except RuntimeError as exc:
                self.redis.stop()
                if attempt == 2:
                    raise DispatchUnavailable(f"bench budget: {exc}") from None

    @property
    def postmaster(self) -> int:
        return int((self.pg.data / "postmaster.pid").read_text().split()[0])

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.pg.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        return self.pg.url(name)

    def adopt(self, proc: subprocess.Popen[Any]) -> None:
        """A worker or producer of the run: killed by ``close`` if still running then."""
        self.children.append(proc)

    def close(self) -> None:
        """Stop everything of the run (idempotent; also from another thread on Ctrl-C,
        while the measuring thread may still be using it: its next call fails)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
        try:
            self.redis.stop()
            self.pg.stop("fast")
        finally:
            self._tmp.cleanup()


@dataclass
class Reading:
    cpu: dict[str, float] = field(default_factory=dict)  # role -> CPU seconds
    switches: dict[str, int] = field(default_factory=dict)
    statements: dict[str, tuple[int, float]] = field(default_factory=dict)  # query -> calls, ms
    probe_calls: int = 0  # statements of the bench's own role (each its own transaction)
    redis: dict[str, int] = field(default_factory=dict)  # command -> calls


class Meter:
    """Readings of one system's processes; ``pids`` maps a role (``daemons``, ``producer``,
    ``redis``) to its process ids."""

    def __init__(self, servers: Servers, database: str, pids: dict[str, list[int]],
                 use_redis: bool) -> None:
        self.servers = servers
        self.database = database
        self.pids = pids
        self.use_redis = use_redis
        self._titles: dict[int, str] = {}

    def _pg_children(self) -> list[tuple[int, str]]:
        pm = self.servers.postmaster
        try:
            kids = Path(f"/proc/{pm}/task/{pm}/children").read_text().split()
        except OSError:
            return []
        out = []
        for kid in map(int, kids):
            title = self._titles.get(kid)
            if title is None:
                try:
                    title = Path(f"/proc/{kid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                if title.startswith("postgres: "):  # a child just forked shows the parent's
                    self._titles[kid] = title
            out.append((kid, title))
        return out

    def pg_backend_pids(self) -> list[int]:
        return [pid for pid, title in self._pg_children() if f" {self.database} " in title]

    def read(self) -> Reading:
        r = Reading()
        for role, pids in self.pids.items():
            r.cpu[role] = sum(cpu_s(p) for p in pids)
            r.switches[role] = sum(switches(p) for p in pids)
        children = self._pg_children()
        r.cpu["pg_backends"] = sum(cpu_s(p) for p, t in children if f" {self.database} " in t)
        r.cpu["pg_server"] = cpu_s(self.servers.postmaster) + sum(
            cpu_s(p) for p, t in children if " root " not in t and "chaos" not in t)
        r.statements, r.probe_calls = self._statements()
        if self.use_redis:
            assert self.servers.redis.proc is not None
            r.cpu["redis"] = cpu_s(self.servers.redis.proc.pid)
            r.redis = self._commandstats()
        return r

    def _statements(self) -> tuple[dict[str, tuple[int, float]], int]:
        with psycopg.connect(self.servers.pg.url("postgres"), autocommit=True) as conn:
            rows = conn.execute(
                b"SELECT r.rolname = %s, s.query, sum(s.calls)::bigint, "
                b"sum(s.total_exec_time)::float8 "
                b"FROM pg_stat_statements AS s JOIN pg_database AS d ON d.oid = s.dbid "
                b"JOIN pg_roles AS r ON r.oid = s.userid "
                b"WHERE d.datname = %s GROUP BY 1, 2", (PROBE, self.database)).fetchall()
        probe = sum(int(c) for is_probe, _, c, _ in rows if is_probe)
        return {q: (int(c), float(t)) for is_probe, q, c, t in rows if not is_probe}, probe

    def _commandstats(self) -> dict[str, int]:
        import redis

        client = redis.Redis.from_url(self.servers.redis.url)
        try:
            stats: dict[str, Any] = client.info("commandstats")
        finally:
            client.close()
        return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}

    def after_exit(self, timeout_s: float = 30.0) -> tuple[int, int]:
        """``xacts`` once every backend of the database has exited (and so reported its
        counts), and the probe's statements until then."""
        deadline = time.monotonic() + timeout_s
        while self.pg_backend_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.xacts(), self.read().probe_calls

    def xacts(self) -> int:
        """Committed + rolled-back transactions of the database so far (pg_stat_database:
        a backend reports its counts at most once a second, and at exit)."""
        with psycopg.connect(self.servers.pg.url("postgres"), autocommit=True) as conn:
            row = conn.execute(b"SELECT xact_commit + xact_rollback FROM pg_stat_database "
                               b"WHERE datname = %s", (self.database,)).fetchone()
        return int(row[0]) if row else 0
