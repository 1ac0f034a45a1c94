"""The migrations produce the expected schema: a fresh database migrated to the latest
version is listed (tables, columns, indexes, triggers) and compared with the checked-in
listing in tests/contract/schema/<dialect>.txt. A migration that changes the schema changes
that file in the same commit (run with GOCHAT_WRITE_SCHEMA=1 to rewrite it, then review the
diff)."""

from __future__ import annotations

import os
import sqlite3
import uuid
from pathlib import Path

import psycopg
import trio

from gochatd.store import open_store
from tests.conftest import PG_DSN, _with_db

EXPECTED = Path(__file__).parent / "schema"


def _migrate(url: str) -> list[str]:
    async def run() -> list[str]:
        store = open_store(url)
        await store.open()
        try:
            return await store.migrate()
        finally:
            await store.close()

    return trio.run(run)


def _compare(dialect: str, listing: list[str]) -> None:
    path = EXPECTED / f"{dialect}.txt"
    text = "\n".join(listing) + "\n"
    if os.environ.get("GOCHAT_WRITE_SCHEMA") == "1":
        path.write_text(text)
    expected = path.read_text().splitlines()
    missing = [line for line in expected if line not in listing]
    extra = [line for line in listing if line not in expected]
    assert not missing and not extra, f"{dialect} schema differs: missing {missing}, extra {extra}"


def _postgres_listing(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default"
            " FROM information_schema.columns WHERE table_schema = 'public'"
            " ORDER BY table_name, column_name").fetchall()
        indexes = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public'"
            " ORDER BY indexname").fetchall()
        triggers = conn.execute(
            "SELECT DISTINCT event_object_table, trigger_name FROM information_schema.triggers"
            " WHERE trigger_schema = 'public' ORDER BY 1, 2").fetchall()
    return ([f"column {t}.{c} {ty} null={n} default={d}" for t, c, ty, n, d in columns]
            + [f"index {d}" for (d,) in indexes]
            + [f"trigger {t}.{n}" for t, n in triggers])


def _sqlite_listing(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        objects = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master"
            " WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
        # An index's definition (whitespace folded); tables are listed by column below.
        listing = [f"{kind} {table}.{name}"
                   + (f" {' '.join(sql.split())}" if kind == "index" and sql else "")
                   for kind, name, table, sql in objects]
        for (table,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite_%' ORDER BY name").fetchall():
            for _, name, kind, notnull, default, pk in conn.execute(
                    f'PRAGMA table_info("{table}")').fetchall():
                listing.append(f"column {table}.{name} {kind} notnull={notnull}"
                               f" default={default} pk={pk}")
        return listing
    finally:
        conn.close()


def test_postgres_migrations_produce_the_expected_schema() -> None:
    name = f"gochatd_schema_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = _with_db(PG_DSN, name)
        assert _migrate(url), "a fresh database applied no migration"
        _compare("postgres", _postgres_listing(url))
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_sqlite_migrations_produce_the_expected_schema(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    assert _migrate(f"sqlite:///{path}"), "a fresh database applied no migration"
    _compare("sqlite", _sqlite_listing(path))
