"""One system of ``--scenario budget`` on the run's private servers: its database, its
worker processes, its producer child, the handler-start records and the job rows' claim
times. Blocking code: the scenario runs it on a worker thread."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psycopg

from benchmarks.bench.budget_env import PROBE, Servers
from benchmarks.chaos.redis_server import free_port
from gochatd.errors import GochatdError

REPO = Path(__file__).resolve().parents[2]
PROCS = 2  # worker processes, as the peers harness runs every system
CONCURRENCY = 100
PGQ_BATCH = 50
#: As daemon_process.py: the child asks for a SIGTERM when the bench dies.
_LAUNCH = ("import ctypes, signal, sys; ctypes.CDLL(None).prctl(1, signal.SIGTERM); "
           "from gochatd.cli.program import main; sys.exit(main())")


@dataclass(frozen=True)
class System:
    name: str  # streams | polling | pgqueuer
    python: str  # the interpreter of its workers and producer

    @property
    def gochatd(self) -> bool:
        return self.name != "pgqueuer"

    @property
    def redis(self) -> bool:
        return self.name == "streams"


class Running:
    """A system's workers and producer, started on a fresh database."""

    def __init__(self, servers: Servers, system: System, run_dir: Path, tag: str,
                 procs: int = PROCS, concurrency: int = CONCURRENCY) -> None:
        self.servers, self.system = servers, system
        self.database = f"budget_{system.name}_{tag}"
        self.url = servers.create_database(self.database)
        #: The bench's own reads of the tables, as a role of their own (budget_env.PROBE),
        #: so that the statement counts leave them out.
        self.probe_url = servers.pg.url(self.database, user=PROBE)
        self.records = run_dir / f"{self.database}.rec"
        self.log: IO[bytes] = (run_dir / f"{self.database}.log").open("ab")
        self.env = dict(os.environ, PYTHONPATH=str(REPO), BUDGET_RECORD_FILE=str(self.records),
                        BUDGET_PG_DSN=self.url, GOCHAT_LOG_LEVEL="warning")
        self.env = {k: v for k, v in self.env.items() if k != "VIRTUAL_ENV"}
        self.admin_ports: list[int] = []
        self.workers: list[subprocess.Popen[bytes]] = []
        self.producer: subprocess.Popen[str] | None = None
        self._setup()
        for _ in range(procs):
            self.workers.append(self._start_worker(concurrency))

    def _bin(self, tool: str) -> str:
        return str(Path(self.system.python).parent / tool)

    def _setup(self) -> None:
        if self.system.gochatd:
            cmd = [sys.executable, "-c", _LAUNCH, "db", "upgrade", "--database-url", self.url]
        else:
            cmd = [self._bin("pgq"), "--pg-dsn", self.url, "install"]
        subprocess.run(cmd, check=True, env=self.env, stdout=self.log, stderr=self.log)
        if not self.system.gochatd:
            subprocess.run([self._bin("pgq"), "--pg-dsn", self.url, "autovac"], check=True,
                           env=self.env, stdout=self.log, stderr=self.log)
        if self.system.redis:
            import redis

            client = redis.Redis.from_url(self.servers.redis.url)
            try:
                client.flushall()
            finally:
                client.close()

    def _start_worker(self, concurrency: int) -> subprocess.Popen[bytes]:
        if self.system.gochatd:
            port = free_port()
            self.admin_ports.append(port)
            cmd = [sys.executable, "-c", _LAUNCH, "serve", "--worker-only",
                   "--handlers", "benchmarks.bench.budget_handlers", "--queues", "default=1",
                   "--concurrency", str(concurrency), "--admin-listen", f"127.0.0.1:{port}",
                   "--database-url", self.url,
                   "--redis-url", self.servers.redis.url if self.system.redis else ""]
        else:
            cmd = [self._bin("pgq"), "run", "benchmarks.bench.budget_pgq:create_pgqueuer",
                   "--batch-size", str(PGQ_BATCH), "--log-level", "WARNING"]
        proc = subprocess.Popen(cmd, env=self.env, cwd=REPO, stdout=self.log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.servers.adopt(proc)
        return proc

    # -- the producer ----------------------------------------------------------------------

    def start_producer(self) -> None:
        args = [self.system.python, "-m", "benchmarks.bench.budget_producer",
                "gochatd" if self.system.gochatd else "pgqueuer", self.url]
        if self.system.redis:
            args.append(self.servers.redis.url)
        self.producer = subprocess.Popen(args, env=self.env, cwd=REPO, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.servers.adopt(self.producer)
        self._answer()  # "ready"

    def ask(self, command: str) -> Any:
        assert self.producer is not None and self.producer.stdin is not None
        self.producer.stdin.write(command + "\n")
        self.producer.stdin.flush()
        return self._answer()

    def _answer(self) -> Any:
        assert self.producer is not None and self.producer.stdout is not None
        line = self.producer.stdout.readline()
        if not line:
            raise GochatdError(f"bench budget: the {self.system.name} producer exited with "
                               f"{self.producer.wait()}; see {self.log.name}")
        return json.loads(line)

    # -- progress --------------------------------------------------------------------------

    def starts(self) -> dict[int, float]:
        """Handler start per job id (the first, if a job ran twice)."""
        out: dict[int, float] = {}
        if self.records.exists():
            for line in self.records.read_text().splitlines():
                job_id, at = line.split()
                out.setdefault(int(job_id), float(at))
        return out

    def wait_started(self, count: int, timeout_s: float) -> dict[int, float]:
        deadline = time.monotonic() + timeout_s
        while len(starts := self.starts()) < count:
            self.check_alive()
            if time.monotonic() > deadline:
                raise GochatdError(f"bench budget: {self.system.name}: {len(starts)} of {count} "
                                   f"jobs started after {timeout_s:.0f} s; see {self.log.name}")
            time.sleep(0.01)
        return starts

    def wait_finished(self, timeout_s: float) -> None:
        """Until no job of the table is waiting or running (the last finishes committed)."""
        sql = (b"SELECT count(*) FROM background_jobs WHERE status <> 'completed'"
               if self.system.gochatd else b"SELECT count(*) FROM pgqueuer")
        deadline = time.monotonic() + timeout_s
        with psycopg.connect(self.probe_url, autocommit=True) as conn:
            while (row := conn.execute(sql).fetchone()) and row[0]:
                self.check_alive()
                if time.monotonic() > deadline:
                    raise GochatdError(f"bench budget: {self.system.name}: {row[0]} jobs not "
                                       f"finished after {timeout_s:.0f} s")
                time.sleep(0.01)

    def check_alive(self) -> None:
        for proc in self.workers:
            if proc.poll() is not None:
                raise GochatdError(f"bench budget: a {self.system.name} worker exited with "
                                   f"{proc.returncode}; see {self.log.name}")

    def job_times(self, ids: list[int]) -> dict[int, tuple[float, float]]:
        """(INSERT, claim) per job on the database clock, each its transaction's now():
        gochatd's ``created_at`` and ``locked_at``, pgqueuer's 'queued' and 'picked' log
        rows."""
        sql = (b"SELECT id, extract(epoch FROM created_at)::float8, "
               b"extract(epoch FROM locked_at)::float8 FROM background_jobs WHERE id = ANY(%s)"
               if self.system.gochatd else
               b"SELECT job_id, extract(epoch FROM min(created) FILTER (WHERE status = 'queued'))"
               b"::float8, extract(epoch FROM min(created) FILTER (WHERE status = 'picked'))"
               b"::float8 FROM pgqueuer_log WHERE job_id = ANY(%s) GROUP BY job_id")
        with psycopg.connect(self.probe_url, autocommit=True) as conn:
            return {int(i): (float(c), float(t)) for i, c, t in conn.execute(sql, (ids,))
                    if c is not None and t is not None}

    def handoffs(self) -> dict[str, int]:
        """Units handed to connection threads, summed over the daemons (/v1/status)."""
        total: dict[str, int] = {}
        for port in self.admin_ports:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/status", timeout=10) as r:
                for name, n in json.load(r).get("handoffs", {}).items():
                    total[name] = total.get(name, 0) + int(n)
        return total

    def wait_status(self, mode: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        for port in self.admin_ports:
            while True:
                self.check_alive()
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/status",
                                                timeout=5) as r:
                        if json.load(r).get("mode") == mode:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise GochatdError(f"bench budget: a daemon not in {mode} mode after "
                                       f"{timeout_s:.0f} s; see {self.log.name}")
                time.sleep(0.05)

    # -- the end ---------------------------------------------------------------------------

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.producer is not None and self.producer.poll() is None:
            with contextlib.suppress(GochatdError, OSError, ValueError):
                self.ask("quit")
            try:
                self.producer.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.producer.kill()
                self.producer.wait()
        for proc in self.workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.workers:
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.log.close()
