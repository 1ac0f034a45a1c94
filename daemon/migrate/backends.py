"""One database as the migrator sees it: a plain synchronous connection and the queries of
sql/<dialect>/migrate.sql.

The migrator is a batch command, not the daemon: it moves rows in big batches on one
connection per side, so it uses psycopg's and sqlite3's blocking APIs directly (no event
loop, no pool). Schema upgrades go through the daemon's own store (see schema.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import Jsonb
from psycopg.types.string import TextLoader

from gochatd.errors import UserError
from gochatd.migrate.canonical import Row, decode_row, utc_to_epoch
from gochatd.migrate.tables import Table
from gochatd.obs.redact import mask_url
from gochatd.store.queries import load_queries
from gochatd.store.sqlite import sqlite_url_path

_SQLITE_BUSY_MS = 5000
_PG_MAX_PARAMS = 65_535


class MigrateError(UserError):
    """A user-fixable problem with a migration: one line on stderr, exit 2."""


@cache
def query(dialect: str, name: str, table: Table | None = None) -> str:
    sql = load_queries(dialect, "migrate.sql")[name]
    if table is None:
        return sql
    mark = "%s" if dialect == "postgres" else "?"
    updates = [c for c in table.columns if c != table.key]
    return (sql.replace("{table}", table.name).replace("{key}", table.key)
            .replace("{columns}", ", ".join(table.columns))
            .replace("{placeholders}", ", ".join(mark for _ in table.columns))
            .replace("{assignments}", ", ".join(f"{c} = excluded.{c}" for c in updates)))


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A parsed ``--from``/``--to`` URL."""

    role: str  # "source" or "destination"
    url: str
    dialect: str
    #: What makes two URLs the same database (host, port and name; or the file's real path).
    identity: str

    @property
    def masked(self) -> str:
        return mask_url(self.url)


def parse_endpoint(role: str, url: str) -> Endpoint:
    if url.startswith(("postgresql://", "postgres://")):
        try:
            info = conninfo_to_dict(url)
        except psycopg.ProgrammingError:
            raise MigrateError(f"--{_flag(role)}: not a valid PostgreSQL URL") from None
        identity = "pg:{}:{}/{}".format(info.get("host", ""), info.get("port", "5432"),
                                        info.get("dbname", ""))
        return Endpoint(role, url, "postgres", identity)
    if url.startswith("sqlite://"):
        path = sqlite_url_path(url)
        if not path or path == ":memory:":
            raise MigrateError(f"--{_flag(role)}: sqlite:/// needs a file path")
        return Endpoint(role, url, "sqlite", "sqlite:" + os.path.realpath(path))
    raise MigrateError(f"--{_flag(role)}: scheme must be postgresql:// or sqlite:///")


def _flag(role: str) -> str:
    return "from" if role == "source" else "to"


