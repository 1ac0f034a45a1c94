"""Opening a PostgreSQL connection: the row adapters, the one-line failure, and whether a
pooler sits between us and the server.

A pooler in transaction mode (PgBouncer's ``pool_mode = transaction``) hands each
transaction whichever server connection is free, so nothing may live on a session: no
prepared statements (a statement prepared by one transaction is missing in the next, or
another client's statement of the same name is there instead) and no LISTEN (a pooled
server connection that listens is not read by anybody). ``database_prepare`` decides the
first; ``database_listen_url`` gives LISTEN a direct connection of its own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import Loader
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.string import TextLoader

from gochatd.errors import StoreUnavailable
from gochatd.store.rows import TIME_MAX, TIME_MIN

#: Never prepared automatically (None would refuse prepare=True too): the store says which.
_NEVER_AUTOMATICALLY = 2**31

#: psycopg's own (C, when available) text loader for timestamptz.
_STRICT_TIMESTAMPTZ = psycopg.adapters.get_loader(
    psycopg.adapters.types["timestamptz"].oid, psycopg.pq.Format.TEXT
)


class _LenientTimestamptzLoader(Loader):
    """Foreign SQL may store times Python cannot hold ('infinity', BC, after 9999): clamp
    them rather than fail every fetch that includes such a row."""

    def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
        super().__init__(oid, context)
        assert _STRICT_TIMESTAMPTZ is not None
        self._strict = _STRICT_TIMESTAMPTZ(oid, context)

    def load(self, data: Buffer) -> datetime:
        try:
            value: datetime = self._strict.load(data)
        except psycopg.DataError:
            text = bytes(data)
            return TIME_MIN if text.startswith(b"-") or text.endswith(b"BC") else TIME_MAX
        return value


#: Rows are decoded by ``job_from_row``, which copes with payloads Python cannot load.
ADAPTERS = psycopg.adapt.AdaptersMap(psycopg.adapters)
ADAPTERS.register_loader("timestamptz", _LenientTimestamptzLoader)
ADAPTERS.register_loader("jsonb", TextLoader)


def connect_failure(dsn: str, exc: psycopg.OperationalError) -> str:
    """One line: where, and the server's (or the network's) own reason, without the
    password: ``cannot connect to PostgreSQL at 127.0.0.1:5433: connection refused``."""
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.Error:
        info = {}
    host = str(info.get("host") or "the local socket")
    where = f"{host}:{info.get('port') or 5432}" if info.get("host") else host
    lines = str(exc).strip().splitlines()
    reason = lines[0].rpartition("failed: ")[2].strip() if lines else type(exc).__name__
    reason = reason.removeprefix("FATAL:").strip() or type(exc).__name__
    password = str(info.get("password") or "")
    if password:
        reason = reason.replace(password, "***")
    return f"cannot connect to PostgreSQL at {where}: {reason[:1].lower()}{reason[1:200]}"


def connect(dsn: str) -> psycopg.Connection[Any]:
    """An autocommit connection that prepares nothing unless asked (``prepare=True``)."""
    try:
        return psycopg.Connection.connect(
            dsn, autocommit=True, context=ADAPTERS, connect_timeout=10,
            prepare_threshold=_NEVER_AUTOMATICALLY,
        )
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(connect_failure(dsn, exc)) from None


def behind_pooler(conn: psycopg.Connection[Any]) -> bool:
    """True when the connection goes through a pooler. A pooler answers the startup itself,
    with a cancel key of its own, so the process id it gave is not the server backend's
    (PgBouncer, Odyssey and PgCat all do; ``SHOW VERSION`` would reach the server). One
    round trip, once per store."""
    row = conn.execute("SELECT pg_backend_pid()", prepare=False).fetchone()
    return row is None or int(row[0]) != conn.info.backend_pid

