"""Fixtures for tests that run real ``gochatd`` processes: the command of a non-editable
install of this checkout (tests/support/installed.py), as a user runs it."""

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.support import daemon_process, installed
from tests.support.e2e_jobs import reset_executions

PG_DSN = os.environ.get("GOCHAT_TEST_PG_DSN", "postgresql://root@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def installed_gochatd() -> Path:
    """``build/installed-venv/bin/gochatd``, built once per session."""
    return installed.build()


@pytest.fixture(autouse=True)
def _use_installed_gochatd(installed_gochatd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process this tier starts (daemons, ``run_cli``) is the installed command."""
    monkeypatch.setattr(daemon_process, "GOCHATD", str(installed_gochatd))


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
