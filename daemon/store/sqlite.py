"""SQLite store: stdlib sqlite3 in WAL mode, run on a worker thread, never on Trio's.

Several processes on one host may share the file: every write is one ``BEGIN IMMEDIATE``
transaction, so claims are atomic without row locks. Other processes' commits are noticed
through ``PRAGMA data_version``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import trio

from gochatd.errors import (
    ConfigError,
    IdempotencyConflict,
    InvalidJob,
    StoreUnavailable,
    TenantMoved,
)
from gochatd.handoff import Handoff
from gochatd.model import (
    AfterCommit,
    AttemptOutcome,
    ClaimedJob,
    EnqueueRequest,
    EnqueueResult,
    Finish,
    Job,
    JobAttempt,
    Lease,
    Outcome,
)
from gochatd.outbox.store import reply_rows
from gochatd.periodic_jobs.slots import SlotClaim, sqlite_claim_periodic_slot
from gochatd.store.attempts import applied_attempts, attempt_from_row, sqlite_record_attempts
from gochatd.store.capped_claims import sqlite_claim_capped
from gochatd.store.enqueue_many import sqlite_enqueue_many, sqlite_enqueue_params
from gochatd.store.queries import load_queries
from gochatd.store.rows import epoch_to_datetime, job_from_row, same_job
from gochatd.store.sql_store import SqlJobStore
from gochatd.store.unique import enqueue_unique
from gochatd.store.upgrade import upgrade_sqlite

Q = load_queries("sqlite")
T = TypeVar("T")
_DATA_VERSION_POLL_S = 0.05

#: The message of the route trigger's RAISE (sql/sqlite/0007).
_MOVED_MARK = "rows were moved to another database"


def sqlite_url_path(url: str) -> str:
    """The file a ``sqlite:`` URL names, as written: ``sqlite:///rel.db`` -> ``rel.db``
    (relative to the working directory), ``sqlite:////abs.db`` -> ``/abs.db``; empty when
    it names none. The one rule every part of gochatd reads such a URL by."""
    rest = url[len("sqlite://"):]
    return rest[1:] if rest.startswith("/") else rest


class SqliteStore(SqlJobStore):
    dialect = "sqlite"
    has_notifications = True

    def __init__(self, path: str) -> None:
        self.path = path
        self._init_scope()
        #: One thread owns the one connection (SQLite serialises writers anyway).
        self._pool: Handoff[sqlite3.Connection] = Handoff(
            "gochatd-sqlite", self._connect, _close_connection, size=1
        )
        self._data_version: int | None = None

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        rest = sqlite_url_path(url)
        if not rest:
            raise ConfigError("database_url: sqlite:/// needs a file path")
        return cls(rest if rest == ":memory:" else str(Path(rest)))

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

    # -- plumbing --------------------------------------------------------------------------

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def call(conn: sqlite3.Connection) -> T:
            try:
                return fn(conn)
            except sqlite3.IntegrityError as exc:
                if _MOVED_MARK in str(exc):
                    raise TenantMoved() from None
                raise InvalidJob(f"rejected by the database: {_constraint(exc)}") from None
            except sqlite3.OperationalError as exc:
                raise StoreUnavailable(f"sqlite unavailable: {exc}") from None

        return await self._pool.run(call)

    async def _read(self, name: str, params: dict[str, Any]) -> list[Any]:
        queries = self._queries
        query, params = queries.sql[name], queries.params(params)
        return await self._run(lambda conn: conn.execute(query, params).fetchall())

    async def _write(self, name: str, params: dict[str, Any]) -> list[Any]:
        queries = self._queries
        query, params = queries.sql[name], queries.params(params)
        return await self._run(lambda conn: _in_transaction(conn, query, params))

    def _list(self, values: Sequence[Any]) -> Any:
        return json.dumps(list(values))

    def _job(self, row: Sequence[Any]) -> Job:
        return job_from_row(row, epoch_to_datetime)

    def _attempt(self, row: Sequence[Any]) -> JobAttempt:
        return attempt_from_row(row, epoch_to_datetime)

    def _finish_params(self, finishes: Sequence[Finish]) -> dict[str, Any]:
        batch = [
            [f.job_id, f.lease_owner, f.fence, f.status.value, max(0.0, f.delay_s),
             f.outcome is Outcome.INTERRUPTED, f.error_class, f.last_error]
            for f in finishes
        ]
        return {"batch": json.dumps(batch)}

    def _lease_params(self, leases: Sequence[Lease]) -> dict[str, Any]:
        return {"leases": json.dumps([[x.job_id, x.fence] for x in leases])}

    async def finish_jobs(self, finishes: Sequence[Finish]) -> set[int]:
        """The fenced UPDATE, then (for the rows it applied) the completions' replies and
        the runs' attempts, in one ``BEGIN IMMEDIATE``."""
        if not finishes:
            return set()
        queries = self._queries
        finish, params = queries.sql["finish_jobs"], queries.params(self._finish_params(finishes))
        replies = reply_rows(finishes)

        def _finish(conn: sqlite3.Connection) -> set[int]:
            conn.execute("BEGIN IMMEDIATE")
            try:
                applied = {int(r[0]) for r in conn.execute(finish, params).fetchall()}
                # Only the completions that applied in this very transaction.
                mine = [list(r) for r in replies if r[0] in applied]
                if mine:
                    conn.execute(Q["insert_replies"], {"replies": json.dumps(mine)})
                sqlite_record_attempts(conn, applied_attempts(finishes, applied))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return applied

        return await self._run(_finish)

    async def _reap(self, params: dict[str, Any]) -> list[Any]:
        queries = self._queries
        reap, params = queries.sql["reap_expired_leases"], queries.params(params)

        def _reap(conn: sqlite3.Connection) -> list[Any]:
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = conn.execute(reap, params).fetchall()
                sqlite_record_attempts(
                    conn, [[r[0], AttemptOutcome.LEASE_EXPIRED.value, r[5]] for r in rows])
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return rows

        return await self._run(_reap)

    # -- lifecycle -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        """The store's thread, on its first unit of work."""
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, timeout=30.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"cannot open sqlite database {self.path!r}: {exc}") from None
        # Foreign SQL can store text that is not UTF-8; one such row must not make every
        # read of its batch fail.
        conn.text_factory = _lenient_text
        return conn

    async def open(self) -> None:
        # The baseline is taken now, so commits before the first wait are noticed.
        self._data_version = await self._run(_data_version)

    async def close(self) -> None:
        await self._pool.close()

    async def migrate(self) -> list[str]:
        return await self._run(upgrade_sqlite)

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

    async def enqueue(
        self, request: EnqueueRequest, *, after_commit: AfterCommit | None = None
    ) -> EnqueueResult:
        params = sqlite_enqueue_params(request)

        def _insert(conn: sqlite3.Connection) -> EnqueueResult:
            """Inside the write transaction: the new row, or the one holding its key."""
            if request.unique_key is not None:
                return enqueue_unique(lambda q, p: conn.execute(q, p).fetchone(), Q,
                                      request, params, self._job)
            row = conn.execute(Q["enqueue_job"], params).fetchone()
            if row is not None:
                return EnqueueResult(self._job(row), created=True)
            job = self._job(conn.execute(Q["find_idempotent_job"], params).fetchone())
            return EnqueueResult(job, created=False,
                                 conflict=not same_job(job, request.job_type, request.payload))

        def _enqueue(conn: sqlite3.Connection) -> EnqueueResult:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = _insert(conn)
                if result.conflict:
                    assert request.idempotency_key is not None
                    raise IdempotencyConflict(
                        request.tenant_id, request.idempotency_key, result.job.id
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            if after_commit is not None:
                after_commit([result])
            return result

        return await self._run(_enqueue)

    async def enqueue_many(
        self, requests: Sequence[EnqueueRequest], *, raise_on_conflict: bool = False,
        after_commit: AfterCommit | None = None,
    ) -> list[EnqueueResult]:
        if not requests:
            return []

        def _enqueue_many(conn: sqlite3.Connection) -> list[EnqueueResult]:
            results = sqlite_enqueue_many(conn, requests, raise_on_conflict, self._job)
            if after_commit is not None:
                after_commit(results)
            return results

        return await self._run(_enqueue_many)

    async def claim_periodic_slot(
        self, name: str, slot: datetime, request: EnqueueRequest | None
    ) -> SlotClaim:
        return await self._run(
            lambda conn: sqlite_claim_periodic_slot(conn, name, slot, request, self._job)
        )

    # -- claims ----------------------------------------------------------------------------

    async def claim_due_jobs(
        self, queues: Sequence[str], limit: int, owner: str, lease_s: float,
        *, dispatched_only: bool = False,
    ) -> list[ClaimedJob]:
        if limit <= 0 or not queues:
            return []
        if self.tenant_limits or self.queue_limits:
            return await self._claim_capped(None, queues, limit, owner, lease_s)
        queries, aging_s = self._queries, self.priority_aging_s
        query = queries.sql["claim_due_jobs"]

        def _claim(conn: sqlite3.Connection) -> list[Any]:
            rows: list[Any] = []
            conn.execute("BEGIN IMMEDIATE")
            try:
                for queue in queues:
                    want = limit - len(rows)
                    if want <= 0:
                        break
                    params = queries.params({"queue": queue, "limit": want, "owner": owner,
                                             "lease_s": lease_s, "aging_s": aging_s,
                                             "dispatched_only": dispatched_only,
                                             "skip_tenants": "[]"})
                    rows.extend(conn.execute(query, params).fetchall())
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return rows

        return [self._claimed(r, owner) for r in await self._run(_claim)]

    async def _claim_capped(
        self, ids: Sequence[int] | None, queues: Sequence[str], limit: int, owner: str,
        lease_s: float, *, backlog: bool = False,
    ) -> list[ClaimedJob]:
        caps, queries = self._caps(), self._queries
        aging_s = self.priority_aging_s
        rows = await self._run(
            lambda conn: sqlite_claim_capped(conn, caps, ids, queues, limit, owner, lease_s,
                                             backlog=backlog, queries=queries, aging_s=aging_s)
        )
        return [self._claimed(r, owner) for r in rows]

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


def _in_transaction(conn: sqlite3.Connection, sql: str, params: dict[str, Any]) -> list[Any]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute(sql, params).fetchall()
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return rows


def _close_connection(conn: sqlite3.Connection) -> None:
    conn.close()


def _lenient_text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _data_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _constraint(exc: sqlite3.IntegrityError) -> str:
    text = str(exc)
    if "CHECK constraint failed:" in text:
        return text.split("CHECK constraint failed:", 1)[1].strip()
    if "NOT NULL constraint failed" in text:
        return "not-null " + text.rsplit(":", 1)[-1].strip()
    return "constraint"
