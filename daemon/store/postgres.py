"""PostgreSQL store: synchronous psycopg 3 on connections owned by threads, one thread hop
per operation (store/pg_threads.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import psycopg
import trio

from gochatd.errors import (
    IdempotencyConflict,
    InvalidJob,
    StoreUnavailable,
    TenantMoved,
)
from gochatd.logs import get_logger
from gochatd.model import (
    AfterCommit,
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
from gochatd.periodic_jobs.slots import SlotClaim, pg_claim_periodic_slot
from gochatd.redact import mask_url
from gochatd.store.attempts import ATTEMPTS_KEPT_PER_JOB, attempt_from_row
from gochatd.store.capped_claims import pg_claim_capped
from gochatd.store.enqueue_many import pg_enqueue_many, pg_enqueue_params
from gochatd.store.pg_connect import behind_pooler, connect
from gochatd.store.pg_threads import Listener, connection_pool, listen_connection
from gochatd.store.queries import load_queries
from gochatd.store.rows import job_from_row, same_job
from gochatd.store.sql_store import SqlJobStore
from gochatd.store.unique import enqueue_unique
from gochatd.store.upgrade import upgrade_postgres

Q = load_queries("postgres")
T = TypeVar("T")
NOTIFY_CHANNEL = "gochatd_jobs"


def _translate(exc: BaseException) -> Exception | None:
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return TenantMoved()  # the route trigger (sql/postgres/0007)
    if isinstance(exc, psycopg.errors.CheckViolation | psycopg.errors.NotNullViolation):
        return InvalidJob(f"rejected by the database: {exc.diag.constraint_name or 'constraint'}")
    if isinstance(exc, psycopg.errors.InvalidTextRepresentation | psycopg.errors.DataError):
        return InvalidJob("rejected by the database: invalid value")
    if isinstance(exc, psycopg.OperationalError | OSError):
        return StoreUnavailable(f"postgres unavailable: {type(exc).__name__}")
    return None


def _as_time(value: datetime | None) -> datetime | None:
    return value


#: What a prepared statement that is not on this server connection (or one that already is)
#: raises: the statement did not run.
_PREPARED_STATEMENT_LOST = (
    psycopg.errors.InvalidSqlStatementName, psycopg.errors.DuplicatePreparedStatement
)


class PostgresStore(SqlJobStore):
    """Synchronous psycopg on connections that threads own (store/pg_threads.py): every
    operation is one unit of work handed to one thread, whatever its statements."""

    dialect = "postgres"
    has_notifications = True

    def __init__(self, dsn: str, *, pool_size: int = 8, listen_dsn: str | None = None,
                 prepare: str = "auto") -> None:
        self._dsn = dsn
        #: LISTEN's own connection (``database_listen_url``): direct, past any pooler.
        self._listen_dsn = listen_dsn or None
        self._init_scope()
        self._pool = connection_pool("gochatd-pg", self._connect, pool_size)
        self._listener: Listener | None = None
        #: ``database_prepare``: hot statements are prepared on the server unless "off",
        #: or "auto" and a pooler showed up (at open, or by a lost statement).
        self._prepare_mode = prepare
        self._prepare = prepare != "off"
        self.behind_pooler = False

    def __repr__(self) -> str:
        return f"PostgresStore({mask_url(self._dsn)!r})"

    @property
    def prepares(self) -> bool:
        """Whether the hot statements are prepared on the server (now)."""
        return self._prepare

    # -- lifecycle -------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        return connect(self._dsn)

    def _connect_listen(self) -> psycopg.Connection[Any]:
        return connect(self._listen_dsn or self._dsn)

    def _execute(
        self, conn: psycopg.Connection[Any], query: str, params: dict[str, Any]
    ) -> psycopg.Cursor[Any]:
        """Connection thread: one hot statement, prepared on the server while that works.
        Behind a pooler in transaction mode that ``open`` did not detect, a prepared
        statement lives on one server connection and the next transaction may get another:
        the statement then fails before it runs, so it is run again unprepared and the
        store prepares nothing from then on."""
        if self._prepare:
            try:
                return conn.execute(query, params, prepare=True)
            except _PREPARED_STATEMENT_LOST:
                if self._prepare:
                    self._prepare = False
                    get_logger(component="postgres").info(
                              "prepared_statements_off",
                              reason="a prepared statement was missing or already existed: "
                                     "a pooler in transaction mode")
        return conn.execute(query, params, prepare=False)

    async def open(self) -> None:
        """Connect now, so a database that is not there fails here, and see whether a pooler
        is in between. LISTEN from the start, so work committed before the first wait is
        not missed: through ``listen_dsn`` when given, never through a pooler (the workers
        then find new work by polling)."""
        self.behind_pooler = await self._call(behind_pooler)
        if self.behind_pooler and self._prepare_mode == "auto":
            self._prepare = False
        if self.behind_pooler and self._listen_dsn is None:
            self.has_notifications = False
            get_logger(component="postgres").info(
                "notifications_off", reason="database_url goes through a pooler and "
                "database_listen_url is not set: workers poll for new work")
            return
        listening = await self._call(
            lambda conn: listen_connection(self._connect_listen, NOTIFY_CHANNEL)
        )
        self._listener = Listener(self._connect_listen, NOTIFY_CHANNEL, listening)
        self._listener.start()

    async def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        await self._pool.close()

    async def _call(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """One unit of work on a pooled connection's thread; driver errors are translated at
        this boundary."""
        try:
            return await self._pool.run(fn)
        except (psycopg.Error, OSError) as exc:
            translated = _translate(exc)
            if translated is None:
                raise
            raise translated from None

    async def _read(self, name: str, params: dict[str, Any]) -> list[Any]:
        queries = self._queries
        query, params = queries.sql[name], queries.params(params)

        def _run(conn: psycopg.Connection[Any]) -> list[Any]:
            cur = self._execute(conn, query, params)
            return cur.fetchall() if cur.description else []

        return await self._call(_run)

    # Autocommit: every statement is its own transaction.
    _write = _read

    def _list(self, values: Sequence[Any]) -> Any:
        return list(values)

    def _job(self, row: Sequence[Any]) -> Job:
        return job_from_row(row)

    def _attempt(self, row: Sequence[Any]) -> JobAttempt:
        return attempt_from_row(row, _as_time)

    def _finish_params(self, finishes: Sequence[Finish]) -> dict[str, Any]:
        return {
            "ids": [f.job_id for f in finishes],
            "owners": [f.lease_owner for f in finishes],
            "fences": [f.fence for f in finishes],
            "statuses": [f.status.value for f in finishes],
            "delays": [max(0.0, f.delay_s) for f in finishes],
            "refunds": [f.outcome is Outcome.INTERRUPTED for f in finishes],
            "classes": [f.error_class for f in finishes],
            "errors": [f.last_error for f in finishes],
            "attempts_kept": ATTEMPTS_KEPT_PER_JOB,
        }

    def _lease_params(self, leases: Sequence[Lease]) -> dict[str, Any]:
        return {"ids": [x.job_id for x in leases], "fences": [x.fence for x in leases]}

    async def _finish_jobs_with_replies(self, finishes: Sequence[Finish]) -> set[int]:
        # One statement: the UPDATE's applied rows feed the INSERT (outbox.reply_rows).
        replies = reply_rows(finishes)
        params = {
            **self._finish_params(finishes),
            "r_jobs": [r[0] for r in replies], "r_channels": [r[1] for r in replies],
            "r_recipients": [r[2] for r in replies], "r_bodies": [r[3] for r in replies],
            "r_keys": [r[4] for r in replies],
        }
        rows = await self._write("finish_jobs_with_replies", params)
        return {int(r[0]) for r in rows}

    # -- schema ----------------------------------------------------------------------------

    async def migrate(self) -> list[str]:
        return await self._call(upgrade_postgres)

    async def schema_version(self) -> int:
        def _version(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute("SELECT to_regclass('gochatd_schema_migrations')").fetchone()
            if row is None or row[0] is None:
                return 0
            row = conn.execute(
                "SELECT coalesce(max(version), 0) FROM gochatd_schema_migrations").fetchone()
            return int(row[0]) if row else 0

        return await self._call(_version)

    # -- producers -------------------------------------------------------------------------

    async def enqueue(
        self, request: EnqueueRequest, *, after_commit: AfterCommit | None = None
    ) -> EnqueueResult:
        params = pg_enqueue_params(request)

        def _enqueue(conn: psycopg.Connection[Any]) -> EnqueueResult:
            result = _insert(conn)
            if after_commit is not None:
                after_commit([result])
            return result

        def _insert(conn: psycopg.Connection[Any]) -> EnqueueResult:
            if request.unique_key is not None:
                return _unique(conn)
            for _ in range(3):  # the existing row may vanish between the two statements
                row = self._execute(conn, Q["enqueue_job"], params).fetchone()
                if row is not None:
                    return EnqueueResult(job_from_row(row), created=True)
                row = self._execute(conn, Q["find_idempotent_job"], params).fetchone()
                if row is None:
                    continue
                job = job_from_row(row)
                if not same_job(job, request.job_type, request.payload):
                    assert request.idempotency_key is not None
                    raise IdempotencyConflict(request.tenant_id, request.idempotency_key, job.id)
                return EnqueueResult(job, created=False)
            raise StoreUnavailable("enqueue raced with deletion three times")

        def _unique(conn: psycopg.Connection[Any]) -> EnqueueResult:
            result = enqueue_unique(lambda q, p: self._execute(conn, q, dict(p)).fetchone(),
                                    Q, request, params, job_from_row)
            if result.conflict:
                assert request.idempotency_key is not None
                raise IdempotencyConflict(request.tenant_id, request.idempotency_key,
                                          result.job.id)
            return result

        return await self._call(_enqueue)

    async def enqueue_many(
        self, requests: Sequence[EnqueueRequest], *, raise_on_conflict: bool = False,
        after_commit: AfterCommit | None = None,
    ) -> list[EnqueueResult]:
        if not requests:
            return []

        def _enqueue_many(conn: psycopg.Connection[Any]) -> list[EnqueueResult]:
            with conn.transaction():
                results = pg_enqueue_many(conn, requests, raise_on_conflict)
            if after_commit is not None:
                after_commit(results)
            return results

        return await self._call(_enqueue_many)

    async def claim_periodic_slot(
        self, name: str, slot: datetime, request: EnqueueRequest | None
    ) -> SlotClaim:
        def _claim_slot(conn: psycopg.Connection[Any]) -> SlotClaim:
            with conn.transaction():
                return pg_claim_periodic_slot(conn, name, slot, request)

        return await self._call(_claim_slot)

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

        def _claim(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = []
            for queue in queues:
                want = limit - len(rows)
                if want <= 0:
                    break
                params = queries.params({"queue": queue, "limit": want, "owner": owner,
                                         "lease_s": lease_s, "aging_s": aging_s,
                                         "dispatched_only": dispatched_only})
                rows.extend(self._execute(conn, query, params).fetchall())
            return rows

        return [self._claimed(r, owner) for r in await self._call(_claim)]

    async def _claim_capped(
        self, ids: Sequence[int] | None, queues: Sequence[str], limit: int, owner: str,
        lease_s: float, *, backlog: bool = False,
    ) -> list[ClaimedJob]:
        caps, queries = self._caps(), self._queries
        aging_s = self.priority_aging_s

        def _claim(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return pg_claim_capped(conn, caps, ids, queues, limit, owner, lease_s,
                                   backlog=backlog, queries=queries, aging_s=aging_s)

        return [self._claimed(r, owner) for r in await self._call(_claim)]

    # -- notifications ---------------------------------------------------------------------

    async def wait_for_notification(self, timeout_s: float) -> bool:
        """True when another process announced new work (the NOTIFY trigger) since the last
        call (listening started when the store opened)."""
        if not self.has_notifications:  # behind a pooler without a listen URL: polling
            await trio.sleep(timeout_s)
            return False
        if self._listener is None:
            raise StoreUnavailable("postgres store is not open")
        try:
            return await self._listener.wait(timeout_s)
        except ConnectionError as exc:
            raise StoreUnavailable(str(exc)) from None

