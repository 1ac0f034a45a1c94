"""Fixtures for ``gochatd migrate``: the run's PostgreSQL database as a move's source (the
scratch destination, ``pg_scratch``, comes from tests/conftest.py)."""

from __future__ import annotations

import psycopg
import pytest


@pytest.fixture
def pg_source(pg_clean: str) -> str:
    """The run's (migrated) database, emptied, with no migration state left over."""
    with psycopg.connect(pg_clean, autocommit=True) as conn:
        conn.execute("DELETE FROM gochatd_migrations")
    return pg_clean