class Database:
    """A connection to one side. Opened lazily: a missing SQLite file is never created."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.dialect = endpoint.dialect
        self._pg: psycopg.Connection[tuple[Any, ...]] | None = None
        self._lite: sqlite3.Connection | None = None
        self._lite_marks: bool | None = None

    # -- connection ----------------------------------------------------------------------

    def exists(self) -> bool:
        """False only for a SQLite file that is not there yet."""
        return self.dialect == "postgres" or Path(sqlite_url_path(self.endpoint.url)).exists()

    def connect(self) -> None:
        if self._pg is not None or self._lite is not None:
            return
        where = f"cannot open the {self.endpoint.role} {self.endpoint.masked}"
        if self.dialect == "postgres":
            try:
                # prepare_threshold=None: nothing prepared, so a pooler in transaction mode
                # (PgBouncer) between here and the server is no matter.
                self._pg = psycopg.connect(self.endpoint.url, autocommit=True, connect_timeout=5,
                                           prepare_threshold=None)
            except psycopg.Error as exc:
                raise MigrateError(f"{where}: {_short(exc)}") from None
            # jsonb as its text, decoded like SQLite's (canonical.py): a result may be a bare
            # JSON string, which parsed would be indistinguishable from JSON text.
            self._pg.adapters.register_loader("jsonb", TextLoader)
            return
        path = sqlite_url_path(self.endpoint.url)
        if not Path(path).exists():
            raise MigrateError(f"{where}: no such file: {Path(path).absolute()}")
        try:
            conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {_SQLITE_BUSY_MS}")
        except sqlite3.Error as exc:
            raise MigrateError(f"{where}: {_short(exc)}") from None
        self._lite = conn

    def close(self) -> None:
        if self._pg is not None:
            self._pg.close()
            self._pg = None
        if self._lite is not None:
            self._lite.close()
            self._lite = None
        self._lite_marks = None

    def fetch(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        self.connect()
        if self._pg is not None:
            return self._pg.execute(sql, params).fetchall()
        return self._lite_run(sql, params).fetchall()

    def execute(self, sql: str, params: dict[str, Any] | None = None) -> None:
        self.connect()
        if self._pg is not None:
            self._pg.execute(sql, params)
            return
        self._lite_run(sql, params)

    def _lite_run(self, sql: str, params: dict[str, Any] | None) -> sqlite3.Cursor:
        """SQLite prepares a statement again when another process changed the schema, a few
        times; a ``migrate start`` installing its triggers meanwhile can outrun that."""
        assert self._lite is not None
        for _ in range(3):
            try:
                return self._lite.execute(sql, params or {})
            except sqlite3.OperationalError as exc:
                if "schema has changed" not in str(exc):
                    raise
        return self._lite.execute(sql, params or {})

    def execute_script(self, sql: str) -> None:
        """Several statements without parameters (DDL): one simple query on PostgreSQL,
        ``executescript`` on SQLite."""
        self.connect()
        if self._pg is not None:
            self._pg.execute(sql.encode())  # bytes: no parameters, so several statements
            return
        assert self._lite is not None
        self._lite.executescript(sql)

    # -- schema --------------------------------------------------------------------------

    def schema_version(self) -> int:
        """The highest applied migration; 0 for an empty database or a missing file."""
        if not self.exists():
            return 0
        if not self.fetch(query(self.dialect, "has_schema_table"))[0][0]:
            return 0
        return int(self.fetch(query(self.dialect, "schema_version"))[0][0])

    # -- rows ----------------------------------------------------------------------------

    def tenants(self) -> list[str]:
        return [r[0] for r in self.fetch(query(self.dialect, "tenants"))]

    def count(self, table: Table, tenant: str | None) -> int:
        if table.tenant_scoped:
            sql = query(self.dialect, "count_tenant_rows", table)
            return int(self.fetch(sql, {"tenant": tenant})[0][0])
        return int(self.fetch(query(self.dialect, "count_rows", table))[0][0])

    def read_batch(self, table: Table, tenant: str | None, after: Any, limit: int) -> list[Row]:
        """Up to ``limit`` rows with key > ``after``, in key order, decoded to neutral values."""
        if table.tenant_scoped:
            sql = query(self.dialect, "tenant_batch", table)
            raw = self.fetch(sql, {"tenant": tenant, "after": after, "limit": limit})
        else:
            raw = self.fetch(query(self.dialect, "global_batch", table),
                             {"after": after, "limit": limit})
        return [decode_row(table, r) for r in raw]

    def write_batch(self, table: Table, rows: Sequence[Row]) -> None:
        """Upsert rows by primary key in one transaction (replaying a batch is harmless)."""
        if not rows:
            return
        self.connect()
        params = [self._encode(table, row) for row in rows]
        try:
            if self._pg is not None:
                # Multi-row INSERTs: one round trip per chunk instead of one per row, and
                # within PostgreSQL's 65535 bind parameters per statement.
                per = _PG_MAX_PARAMS // len(table.columns)
                # A RawCursor takes PostgreSQL's own $n placeholders: psycopg does not have
                # to parse a 24,000-parameter query per batch (most of the time otherwise).
                with self._pg.transaction(), psycopg.RawCursor(self._pg) as cur:
                    cur.execute(query(self.dialect, "migrator_write"))
                    for at in range(0, len(params), per):
                        chunk = params[at:at + per]
                        cur.execute(_multi_row_upsert(table, len(chunk)),
                                    [v for row in chunk for v in row])
                return
            sql = query(self.dialect, "upsert", table)
            assert self._lite is not None
            marked = self._marks_writes()
            self._lite.execute("BEGIN IMMEDIATE")
            try:
                if marked:
                    self._lite.execute(query(self.dialect, "migrator_write"))
                self._lite.executemany(sql, params)
                if marked:
                    self._lite.execute(query(self.dialect, "migrator_write_end"))
            except BaseException:
                self._lite.execute("ROLLBACK")
                raise
            self._lite.execute("COMMIT")
        except (psycopg.IntegrityError, sqlite3.IntegrityError) as exc:
            # Another row already holds a unique value (e.g. an idempotency key) under a
            # different id: name the constraint, never the values.
            raise MigrateError(
                f"the destination refused a {table.name} row: {_constraint(exc)}; "
                "it holds different rows for this tenant already"
            ) from None

    def _marks_writes(self) -> bool:
        """SQLite: whether this database has 0019's marker of the migrator's writes (see
        migrate.sql's migrator_write); read once per connection."""
        if self._lite_marks is None:
            self._lite_marks = bool(self.fetch(query(self.dialect, "has_migrator_writes"))[0][0])
        return self._lite_marks

    # -- changes (migration 0007: catch-up, live validate) --------------------------------

    def change_counter(self) -> int:
        """The last change number drawn. PostgreSQL: by any writer, committed or not (a
        sequence ignores snapshots); SQLite: the committed one (or this read snapshot's)."""
        return int(self.fetch(query(self.dialect, "change_counter"))[0][0])

    def idle(self) -> bool:
        """No transaction is open on this connection (it is in autocommit between them)."""
        if self._pg is not None:
            return self._pg.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        return self._lite is None or not self._lite.in_transaction

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Every read on this connection inside the block sees one state of the database.

        PostgreSQL: a REPEATABLE READ READ ONLY transaction (it takes no xid, so it never
        holds back anyone's safe horizon). SQLite: one read transaction (WAL keeps writers
        going). Nothing may be written on this connection meanwhile (state included)."""
        self.execute(query(self.dialect, "begin_snapshot"))
        try:
            yield
        except BaseException:
            with suppress(psycopg.Error, sqlite3.Error):
                self.execute(query(self.dialect, "abort_snapshot"))
            raise
        self.execute(query(self.dialect, "end_snapshot"))

    def read_changes(self, table: Table, tenant: str | None, after: int, upto: int,
                     limit: int) -> list[tuple[int, Row]]:
        """Up to ``limit`` (change_seq, row) with after < change_seq <= upto, in that order."""
        name = "tenant_changes" if table.tenant_scoped else "global_changes"
        raw = self.fetch(query(self.dialect, name, table),
                         _change_params(table, tenant, after, upto, limit))
        return [(int(r[-1]), decode_row(table, r[:-1])) for r in raw]

    def changed_keys(self, table: Table, tenant: str | None, after: int, upto: int,
                     limit: int) -> list[tuple[int, Any]]:
        """Like read_changes, keys only."""
        name = "tenant_changed_keys" if table.tenant_scoped else "global_changed_keys"
        raw = self.fetch(query(self.dialect, name, table),
                         _change_params(table, tenant, after, upto, limit))
        return [(int(seq), key) for seq, key in raw]

    def tombstones(self, table: Table, tenant: str | None, after: int, upto: int,
                   limit: int) -> list[tuple[int, Any]]:
        """Up to ``limit`` (change_seq, key) of rows deleted with after < change_seq <= upto."""
        name = "tenant_tombstones" if table.tenant_scoped else "global_tombstones"
        raw = self.fetch(query(self.dialect, name, table),
                         _change_params(table, tenant, after, upto, limit))
        return [(int(seq), key_from_text(table, key)) for seq, key in raw]

    def delete_keys(self, table: Table, tenant: str | None, keys: Sequence[Any]) -> None:
        """Delete these keys (of this tenant only, for a tenant table) in one statement."""
        if not keys:
            return
        name = "delete_tenant_keys" if table.tenant_scoped else "delete_global_keys"
        self.execute(query(self.dialect, name, table), self._keys_params(table, tenant, keys))

    def read_keys(self, table: Table, tenant: str | None, keys: Sequence[Any]) -> list[Row]:
        """The rows of these keys that exist (of this tenant only, for a tenant table)."""
        if not keys:
            return []
        name = "tenant_rows_by_keys" if table.tenant_scoped else "global_rows_by_keys"
        raw = self.fetch(query(self.dialect, name, table),
                         self._keys_params(table, tenant, keys))
        return [decode_row(table, r) for r in raw]

    def _keys_params(self, table: Table, tenant: str | None,
                     keys: Sequence[Any]) -> dict[str, Any]:
        values = list(keys) if self.dialect == "postgres" else json.dumps(list(keys))
        params: dict[str, Any] = {"keys": values}
        if table.tenant_scoped:
            params["tenant"] = tenant
        return params

    def advance_sequence(self, table: Table) -> None:
        """Move the id sequence past every id in the table, so new inserts cannot collide."""
        if not table.serial_key:
            return
        self.execute(query(self.dialect, "advance_sequence", table))
        if self.dialect == "sqlite":
            self.execute(query(self.dialect, "advance_sequence_existing", table))

    def _encode(self, table: Table, row: Row) -> tuple[Any, ...]:
        out: list[Any] = []
        for column in table.columns:
            value = row[column]
            if value is None:
                out.append(None)
            elif column in table.json_columns:
                if self.dialect == "postgres":
                    out.append(Jsonb(value))
                else:
                    out.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
            elif column in table.timestamps:
                out.append(value if self.dialect == "postgres" else utc_to_epoch(value))
            elif column in table.booleans:
                out.append(bool(value) if self.dialect == "postgres" else int(bool(value)))
            else:
                out.append(value)
        return tuple(out)


def key_from_text(table: Table, text: str) -> Any:
    """A key as a tombstone stores it (text) -> as the table holds it."""
    return int(text) if table.serial_key else text


def _change_params(table: Table, tenant: str | None, after: int, upto: int,
                   limit: int) -> dict[str, Any]:
    params: dict[str, Any] = {"after": after, "upto": upto, "limit": limit}
    if table.tenant_scoped:
        params["tenant"] = tenant
    return params


@cache
def _multi_row_upsert(table: Table, rows: int) -> str:
    width = len(table.columns)
    one = "(" + ", ".join("%s" for _ in table.columns) + ")"
    numbered = ", ".join(
        "(" + ", ".join(f"${r * width + c + 1}" for c in range(width)) + ")" for r in range(rows)
    )
    sql = query("postgres", "upsert", table)
    many = sql.replace("VALUES " + one, "VALUES " + numbered, 1)
    assert many != sql, "migrate.sql's upsert lost its VALUES (...) shape"
    return many


def _constraint(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    name = getattr(diag, "constraint_name", None)
    if name:
        return f"constraint {name}"
    text = _short(exc)
    return text.split(":")[0] if ":" in text else text
