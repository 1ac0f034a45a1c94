"""Fixtures for tests that run real ``gochatd`` processes."""

import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.support.e2e_jobs import reset_executions

PG_DSN = os.environ.get("GOCHAT_TEST_PG_DSN", "postgresql://root@127.0.0.1:5432/test")




@pytest.fixture
def pg_jobs(pg_clean: str) -> str:
    """The run's migrated database: no jobs, an empty ``test_executions`` table."""
    reset_executions(pg_clean)
    return pg_clean


@pytest.fixture
def fresh_pg_url() -> Iterator[str]:
    """A brand-new, un-migrated database, dropped afterwards."""
    name = f"gochatd_e2e_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_DSN, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = PG_DSN.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
