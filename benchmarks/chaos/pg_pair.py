"""A scenario's own primary and streaming standby (``initdb``, ``pg_basebackup -R``), both
private clusters on free loopback ports, and the multi-host URL the daemons, the producer
and the recorder use: ``postgresql://u@127.0.0.1:P,127.0.0.1:S/db?target_session_attrs=
read-write``: libpq tries the hosts in order and keeps the first that accepts writes, so
after the primary dies and the standby is promoted every new connection finds the new
primary by itself.

``synchronous``: the primary lists the standby in ``synchronous_standby_names`` with
``synchronous_commit = on``: a commit returns once the standby has flushed it. Otherwise
the standby is asynchronous: a commit returns once the primary has it, and what was not
streamed yet when the primary dies is gone after the promotion.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.chaos.postgres import SUPERUSER, PgCluster
from benchmarks.chaos.redis_server import free_port

STANDBY_NAME = "chaos_standby"


class PgPair:
    def __init__(self, base: Path, *, synchronous: bool) -> None:
        self.synchronous = synchronous
        durable = {"fsync": "on", "synchronous_commit": "on", "wal_level": "replica",
                   "max_wal_senders": "4", "wal_sender_timeout": "5s",
                   "wal_receiver_status_interval": "1s"}
        self.primary = PgCluster(base, free_port(), name="pg-primary", settings=durable)
        self.standby = PgCluster(base, free_port(), name="pg-standby")
        self.promoted = False

    def start(self) -> None:
        self.primary.init()
        self.primary.start()
        self.primary.create_app_role()
        self.standby.basebackup(self.primary, STANDBY_NAME)
        self.standby.start()
        self.wait_streaming(30)
        if self.synchronous:
            self.primary.configure(f"synchronous_standby_names = '{STANDBY_NAME}'\n")
            self.primary.restart("fast")
            self.wait_streaming(30, state="sync")

    def wait_streaming(self, timeout_s: float, state: str | None = None) -> None:
        import psycopg

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with psycopg.connect(self.primary.url("postgres"), autocommit=True) as conn:
                row = conn.execute(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s",
                    [STANDBY_NAME]).fetchone()
            if row is not None and (state is None or row[0] == state):
                return
            time.sleep(0.1)
        raise RuntimeError(f"the standby is not streaming ({state or 'any'}) after {timeout_s}s")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.primary.stop()
        self.standby.stop()

    def url(self, dbname: str, user: str = SUPERUSER, port: int | None = None) -> str:
        hosts = f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
        return (f"postgresql://{user}@{hosts}/{dbname}?sslmode=disable"
                "&target_session_attrs=read-write&connect_timeout=2")

    def walsender_pid(self) -> int:
        import psycopg

        with psycopg.connect(self.primary.url("postgres"), autocommit=True) as conn:
            row = conn.execute("SELECT pid FROM pg_stat_replication WHERE application_name = %s",
                               [STANDBY_NAME]).fetchone()
        if row is None:
            raise RuntimeError("the primary has no WAL sender")
        return int(row[0])

    def kill_primary(self) -> list[int]:
        return self.primary.kill9()

    @contextlib.contextmanager
    def lagging(self) -> Iterator[None]:
        """The primary's WAL sender stopped (SIGSTOP) inside the block: the standby receives
        nothing, as behind a slow link or a busy disk; continued on the way out (a no-op
        once the primary was killed)."""
        pid = self.walsender_pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    def promote(self) -> None:
        self.standby.promote()
        self.promoted = True
