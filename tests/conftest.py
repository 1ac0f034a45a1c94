"""Shared fixtures: real PostgreSQL, real SQLite files, real redis-server processes.

A missing service is an error, never a skip: CI must fail when PostgreSQL or redis-server
is not there. PostgreSQL comes from GOCHAT_TEST_PG_DSN (default: root@127.0.0.1:5432/test);
each test run creates its own database on that server and drops it at the end.
"""

import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest

from gochatd.store import JobStore, open_store
from tests.support.daemon_process import DaemonFactory
from tests.support.pgbouncer import PgBouncer, pgbouncer_binary
from tests.support.redis_cluster import RedisCluster
from tests.support.redis_server import RedisServer

PG_DSN = os.environ.get("GOCHAT_TEST_PG_DSN", "postgresql://root@127.0.0.1:5432/test")


_TRACKED = ("background_jobs", "reply_outbox", "gochatd_job_dependencies", "gochatd_batches",
            "gochatd_queue_pauses", "gochatd_periodic_slots")
UNTRACK_SQL = "; ".join(
    [f"DROP TRIGGER IF EXISTS {table}_track_change ON {table}" for table in _TRACKED]
    + [f"DROP TRIGGER IF EXISTS gochatd_guard_moved ON {table}" for table in _TRACKED]
    + ["DROP INDEX IF EXISTS background_jobs_changes_idx, reply_outbox_changes_idx,"
       " gochatd_job_dependencies_changes_idx, gochatd_batches_changes_idx",
       "DELETE FROM gochatd_change_tracking"]).encode()


def _with_db(dsn: str, dbname: str) -> str:
    base, _, _ = dsn.rpartition("/")
    return f"{base}/{dbname}"


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh database for this test run, migrated once."""
    name = f"gochatd_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(PG_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"PostgreSQL is required at GOCHAT_TEST_PG_DSN={PG_DSN!r}: {exc}")
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = _with_db(PG_DSN, name)
    yield url
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrate_database(url: str) -> None:
    """Every migration, on the database at ``url``."""
    import trio

    async def migrate() -> None:
        store = open_store(url)
        await store.open()
        await store.migrate()
        await store.close()

    trio.run(migrate)


@pytest.fixture(scope="session")
def pg_migrated(pg_url: str) -> str:
    migrate_database(pg_url)
    return pg_url


@pytest.fixture
def pg_scratch() -> Iterator[str]:
    """A second, empty PostgreSQL database (no schema), dropped at the end."""
    name = f"gochatd_scratch_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield _with_db(PG_DSN, name)
    with psycopg.connect(PG_DSN, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_clean(pg_migrated: str) -> str:
    """The run's database with every job removed (ids restart)."""
    with psycopg.connect(pg_migrated, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE background_jobs, job_attempts, reply_outbox, gochatd_periodic_slots,"
            " gochatd_queue_pauses,"
            " gochatd_routes, gochatd_route_acks, gochatd_change_tombstones, gochatd_migrations,"
            " gochatd_job_types, gochatd_job_counts, gochatd_daemons, queue_rate_windows,"
            " gochatd_job_waiters, gochatd_job_dependencies, gochatd_batches"
            " RESTART IDENTITY"
        )
        # A database that never took part in a move: what `gochatd migrate start` installs
        # (tests/migrate run it on this database) goes again.
        conn.execute(UNTRACK_SQL)
    return pg_migrated


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'jobs.db'}"


@pytest.fixture(scope="session")
def redis_binary() -> str:
    found = os.environ.get("GOCHAT_TEST_REDIS_SERVER") or shutil.which("redis-server")
    if not found:
        pytest.fail("redis-server is required on PATH (or GOCHAT_TEST_REDIS_SERVER)")
    return found


@pytest.fixture(scope="session")
def shared_redis(redis_binary: str) -> Iterator[RedisServer]:
    server = RedisServer(redis_binary)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(shared_redis: RedisServer) -> str:
    """A clean logical database on the run's own redis-server."""
    shared_redis.flushall()
    return shared_redis.url


@pytest.fixture
def own_redis(redis_binary: str) -> Iterator[RedisServer]:
    """A redis-server only this test uses, so it may kill and restart it."""
    server = RedisServer(redis_binary)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_cluster(redis_binary: str) -> Iterator[RedisCluster]:
    """A 3-master Redis Cluster only this test uses (its masters may be killed)."""
    cluster = RedisCluster(redis_binary)
    cluster.start()
    yield cluster
    cluster.stop()


def _running_pgbouncer(pg_migrated: str) -> Iterator[PgBouncer]:
    """A pgbouncer in transaction mode in front of the run's (migrated) database."""
    binary = pgbouncer_binary()
    if binary is None:
        pytest.fail("pgbouncer is required (apt-get install pgbouncer; .ci/test installs it)")
    bouncer = PgBouncer(binary, pg_migrated)
    bouncer.start()
    yield bouncer
    bouncer.stop()


@pytest.fixture
def pgbouncer(pg_migrated: str) -> Iterator[PgBouncer]:
    """A pgbouncer of this test's own (a test may stop or restart it)."""
    yield from _running_pgbouncer(pg_migrated)


@pytest.fixture(scope="session")
def shared_pgbouncer(pg_migrated: str) -> Iterator[PgBouncer]:
    """One pgbouncer for the run's tests that only go through it."""
    yield from _running_pgbouncer(pg_migrated)


@pytest.fixture(params=["sqlite", "postgres"])
def backend_url(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_clean"))


@pytest.fixture
async def store(backend_url: str) -> AsyncIterator[JobStore]:
    s = open_store(backend_url)
    await s.open()
    await s.migrate()
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def daemons(tmp_path: Path) -> Iterator[DaemonFactory]:
    """Starts ``gochatd`` processes; any still running at teardown is killed (-9)."""
    factory = DaemonFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.cleanup()
