"""Change tracking (migrations 0007 and 0010, the base of ``gochatd migrate``'s catch-up) is
off in a database that never took part in a move: no trigger numbers its writes and the
counter never moves. ``gochatd migrate start`` installs it; from then on every write is
numbered, whichever way it is written, and ``gochatd db upgrade`` keeps it on such a
database. Each test runs on a database of its own: installing tracking is for good."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from gochatd.migrate.backends import query
from gochatd.migrate.route_control import prepare_source, prepare_tracking
from gochatd.model import Outcome
from gochatd.store import JobStore, open_store
from gochatd.store.queries import load_migrations
from gochatd.store.upgrade import split_statements
from tests.conftest import PG_DSN, _with_db
from tests.contract.helpers import claim_one, enqueue, finish, is_postgres, raw_sql
from tests.migrate.support import open_db


@pytest.fixture(params=["sqlite", "postgres"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of this test's own (the contract's ``store`` runs on it)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'own.db'}"
        return
    name = f"gochatd_tracking_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield _with_db(PG_DSN, name)
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _counter_sql(url: str) -> str:
    return ("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM gochatd_change_seq"
            if is_postgres(url) else "SELECT value FROM gochatd_change_counter")


async def _seq(url: str, job_id: int) -> int:
    rows = await raw_sql(url, "SELECT change_seq FROM background_jobs WHERE id = ?", [job_id])
    return int(rows[0][0])


async def _one_job_through(store: JobStore, url: str) -> list[int]:
    """change_seq after enqueue, claim and finish of one job, and after a foreign UPDATE."""
    job = await enqueue(store)
    seen = [await _seq(url, job.id)]
    claimed = await claim_one(store, job, "w1")
    seen.append(await _seq(url, job.id))
    assert await store.finish_jobs([finish(claimed, Outcome.COMPLETED)]) == {job.id}
    seen.append(await _seq(url, job.id))
    await raw_sql(url, "UPDATE background_jobs SET priority = 3 WHERE id = ?", [job.id])
    seen.append(await _seq(url, job.id))
    return seen


async def test_a_database_that_never_moved_numbers_nothing(store: JobStore,
                                                           backend_url: str) -> None:
    assert await _one_job_through(store, backend_url) == [0, 0, 0, 0]
    assert int((await raw_sql(backend_url, _counter_sql(backend_url)))[0][0]) == 0
    assert not (await raw_sql(backend_url, "SELECT count(*) FROM gochatd_change_tombstones"))[0][0]


async def test_migrate_start_turns_numbering_on_for_every_write(store: JobStore,
                                                               backend_url: str) -> None:
    """What ``start`` installs in the source: every write raises change_seq (gochatd's own
    statements and a foreign UPDATE alike) and the counter never falls behind a number in
    use; a delete leaves a tombstone. Installing twice changes nothing."""
    db = open_db(backend_url)
    try:
        assert "change tracking" in prepare_source(db)
        assert prepare_tracking(db) == []
    finally:
        db.close()
    enqueued, claimed, finished, foreign = await _one_job_through(store, backend_url)
    assert 0 < enqueued < claimed < finished < foreign
    assert int((await raw_sql(backend_url, _counter_sql(backend_url)))[0][0]) >= foreign
    await raw_sql(backend_url, "DELETE FROM background_jobs")
    tombstones = await raw_sql(backend_url, "SELECT change_seq FROM gochatd_change_tombstones")
    assert len(tombstones) == 1 and int(tombstones[0][0]) > foreign


def _migrate_to(url: str, version: int) -> None:
    """Apply the migrations up to ``version`` by hand, as an older release did."""
    wanted = [m for m in load_migrations("postgres" if is_postgres(url) else "sqlite")
              if m.version <= version]
    if is_postgres(url):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE gochatd_schema_migrations (version integer PRIMARY KEY,"
                         " name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
            for m in wanted:
                conn.execute(m.up_sql.encode())
                conn.execute("INSERT INTO gochatd_schema_migrations (version, name)"
                             " VALUES (%s, %s)", (m.version, m.name))
        return
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        conn.execute("CREATE TABLE gochatd_schema_migrations (version INTEGER PRIMARY KEY,"
                     " name TEXT NOT NULL, applied_at REAL NOT NULL DEFAULT 0)")
        for m in wanted:
            for statement in split_statements(m.up_sql):
                conn.execute(statement)
            conn.execute("INSERT INTO gochatd_schema_migrations (version, name) VALUES (?, ?)",
                         (m.version, m.name))
    finally:
        conn.close()


@pytest.mark.parametrize("mid_move", [True, False], ids=["mid-move", "never-moved"])
async def test_upgrade_keeps_tracking_only_where_a_move_started(backend_url: str,
                                                                mid_move: bool) -> None:
    """A database upgraded from 0009 (tracking always on) keeps it when it has a route (a
    move under way), in the upgrade's own transaction, and loses it otherwise."""
    _migrate_to(backend_url, 9)
    if mid_move:
        await raw_sql(backend_url, "INSERT INTO gochatd_routes (tenant_id, destination, state, version)"
                      " VALUES ('acme', 'postgresql://elsewhere/db', 'tracking', 1)")
    store = open_store(backend_url)
    await store.open()
    try:
        assert "0010_change_tracking_on_demand" in await store.migrate()
        db = open_db(backend_url)
        try:
            assert bool(db.fetch(query(db.dialect, "change_tracking_installed"))[0][0]) is mid_move
        finally:
            db.close()
        job = await enqueue(store)
        assert (await _seq(backend_url, job.id) > 0) is mid_move
    finally:
        await store.close()

