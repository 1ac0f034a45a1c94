"""SQLite store: stdlib sqlite3 in WAL mode, run on a worker thread, never on Trio's.

Several processes on one host may share the file: every write is one ``BEGIN IMMEDIATE``
transaction, so claims are atomic without row locks. Other processes' commits are noticed
through ``PRAGMA data_version``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import trio

from gochatd.errors import ConfigError, InvalidJob, StoreUnavailable, TenantMoved
from gochatd.io.handoff import Handoff
from gochatd.store.db import Db, SqliteDb
from gochatd.store.lender import Lender
from gochatd.store.scope import QuerySet
from gochatd.store.sql_store import SqlJobStore
from gochatd.store.upgrade import upgrade_sqlite

T = TypeVar("T")
C = TypeVar("C")
_DATA_VERSION_POLL_S = 0.05

#: The message of the route trigger's RAISE (sql/sqlite/0007).
_MOVED_MARK = "rows were moved to another database"


def sqlite_url_path(url: str) -> str:
    """The file a ``sqlite:`` URL names, as written: ``sqlite:///rel.db`` -> ``rel.db``
    (relative to the working directory), ``sqlite:////abs.db`` -> ``/abs.db``; empty when
    it names none. The one rule every part of gochatd reads such a URL by."""
    rest = url[len("sqlite://"):]
    return rest[1:] if rest.startswith("/") else rest


class SqliteConnections:
    """The one connection thread (SQLite serialises writers anyway), and for ``SyncClient``
    one connection lent at a time; driver errors translated inside the unit."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self.pool: Handoff[sqlite3.Connection] = Handoff(
            "gochatd-sqlite", connect, _close_connection, size=1)
        self._lender: Lender[sqlite3.Connection] | None = None

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self.pool.run(lambda conn: _translating(fn, conn))

    async def run(self, unit: Callable[[Db], T], queries: QuerySet) -> T:
        return await self.pool.run(lambda conn: _translating(unit, SqliteDb(conn, queries)))

    def run_lent(self, unit: Callable[[Db], T], queries: QuerySet) -> T:
        if self._lender is None:
            self._lender = Lender("gochatd-sqlite", 1, self._connect, _close_connection,
                                  lambda conn: True)
        return self._lender.run(lambda conn: _translating(unit, SqliteDb(conn, queries)))

    def close_lent(self) -> None:
        if self._lender is not None:
            self._lender.close()


def _translating(fn: Callable[[C], T], conn: C) -> T:
    try:
        return fn(conn)
    except sqlite3.IntegrityError as exc:
        if _MOVED_MARK in str(exc):
            raise TenantMoved() from None
        raise InvalidJob(f"rejected by the database: {_constraint(exc)}") from None
    except sqlite3.OperationalError as exc:
        raise StoreUnavailable(f"sqlite unavailable: {exc}") from None


class SqliteStore(SqlJobStore):
    dialect = "sqlite"
    has_notifications = True

    def __init__(self, path: str) -> None:
        self.path = path
        self._init_scope()
        self._conns: SqliteConnections = SqliteConnections(self._connect)
        self._data_version: int | None = None

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        rest = sqlite_url_path(url)
        if not rest:
            raise ConfigError("database_url: sqlite:/// needs a file path")
        return cls(rest if rest == ":memory:" else str(Path(rest)))

    def __repr__(self) -> str:
        return f"SqliteStore({self.path!r})"

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
            conn.execute("PRAGMA recursive_triggers=ON")  # 0019: dependents cascade
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"cannot open sqlite database {self.path!r}: {exc}") from None
        # Foreign SQL can store text that is not UTF-8; one such row must not make every
        # read of its batch fail.
        conn.text_factory = _lenient_text
        return conn

    async def open(self) -> None:
        # The baseline is taken now, so commits before the first wait are noticed.
        self._data_version = await self._conns.call(_data_version)

    async def close(self) -> None:
        self._conns.close_lent()
        await self._conns.pool.close()

    async def migrate(self) -> list[str]:
        return await self._conns.call(upgrade_sqlite)

    # -- notifications ---------------------------------------------------------------------

    async def wait_for_notification(self, timeout_s: float) -> bool:
        """Another process committed when this connection's ``data_version`` moves."""

        with trio.move_on_after(timeout_s):
            while True:
                version = await self._conns.call(_data_version)
                if version != self._data_version:
                    self._data_version = version
                    return True
                await trio.sleep(_DATA_VERSION_POLL_S)
        return False


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

