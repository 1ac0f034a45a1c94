"""``gochatd db upgrade``: the numbered migrations (sql/<dialect>/NNNN_*.up.sql) a database
has not applied yet, in order, in one transaction, each recorded in
``gochatd_schema_migrations``.

A database that took part in a move (``gochatd_change_tracking`` has its row: migration 0010)
gets its change tracking installed again in the same transaction, so an upgrade never leaves
a move's writes unnumbered; any other database runs without it until its first
``gochatd migrate start``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
from psycopg import sql

from gochatd.store.db import sqlite_transaction
from gochatd.store.queries import load_migrations, load_queries

#: pg_advisory_xact_lock key shared by every gochatd: one upgrade at a time.
MIGRATION_LOCK = 0x6F636861


def upgrade_postgres(conn: psycopg.Connection[Any]) -> list[str]:
    applied: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS gochatd_schema_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {row[0] for row in conn.execute(
            "SELECT version FROM gochatd_schema_migrations").fetchall()}
        for migration in load_migrations("postgres"):
            if migration.version in done:
                continue
            conn.execute(sql.SQL(migration.up_sql))
            conn.execute("INSERT INTO gochatd_schema_migrations (version, name) VALUES (%s, %s)",
                         (migration.version, migration.name))
            applied.append(f"{migration.version:04d}_{migration.name}")
        queries = load_queries("postgres", "migrate.sql")
        row = conn.execute(queries["change_tracking_marked"]).fetchone()
        if applied and row and row[0]:
            conn.execute(sql.SQL(queries["install_change_tracking"]))
    return applied


def upgrade_sqlite(conn: sqlite3.Connection) -> list[str]:
    applied: list[str] = []
    with sqlite_transaction(conn):
        conn.execute(
            "CREATE TABLE IF NOT EXISTS gochatd_schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0))"
        )
        done = {r[0] for r in conn.execute("SELECT version FROM gochatd_schema_migrations")}
        for migration in load_migrations("sqlite"):
            if migration.version in done:
                continue
            for statement in split_statements(migration.up_sql):
                conn.execute(statement)
            conn.execute("INSERT INTO gochatd_schema_migrations (version, name) VALUES (?, ?)",
                         (migration.version, migration.name))
            applied.append(f"{migration.version:04d}_{migration.name}")
        queries = load_queries("sqlite", "migrate.sql")
        if applied and conn.execute(queries["change_tracking_marked"]).fetchone()[0]:
            for statement in split_statements(queries["install_change_tracking"]):
                conn.execute(statement)
    return applied


def split_statements(script: str) -> list[str]:
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
