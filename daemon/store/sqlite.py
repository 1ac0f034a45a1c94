"""SQLite store: stdlib sqlite3 in WAL mode, run on a worker thread, never on Trio's.

Several processes on one host may share the file: every write is one ``BEGIN IMMEDIATE``
transaction, so claims are atomic without row locks. Other processes' commits are noticed
through ``PRAGMA data_version``.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import trio

from gochatd.errors import (
    IdempotencyConflict,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    StoreUnavailable,
)
from gochatd.model import (
    ClaimedJob,
    DispatchRef,
    EnqueueRequest,
    EnqueueResult,
    Finish,
    Job,
    JobFilter,
    JobStatus,
    Lease,
    LeaseState,
    Outcome,
    ReapResult,
)
from gochatd.store.queries import load_migrations, load_queries
from gochatd.store.rows import (
    canonical_json,
    claimed_from_row,
    epoch_to_datetime,
    job_from_row,
    ref_from_row,
)

Q = load_queries("sqlite")
T = TypeVar("T")
_DATA_VERSION_POLL_S = 0.05


def _epoch(value: Any) -> Any:
    return epoch_to_datetime(value)


class SqliteStore:
    dialect = "sqlite"
    has_notifications = True

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._limiter = trio.CapacityLimiter(1)
        self._data_version: int | None = None

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        rest = url[len("sqlite://"):]
        if rest.startswith("/"):
            rest = rest[1:]  # sqlite:///rel.db -> rel.db, sqlite:////abs.db -> /abs.db
        if not rest:
            raise InvalidJob("database_url: sqlite:/// needs a file path")
        return cls(rest if rest == ":memory:" else str(Path(rest)))

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    # -- plumbing --------------------------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        assert conn is not None, "store not opened"

        def call() -> T:
            try:
                return fn(conn)
            except sqlite3.IntegrityError as exc:
                raise InvalidJob(f"rejected by the database: {_constraint(exc)}") from None
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(f"sqlite unavailable: {exc}") from None

        return await trio.to_thread.run_sync(call, limiter=self._limiter)

    @staticmethod
    def _write(conn: sqlite3.Connection, name: str, params: dict[str, Any]) -> list[Any]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = conn.execute(Q[name], params).fetchall()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return rows

    async def _fetch(self, name: str, params: dict[str, Any]) -> list[Any]:
        return await self._run(lambda conn: conn.execute(Q[name], params).fetchall())

    async def _modify(self, name: str, params: dict[str, Any]) -> list[Any]:
        return await self._run(lambda conn: self._write(conn, name, params))

    # -- lifecycle -------------------------------------------------------------------------

    async def open(self) -> None:
        def _connect() -> sqlite3.Connection:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            return conn

        try:
            self._conn = await trio.to_thread.run_sync(_connect, limiter=self._limiter)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open sqlite database {self.path!r}: {exc}") from None
        # The baseline is taken now, so commits before the first wait are noticed.
        self._data_version = await self._run(_data_version)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await trio.to_thread.run_sync(conn.close, limiter=self._limiter)

    async def migrate(self) -> list[str]:
        def _migrate(conn: sqlite3.Connection) -> list[str]:
            applied: list[str] = []
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS gochatd_schema_migrations ("
                    " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                    " applied_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0))"
                )
                done = {r[0] for r in conn.execute("SELECT version FROM gochatd_schema_migrations")}
                for migration in load_migrations("sqlite"):
                    if migration.version in done:
                        continue
                    for statement in _split_statements(migration.up_sql):
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO gochatd_schema_migrations (version, name) VALUES (?, ?)",
                        (migration.version, migration.name),
                    )
                    applied.append(f"{migration.version:04d}_{migration.name}")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return applied

        return await self._run(_migrate)

    async def schema_version(self) -> int:
        def _version(conn: sqlite3.Connection) -> int:
            exists = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'gochatd_schema_migrations'"
            ).fetchone()
            if not exists:
                return 0
            row = conn.execute("SELECT coalesce(max(version), 0) FROM gochatd_schema_migrations").fetchone()
            return int(row[0])

        return await self._run(_version)

    # -- producers -------------------------------------------------------------------------

    async def enqueue(self, request: EnqueueRequest) -> EnqueueResult:
        params = {
            "tenant_id": request.tenant_id,
            "job_type": request.job_type,
            "queue": request.queue,
            "payload": canonical_json(request.payload),
            "priority": request.priority,
            "max_attempts": request.max_attempts,
            "scheduled_at": request.scheduled_at.timestamp() if request.scheduled_at else None,
            "delay_s": float(request.delay_s or 0.0),
            "idempotency_key": request.idempotency_key,
            "traceparent": request.traceparent,
            "dispatch_now": request.dispatch_now,
        }

        def _enqueue(conn: sqlite3.Connection) -> EnqueueResult:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(Q["enqueue_job"], params).fetchone()
                if row is not None:
                    result = EnqueueResult(job_from_row(row, _epoch), created=True)
                else:
                    row = conn.execute(Q["find_idempotent_job"], params).fetchone()
                    job = job_from_row(row, _epoch)
                    if not row[-1]:
                        assert request.idempotency_key is not None
                        raise IdempotencyConflict(
                            request.tenant_id, request.idempotency_key, job.id
                        )
                    result = EnqueueResult(job, created=False)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return await self._run(_enqueue)

    # -- claims ----------------------------------------------------------------------------

    async def claim_jobs(self, ids: Sequence[int], owner: str, lease_s: float) -> list[ClaimedJob]:
        if not ids:
            return []
        rows = await self._modify(
            "claim_jobs", {"ids": json.dumps(list(ids)), "owner": owner, "lease_s": lease_s}
        )
        return [claimed_from_row(r, owner, _epoch) for r in rows]

    async def claim_due_jobs(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float
    ) -> list[ClaimedJob]:
        if limit <= 0 or not queues:
            return []

        def _claim(conn: sqlite3.Connection) -> list[Any]:
            rows: list[Any] = []
            conn.execute("BEGIN IMMEDIATE")
            try:
                for queue in queues:
                    want = limit - len(rows)
                    if want <= 0:
                        break
                    params = {"queue": queue, "limit": want, "owner": owner, "lease_s": lease_s}
                    rows.extend(conn.execute(Q["claim_due_jobs"], params).fetchall())
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return rows

        return [claimed_from_row(r, owner, _epoch) for r in await self._run(_claim)]

    async def finish_jobs(self, finishes: Sequence[Finish]) -> set[int]:
        if not finishes:
            return set()
        batch = [
            [f.job_id, f.lease_owner, f.fence, f.status.value, max(0.0, f.delay_s),
             f.outcome is Outcome.INTERRUPTED, f.error_class, f.last_error]
            for f in finishes
        ]
        rows = await self._modify("finish_jobs", {"batch": json.dumps(batch)})
        return {int(r[0]) for r in rows}

    async def extend_leases(
        self, leases: Sequence[Lease], owner: str, lease_s: float
    ) -> list[LeaseState]:
        if not leases:
            return []
        rows = await self._modify(
            "extend_leases",
            {
                "leases": json.dumps([[lease.job_id, lease.fence] for lease in leases]),
                "owner": owner,
                "lease_s": lease_s,
            },
        )
        return [LeaseState(int(r[0]), bool(r[1])) for r in rows]

    # -- maintenance -----------------------------------------------------------------------

    async def reap_expired_leases(self, limit: int = 1000) -> ReapResult:
        rows = await self._modify("reap_expired_leases", {"limit": limit})
        retried = [ref_from_row(r) for r in rows if r[4] == JobStatus.RETRYING]
        dead = [int(r[0]) for r in rows if r[4] != JobStatus.RETRYING]
        return ReapResult(retried=retried, dead=dead)

    async def dispatch_due_jobs(self, queues: Sequence[str], limit: int) -> list[DispatchRef]:
        rows = await self._modify(
            "dispatch_due_jobs", {"queues": json.dumps(list(queues)), "limit": limit}
        )
        return [ref_from_row(r) for r in rows]

    async def redispatch_stale_jobs(
        self, queue: str, older_than_s: float, limit: int
    ) -> list[DispatchRef]:
        if limit <= 0:
            return []
        rows = await self._modify(
            "redispatch_stale_jobs", {"queue": queue, "older_than_s": older_than_s, "limit": limit}
        )
        return [ref_from_row(r) for r in rows]

    async def next_due_in_s(self, queues: Sequence[str], undispatched_only: bool) -> float | None:
        name = "next_undispatched_in_s" if undispatched_only else "next_due_in_s"
        rows = await self._fetch(name, {"queues": json.dumps(list(queues))})
        value = rows[0][0] if rows else None
        return None if value is None or not math.isfinite(value) else float(value)

    # -- operators -------------------------------------------------------------------------

    async def get_job(self, job_id: int) -> Job | None:
        rows = await self._fetch("get_job", {"id": job_id})
        return job_from_row(rows[0], _epoch) if rows else None

    async def list_jobs(self, flt: JobFilter) -> list[Job]:
        rows = await self._fetch(
            "list_jobs",
            {
                "status": flt.status.value if flt.status else None,
                "queue": flt.queue,
                "tenant_id": flt.tenant_id,
                "job_type": flt.job_type,
                "after_id": flt.after_id,
                "limit": flt.limit,
            },
        )
        return [job_from_row(r, _epoch) for r in rows]

    async def retry_job(self, job_id: int) -> Job:
        rows = await self._modify("retry_job", {"id": job_id})
        if rows:
            return job_from_row(rows[0], _epoch)
        raise await self._transition_error(job_id, "retry", "dead or cancelled")

    async def cancel_job(self, job_id: int) -> Job:
        rows = await self._modify("cancel_waiting_job", {"id": job_id})
        if not rows:
            rows = await self._modify("request_cancel_running_job", {"id": job_id})
        if rows:
            return job_from_row(rows[0], _epoch)
        raise await self._transition_error(job_id, "cancel", "queued, retrying or running")

    async def _transition_error(self, job_id: int, verb: str, allowed: str) -> Exception:
        job = await self.get_job(job_id)
        if job is None:
            return JobNotFound(job_id)
        return InvalidTransition(f"cannot {verb} job {job_id}: it is {job.status}, not {allowed}")

    async def count_jobs_by_status(self) -> dict[JobStatus, int]:
        rows = await self._fetch("count_jobs_by_status", {})
        return {JobStatus(r[0]): int(r[1]) for r in rows}

    # -- notifications ---------------------------------------------------------------------

    async def wait_for_notification(self, timeout_s: float) -> bool:
        """Another process committed when this connection's ``data_version`` moves."""

        with trio.move_on_after(timeout_s):
            while True:
                version = await self._run(_data_version)
                if version != self._data_version:
                    self._data_version = version
                    return True
                await trio.sleep(_DATA_VERSION_POLL_S)
        return False


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _constraint(exc: sqlite3.IntegrityError) -> str:
    text = str(exc)
    if "CHECK constraint failed:" in text:
        return text.split("CHECK constraint failed:", 1)[1].strip()
    if "NOT NULL constraint failed" in text:
        return "not-null " + text.rsplit(":", 1)[-1].strip()
    return "constraint"


def _split_statements(script: str) -> list[str]:
    """Split a migration into statements; sqlite3.complete_statement handles quoting."""
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        if not buf and line.strip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            statements.append(buf.strip())
            buf = ""
    if buf.strip():
        statements.append(buf.strip())
    return statements
