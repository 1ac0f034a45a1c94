"""PostgreSQL store: synchronous psycopg 3 on connections owned by threads, one thread hop
per operation (store/pg_threads.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from gochatd.errors import InvalidJob, StoreUnavailable, TenantMoved
from gochatd.obs.logs import get_logger
from gochatd.obs.redact import mask_url
from gochatd.store.claim_window import ClaimWindows
from gochatd.store.db import Db, PgDb
from gochatd.store.lender import Lender
from gochatd.store.pg_connect import behind_pooler, connect
from gochatd.store.pg_listen import CHANNELS, PgNotifications
from gochatd.store.pg_threads import (
    Listener,
    connection_pool,
    lend_connections,
    listen_connection,
)
from gochatd.store.scope import QuerySet
from gochatd.store.sql_store import SqlJobStore
from gochatd.store.upgrade import upgrade_postgres

T = TypeVar("T")


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


#: What a prepared statement that is not on this server connection (or one that already is)
#: raises: the statement did not run.
_PREPARED_STATEMENT_LOST = (
    psycopg.errors.InvalidSqlStatementName, psycopg.errors.DuplicatePreparedStatement
)


class PgConnections:
    """The connection threads (store/pg_threads.py), the connections lent to ``SyncClient``
    and the prepared-statement switch."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], pool_size: int,
                 prepare: str) -> None:
        self._connect = connect
        self._size = pool_size
        self.pool = connection_pool("gochatd-pg", connect, pool_size)
        self._lender: Lender[psycopg.Connection[Any]] | None = None
        #: ``database_prepare``: hot statements are prepared on the server unless "off",
        #: or "auto" and a pooler showed up (at open, or by a lost statement).
        self.prepare = prepare != "off"

    def execute(
        self, conn: psycopg.Connection[Any], query: str, params: dict[str, Any]
    ) -> psycopg.Cursor[Any]:
        """Connection thread: one hot statement, prepared on the server while that works.
        Behind a pooler in transaction mode that ``open`` did not detect, a prepared
        statement lives on one server connection and the next transaction may get another:
        the statement then fails before it runs, so it is run again unprepared and the
        store prepares nothing from then on."""
        if self.prepare:
            try:
                return conn.execute(query, params, prepare=True)
            except _PREPARED_STATEMENT_LOST:
                if self.prepare:
                    self.prepare = False
                    get_logger(component="postgres").info(
                              "prepared_statements_off",
                              reason="a prepared statement was missing or already existed: "
                                     "a pooler in transaction mode")
        return conn.execute(query, params, prepare=False)

    async def call(self, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """One unit of work on a pooled connection's thread; driver errors are translated at
        this boundary."""
        try:
            return await self.pool.run(fn)
        except (psycopg.Error, OSError) as exc:
            raise _translated(exc) from None

    async def run(self, unit: Callable[[Db], T], queries: QuerySet) -> T:
        return await self.call(lambda conn: unit(PgDb(conn, queries, self.execute)))

    def run_lent(self, unit: Callable[[Db], T], queries: QuerySet) -> T:
        if self._lender is None:
            self._lender = lend_connections("gochatd-pg", self._connect, self._size)
        try:
            return self._lender.run(lambda conn: unit(PgDb(conn, queries, self.execute)))
        except (psycopg.Error, OSError) as exc:
            raise _translated(exc) from None

    def close_lent(self) -> None:
        if self._lender is not None:
            self._lender.close()


def _translated(exc: psycopg.Error | OSError) -> Exception:
    translated = _translate(exc)
    if translated is None:
        raise exc
    return translated


class PostgresStore(PgNotifications, SqlJobStore):
    """Synchronous psycopg on connections that threads own (store/pg_threads.py): every
    operation is one unit of work handed to one thread, whatever its statements."""

    dialect = "postgres"

    def __init__(self, dsn: str, *, pool_size: int = 8, listen_dsn: str | None = None,
                 prepare: str = "auto") -> None:
        self._dsn = dsn
        #: LISTEN's own connection (``database_listen_url``): direct, past any pooler.
        self._listen_dsn = listen_dsn or None
        self._init_scope()
        self._conns: PgConnections = PgConnections(self._connect, pool_size, prepare)
        self._listener: Listener | None = None
        self._prepare_mode = prepare
        self.behind_pooler = False
        self._claim_windows = ClaimWindows()

    def __repr__(self) -> str:
        return f"PostgresStore({mask_url(self._dsn)!r})"

    @property
    def prepares(self) -> bool:
        """Whether the hot statements are prepared on the server (now)."""
        return self._conns.prepare

    # -- lifecycle -------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        return connect(self._dsn)

    def _connect_listen(self) -> psycopg.Connection[Any]:
        return connect(self._listen_dsn or self._dsn)

    async def open(self) -> None:
        """Connect now, so a database that is not there fails here, and see whether a pooler
        is in between. LISTEN from the start, so work committed before the first wait is
        not missed: through ``listen_dsn`` when given, never through a pooler (the workers
        then find new work by polling)."""
        self.behind_pooler = await self._conns.call(behind_pooler)
        if self.behind_pooler and self._prepare_mode == "auto":
            self._conns.prepare = False
        if self.behind_pooler and self._listen_dsn is None:
            self.has_notifications = self.control_notifications = False
            get_logger(component="postgres").info(
                "notifications_off", reason="database_url goes through a pooler and "
                "database_listen_url is not set: workers poll for new work")
            return
        listening = await self._conns.call(
            lambda conn: listen_connection(self._connect_listen, CHANNELS)
        )
        self._listener = Listener(self._connect_listen, CHANNELS, listening)
        self._listener.start()

    async def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        self._conns.close_lent()
        await self._conns.pool.close()

    # -- schema ----------------------------------------------------------------------------

    async def migrate(self) -> list[str]:
        return await self._conns.call(upgrade_postgres)


