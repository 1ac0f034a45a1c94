"""One scenario's database on the private cluster: created fresh (owned by the ``gochat``
role), migrated with gochatd's own migrations, instrumented, filled through gochatd's
``Client`` (the real enqueue path: INSERT, then XADD), read back by the runner over its own
superuser connection, and dropped.

Instrumentation (the runner's, not the daemon's):

- ``chaos_executions``  one row per handler execution (``benchmarks.chaos.recorder``);
- ``chaos_effects``     the handlers' real writes: ``applied`` per job;
- ``chaos_transitions`` an audit trigger on ``background_jobs``: every insert and every
  change of status or fence, with the row's fence, attempts, owner, error class,
  ``scheduled_at`` and the database clock. This is how the invariants see every claim,
  every accepted completion and every reap, whoever made them;
- ``chaos_releases``    every release of a held job (a dependent, a batch callback, a
  chain link: its due time leaving 9999-12-31), numbered in the transitions' order.

Both audit tables keep each row's transaction id (``txid``): which finish released which
callback.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
import trio
from psycopg.types.json import Jsonb

from benchmarks.chaos.postgres import APP_ROLE, ClusterLike
from benchmarks.chaos.recorder import EXECUTIONS_TABLE
from gochatd.client.client import Client
from gochatd.store import open_store

TERMINAL = ("completed", "dead", "cancelled")
GHOST_OWNER = "chaos-ghost:0:lease"

_RECORD = [
    EXECUTIONS_TABLE,
    "CREATE INDEX ON chaos_executions (job_id)",
    "CREATE INDEX ON chaos_executions (pid) WHERE ended_at IS NULL",
]

_INSTRUMENT = [
    """CREATE TABLE chaos_effects (
        job_id bigint PRIMARY KEY,
        applied integer NOT NULL
    )""",
    """CREATE TABLE chaos_transitions (
        id bigserial PRIMARY KEY,
        job_id bigint NOT NULL,
        old_status text,
        new_status text NOT NULL,
        fence bigint NOT NULL,
        attempts integer NOT NULL,
        locked_by text,
        error_class text,
        scheduled_at double precision NOT NULL,
        lease_expires_at double precision,
        at double precision NOT NULL,
        txid bigint NOT NULL DEFAULT txid_current()
    )""",
    """CREATE FUNCTION chaos_audit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO chaos_transitions (job_id, old_status, new_status, fence, attempts,
                                       locked_by, error_class, scheduled_at,
                                       lease_expires_at, at)
        VALUES (NEW.id, CASE WHEN TG_OP = 'UPDATE' THEN OLD.status END, NEW.status,
                NEW.fence, NEW.attempts, NEW.locked_by, NEW.error_class,
                extract(epoch FROM NEW.scheduled_at), extract(epoch FROM NEW.lease_expires_at),
                extract(epoch FROM clock_timestamp()));
        RETURN NULL;
    END
    $$""",
    """CREATE TRIGGER chaos_audit_insert AFTER INSERT ON background_jobs
        FOR EACH ROW EXECUTE FUNCTION chaos_audit()""",
    """CREATE TRIGGER chaos_audit_update AFTER UPDATE OF status, fence ON background_jobs
        FOR EACH ROW
        WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.fence IS DISTINCT FROM NEW.fence)
        EXECUTE FUNCTION chaos_audit()""",
    # Releases of held jobs (a dependent's due time leaving 9999-12-31), numbered from the
    # transitions' sequence: one order for every audited event.
    """CREATE TABLE chaos_releases (
        id bigint PRIMARY KEY DEFAULT nextval('chaos_transitions_id_seq'),
        job_id bigint NOT NULL,
        at double precision NOT NULL,
        txid bigint NOT NULL DEFAULT txid_current()
    )""",
    """CREATE FUNCTION chaos_audit_release() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO chaos_releases (job_id, at)
        VALUES (NEW.id, extract(epoch FROM clock_timestamp()));
        RETURN NULL;
    END
    $$""",
    """CREATE TRIGGER chaos_audit_release AFTER UPDATE OF scheduled_at ON background_jobs
        FOR EACH ROW
        WHEN (OLD.scheduled_at >= '9999-01-01' AND NEW.scheduled_at < '9999-01-01')
        EXECUTE FUNCTION chaos_audit_release()""",
]


@dataclass(frozen=True)
class JobSpec:
    job_type: str = "chaos:work"
    payload: dict[str, Any] = field(default_factory=dict)
    queue: str = "default"
    max_attempts: int = 25
    delay_s: float | None = None
    priority: int = 0


@dataclass(frozen=True)
class JobRow:
    id: int
    job_type: str
    queue: str
    status: str
    fence: int
    attempts: int
    max_attempts: int
    error_class: str | None
    scheduled_at: float
    created_at: float
    locked_by: str | None


@dataclass(frozen=True)
class Execution:
    id: int
    job_id: int
    fence: int
    attempt: int
    pid: int
    worker: str
    started_at: float
    ended_at: float | None
    outcome: str | None


@dataclass(frozen=True)
class Transition:
    id: int
    job_id: int
    old_status: str | None
    new_status: str
    fence: int
    attempts: int
    locked_by: str | None
    error_class: str | None
    scheduled_at: float
    lease_expires_at: float | None
    at: float

    @property
    def cause(self) -> str | None:
        """Why the job left ``running`` (the row's error class), for a transition back to
        retrying or to dead/cancelled; None otherwise (a completed row keeps the error class
        of an earlier failure)."""
        if self.old_status == "running" and self.new_status in ("retrying", "dead", "cancelled"):
            return self.error_class
        return None


@dataclass
class Snapshot:
    jobs: dict[int, JobRow]
    executions: list[Execution]
    transitions: list[Transition]
    effects: dict[int, int]

    def without(self, ids: set[int]) -> Snapshot:
        """The snapshot less these jobs (a documented loss the invariants do not judge)."""
        return Snapshot({i: j for i, j in self.jobs.items() if i not in ids},
                        [e for e in self.executions if e.job_id not in ids],
                        [t for t in self.transitions if t.job_id not in ids],
                        {i: n for i, n in self.effects.items() if i not in ids})


class ScenarioDb:
    def __init__(self, cluster: ClusterLike, name: str, redis_url: str,
                 redis_cluster: bool = False, record_on: ClusterLike | None = None) -> None:
        """``record_on``: the handlers record their executions in a database of that
        cluster (``<name>_rec``) instead of the jobs database: a scenario that breaks its
        own PostgreSQL (failover, a full disk) must not lose or block the record of what
        ran."""
        self.cluster = cluster
        self.name = name
        self.redis_url = redis_url
        self.redis_cluster = redis_cluster
        self.url = cluster.url(name)  # superuser: reads, ghosts
        self.app_url = cluster.url(name, APP_ROLE)  # the producer and migrations
        self.record_on = record_on
        self.record_url = record_on.url(f"{name}_rec") if record_on else self.url
        self._conn: psycopg.Connection[Any] | None = None
        self._rec: psycopg.Connection[Any] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def create(self) -> None:
        with psycopg.connect(self.cluster.url("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{self.name}" OWNER {APP_ROLE}')

        async def migrate() -> None:
            store = open_store(self.app_url, pool_size=2)
            await store.open()
            try:
                await store.migrate()
            finally:
                await store.close()

        trio.run(migrate)
        if self.record_on is not None:
            with psycopg.connect(self.record_on.url("postgres"), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{self.name}_rec" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{self.name}_rec"')
        with psycopg.connect(self.record_url, autocommit=True) as conn:
            for statement in _RECORD:
                conn.execute(statement)
        with psycopg.connect(self.app_url, autocommit=True) as conn:
            for statement in _INSTRUMENT:
                conn.execute(statement)

    def drop(self) -> None:
        self.close()
        if self.record_on is not None:
            with psycopg.connect(self.record_on.url("postgres"), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{self.name}_rec" WITH (FORCE)')
        with psycopg.connect(self.cluster.url("postgres"), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def close(self) -> None:
        for conn in (self._conn, self._rec):
            if conn is not None:
                conn.close()
        self._conn = self._rec = None

    def executions(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """A query on ``chaos_executions`` (wherever the handlers record)."""
        if self.record_on is None:
            return self.query(sql, params)
        deadline = time.monotonic() + 60.0
        while True:
            try:
                if self._rec is None or self._rec.closed:
                    self._rec = psycopg.connect(self.record_url, autocommit=True, connect_timeout=3)
                cur = self._rec.execute(sql, tuple(params))
                return [tuple(r) for r in cur.fetchall()] if cur.description else []
            except psycopg.OperationalError:
                if self._rec is not None:
                    self._rec.close()
                self._rec = None
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    # -- queries (reconnecting: PostgreSQL may be restarting) ------------------------------

    def query(self, sql: str, params: Sequence[Any] = (), *, retry_s: float = 60.0) -> list[tuple[Any, ...]]:
        deadline = time.monotonic() + retry_s
        while True:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=3)
                cur = self._conn.execute(sql, tuple(params))
                return [tuple(r) for r in cur.fetchall()] if cur.description else []
            except psycopg.OperationalError:
                self.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        rows = self.query(sql, params)
        return rows[0][0] if rows else None

    def unfinished(self, ids: Sequence[int]) -> int:
        return int(self.scalar(
            "SELECT count(*) FROM background_jobs WHERE id = ANY(%s) AND status <> ALL(%s)",
            [list(ids), list(TERMINAL)],
        ))

    def in_flight(self, pid: int) -> int:
        return int(self.executions(
            "SELECT count(*) FROM chaos_executions WHERE pid = %s AND ended_at IS NULL", [pid]
        )[0][0])

    def started_since(self, t: float) -> int:
        return int(self.executions(
            "SELECT count(*) FROM chaos_executions WHERE started_at > %s", [t])[0][0])

    def status_counts(self) -> dict[str, int]:
        return {str(s): int(n) for s, n in self.query(
            "SELECT status, count(*) FROM background_jobs GROUP BY status")}

    def gochat_backends(self) -> list[int]:
        return [int(r[0]) for r in self.query(
            "SELECT pid FROM pg_stat_activity WHERE usename = %s AND datname = %s",
            [APP_ROLE, self.name],
        )]

    def terminate_backends(self) -> int:
        rows = self.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE usename = %s AND datname = %s AND pid <> pg_backend_pid()",
            [APP_ROLE, self.name],
        )
        return sum(1 for r in rows if r[0])

    # -- producing -------------------------------------------------------------------------

    def enqueue(self, specs: Sequence[JobSpec], producers: int = 6) -> list[int]:
        """Enqueue through gochatd's Client, ``producers`` at a time; ids in order."""
        ids = [0] * len(specs)

        async def main() -> None:
            async with Client(self.app_url, self.redis_url,
                              redis_cluster=self.redis_cluster) as client:
                todo = iter(range(len(specs)))

                async def producer() -> None:
                    for i in todo:
                        spec = specs[i]
                        job = await client.enqueue(
                            spec.job_type, dict(spec.payload), queue=spec.queue,
                            max_attempts=spec.max_attempts, delay_s=spec.delay_s,
                            priority=spec.priority,
                        )
                        ids[i] = job.id

                async with trio.open_nursery() as nursery:
                    for _ in range(max(1, min(producers, len(specs)))):
                        nursery.start_soon(producer)

        if specs:
            trio.run(main)
        return ids

    def insert_ghosts(self, count: int, lease_left_s: float, payload: dict[str, Any]) -> list[int]:
        """Jobs ``running`` under a lease nobody will heartbeat (a worker that died holding
        them): only a reaper brings them back."""
        rows = self.query(
            "INSERT INTO background_jobs (job_type, queue, payload, status, attempts, fence,"
            " locked_by, locked_at, lease_expires_at, max_attempts)"
            " SELECT 'chaos:work', 'maint', %s::jsonb, 'running', 1, 1, %s, now(),"
            "        now() + make_interval(secs => %s), 5"
            " FROM generate_series(1, %s) RETURNING id",
            [Jsonb(payload), GHOST_OWNER, lease_left_s, count],
        )
        return [int(r[0]) for r in rows]

    # -- reading back ----------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        jobs = {
            int(r[0]): JobRow(int(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]), int(r[5]),
                              int(r[6]), r[7], float(r[8]), float(r[9]), r[10])
            for r in self.query(
                "SELECT id, job_type, queue, status, fence, attempts, max_attempts, error_class,"
                " extract(epoch FROM scheduled_at)::float8, extract(epoch FROM created_at)::float8,"
                " locked_by FROM background_jobs ORDER BY id"
            )
        }
        executions = [
            Execution(int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]), str(r[5]),
                      float(r[6]), None if r[7] is None else float(r[7]), r[8])
            for r in self.executions(
                "SELECT id, job_id, fence, attempt, pid, worker, started_at, ended_at, outcome"
                " FROM chaos_executions ORDER BY id"
            )
        ]
        transitions = [
            Transition(int(r[0]), int(r[1]), r[2], str(r[3]), int(r[4]), int(r[5]), r[6], r[7],
                       float(r[8]), None if r[9] is None else float(r[9]), float(r[10]))
            for r in self.query(
                "SELECT id, job_id, old_status, new_status, fence, attempts, locked_by,"
                " error_class, scheduled_at, lease_expires_at, at FROM chaos_transitions ORDER BY id"
            )
        ]
        effects = {int(r[0]): int(r[1]) for r in self.query("SELECT job_id, applied FROM chaos_effects")}
        return Snapshot(jobs, executions, transitions, effects)
