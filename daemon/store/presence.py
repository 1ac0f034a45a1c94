"""Is there a gochatd database at a URL? Asked by every command but ``serve`` and
``db upgrade`` before it reads or writes, so that a look, a retry or an enqueue never
creates a database no daemon looks at (a SQLite file in the wrong directory, a PostgreSQL
database without the schema).
"""

from __future__ import annotations

from pathlib import Path

from gochatd.errors import UserError
from gochatd.obs.redact import mask_url
from gochatd.store.base import JobStore
from gochatd.store.queries import latest_version
from gochatd.store.sqlite import sqlite_url_path


class NoDatabase(UserError):
    """The URL names no gochatd database (yet)."""


def sqlite_file(database_url: str) -> Path | None:
    """The absolute path of a ``sqlite:`` URL's file (``sqlite:///rel.db`` is relative to the
    working directory, ``sqlite:////abs.db`` absolute); None for PostgreSQL or ``:memory:``."""
    if not database_url.startswith("sqlite://"):
        return None
    rest = sqlite_url_path(database_url)
    if not rest or rest == ":memory:":
        return None
    return Path(rest).absolute()


def where(database_url: str) -> str:
    """The database as a person reads it: a SQLite file's absolute path, or the masked URL."""
    path = sqlite_file(database_url)
    return str(path) if path is not None else mask_url(database_url)


def remedy(database_url: str) -> str:
    """What makes the schema: for a command other than serve."""
    if database_url.startswith("sqlite:"):
        return "run 'gochatd db upgrade' or start the daemon"  # serve migrates SQLite
    return "run 'gochatd db upgrade' or start the daemon with --migrate"


def require_database_file(database_url: str) -> None:
    """Before opening: a SQLite file that is not there is refused (opening would create it)."""
    path = sqlite_file(database_url)
    if path is not None and not path.is_file():
        raise NoDatabase(f"no gochatd database at {path}; {remedy(database_url)}")


async def require_schema(store: JobStore, database_url: str, fix: str | None = None, *,
                         older_ok: bool = False) -> None:
    """After opening: the schema must be there and current (nothing here applies it).
    ``fix`` says how to get it (default: ``remedy``). ``older_ok``: any version will do (the
    clients, which a release may deploy before its ``db upgrade``)."""
    check_schema(store.dialect, await store.schema_version(), database_url, fix,
                 older_ok=older_ok)


def check_schema(dialect: str, current: int, database_url: str, fix: str | None = None, *,
                 older_ok: bool = False) -> None:
    """``require_schema``'s verdict on a version read (``SyncClient`` reads it itself)."""
    fix = fix or remedy(database_url)
    if current == 0:
        what = "database at" if dialect == "sqlite" else "schema in"
        raise NoDatabase(f"no gochatd {what} {where(database_url)}; {fix}")
    latest = latest_version(dialect)
    if current < latest and not older_ok:
        raise NoDatabase(f"the database schema at {where(database_url)} is at version "
                         f"{current}, gochatd needs {latest}; {fix}")
