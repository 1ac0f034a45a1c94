"""What a store operation sees: ``Db``, one connection under one query set.

Every store operation is a plain synchronous unit ``fn(db, ...)`` (store/ops.py and the
feature parts). The async stores hand a unit to a connection thread (one hop, handoff.py);
``SyncClient`` runs the same unit on a connection lent to the calling thread
(store/lender.py). A dialect's ``Db`` says how a named query runs and how a list or a row
crosses the driver; that, and the SQL, is all the dialects differ in.

``write`` is one statement that commits on its own; ``transaction()`` groups several into
one (SQLite: the one ``BEGIN IMMEDIATE … COMMIT``, ``sqlite_transaction``); ``serialised()``
groups statements that need not be atomic but that SQLite must not interleave with other
writers (PostgreSQL: nothing, each commits on its own: no extra round trips).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, Protocol

import psycopg

from gochatd.model import Job, JobAttempt
from gochatd.store.attempts import attempt_from_row
from gochatd.store.rows import epoch_to_datetime, job_from_row
from gochatd.store.scope import QuerySet

#: Run by a store on its connection thread right after a batch of finishes committed (the
#: finisher XACKs the batch's stream entries there, so one finish is one thread hop). It
#: must not raise: the states have committed whatever it does.
AfterFinish = Callable[[], None]


class Db(Protocol):
    dialect: str
    queries: QuerySet

    def run(self, sql: str, params: dict[str, Any]) -> list[Any]:
        """One statement's rows (SQL text: a query of the dialect's set)."""
        ...

    def read(self, name: str, params: dict[str, Any]) -> list[Any]:
        """One named query's rows (its statement commits on its own)."""
        ...

    def write(self, name: str, params: dict[str, Any]) -> list[Any]:
        """One named write statement, committed (within ``transaction()``: part of it)."""
        ...

    def transaction(self) -> contextlib.AbstractContextManager[None]: ...
    def serialised(self) -> contextlib.AbstractContextManager[None]: ...
    def list(self, values: Sequence[Any]) -> Any: ...
    def job(self, row: Sequence[Any]) -> Job: ...
    def attempt(self, row: Sequence[Any]) -> JobAttempt: ...


def encode_list(dialect: str, values: Sequence[Any]) -> Any:
    """A list parameter as the dialect's SQL takes it: an array, or SQLite's JSON text."""
    return json.dumps(list(values)) if dialect == "sqlite" else list(values)


def decode_job(dialect: str, row: Sequence[Any]) -> Job:
    return job_from_row(row, epoch_to_datetime) if dialect == "sqlite" else job_from_row(row)


def _as_time(value: datetime | None) -> datetime | None:
    return value


Execute = Callable[[psycopg.Connection[Any], str, dict[str, Any]], psycopg.Cursor[Any]]


class PgDb:
    """A PostgreSQL connection in autocommit: every statement commits on its own."""

    dialect = "postgres"

    def __init__(self, conn: psycopg.Connection[Any], queries: QuerySet,
                 execute: Execute) -> None:
        self.conn = conn
        self.queries = queries
        self._execute = execute

    def run(self, sql: str, params: dict[str, Any]) -> list[Any]:
        cur = self._execute(self.conn, sql, self.queries.params(params))
        return cur.fetchall() if cur.description else []

    def read(self, name: str, params: dict[str, Any]) -> list[Any]:
        return self.run(self.queries.sql[name], params)

    write = read

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return _pg_transaction(self.conn)

    def serialised(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def list(self, values: Sequence[Any]) -> Any:
        return list(values)

    def job(self, row: Sequence[Any]) -> Job:
        return job_from_row(row)

    def attempt(self, row: Sequence[Any]) -> JobAttempt:
        return attempt_from_row(row, _as_time)


@contextlib.contextmanager
def _pg_transaction(conn: psycopg.Connection[Any]) -> Iterator[None]:
    with conn.transaction():
        yield


class SqliteDb:
    """The SQLite connection (autocommit mode: ``isolation_level=None``)."""

    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection, queries: QuerySet) -> None:
        self.conn = conn
        self.queries = queries

    def run(self, sql: str, params: dict[str, Any]) -> list[Any]:
        return self.conn.execute(sql, self.queries.params(params)).fetchall()

    def read(self, name: str, params: dict[str, Any]) -> list[Any]:
        return self.run(self.queries.sql[name], params)

    def write(self, name: str, params: dict[str, Any]) -> list[Any]:
        with self.transaction():
            return self.read(name, params)

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return sqlite_transaction(self.conn)

    serialised = transaction

    def list(self, values: Sequence[Any]) -> Any:
        return json.dumps(list(values))

    def job(self, row: Sequence[Any]) -> Job:
        return job_from_row(row, epoch_to_datetime)

    def attempt(self, row: Sequence[Any]) -> JobAttempt:
        return attempt_from_row(row, epoch_to_datetime)


@contextlib.contextmanager
def sqlite_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """The one write transaction of SQLite: ``BEGIN IMMEDIATE`` (takes the write lock now,
    so a claim or a check-then-insert sees no other writer), ``COMMIT``, or ``ROLLBACK`` on
    any error. Inside one already: part of it."""
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN IMMEDIATE")
    committed = False
    try:
        yield
        conn.execute("COMMIT")
        committed = True
    finally:
        if not committed:
            conn.execute("ROLLBACK")


__all__ = ["Db", "PgDb", "SqliteDb", "decode_job", "encode_list", "sqlite_transaction"]
