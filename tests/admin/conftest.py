"""Fixtures for the admin API tests: the two stacks (SQLite alone, PostgreSQL + Redis
Streams) and real daemon processes."""

from pathlib import Path

import psycopg
import pytest

from tests.admin.helpers import Stack


@pytest.fixture
def pg_admin(pg_clean: str) -> str:
    """The run's PostgreSQL database with no jobs and no fleet-wide queue pause."""
    with psycopg.connect(pg_clean, autocommit=True) as conn:
        conn.execute("DELETE FROM gochatd_queue_pauses")
    return pg_clean


@pytest.fixture(params=["sqlite", "pg_redis"])
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Stack:
    """Every endpoint is exercised on SQLite (polling) and on PostgreSQL + Redis (streams)."""
    if request.param == "sqlite":
        return Stack("sqlite", f"sqlite:///{tmp_path / 'jobs.db'}", "")
    return Stack(
        "pg_redis", str(request.getfixturevalue("pg_admin")),
        str(request.getfixturevalue("redis_url")),
    )


@pytest.fixture
def sqlite_stack(tmp_path: Path) -> Stack:
    return Stack("sqlite", f"sqlite:///{tmp_path / 'jobs.db'}", "")


@pytest.fixture
def pg_redis_stack(pg_admin: str, redis_url: str) -> Stack:
    return Stack("pg_redis", pg_admin, redis_url)


