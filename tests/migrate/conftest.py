"""Fixtures for ``gochatd migrate``: SQLite files, the run's PostgreSQL database, and a
second, scratch PostgreSQL database per test (created and dropped here, the way
tests/conftest.py makes the run's database)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.conftest import PG_DSN, _with_db


@pytest.fixture
def pg_source(pg_clean: str) -> str:
    """The run's (migrated) database, emptied, with no migration state left over."""
    with psycopg.connect(pg_clean, autocommit=True) as conn:
        conn.execute("DELETE FROM gochatd_migrations")
    return pg_clean


@pytest.fixture
def pg_scratch() -> Iterator[str]:
    """A second, empty PostgreSQL database (no schema), dropped at the end."""
    name = f"gochatd_migrate_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield _with_db(PG_DSN, name)
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
