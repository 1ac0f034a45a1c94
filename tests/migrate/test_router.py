"""The routed store (migrate/routing/store.py) against real databases: a moved tenant is served from
its destination, the others stay home, a frozen tenant's writes are held, and a write sent
with stale routes is refused by the source and redone where the tenant now lives."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import trio

from gochatd.migrate.backends import Database
from gochatd.migrate.copy import copy_scope
from gochatd.migrate.phases import Context, Move, cutover, start
from gochatd.migrate.route_control import route_url, set_route
from gochatd.migrate.routing.store import RoutedStore
from gochatd.migrate.state import DatabaseStateStore
from gochatd.migrate.tables import TENANT_TABLES
from gochatd.migrate.validate import validate_scope
from gochatd.model import EnqueueRequest, Finish, JobStatus, Outcome
from gochatd.store import open_routed_store
from gochatd.store.route_table import RouteState
from gochatd.worker.job_types import JobTypeDefaults
from tests.migrate.support import file_url, migrated, open_db


@pytest.fixture(params=["sqlite-to-postgres", "postgres-to-postgres"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    if request.param == "sqlite-to-postgres":
        home = migrated(file_url(tmp_path / "home.db"))
    else:
        home = str(request.getfixturevalue("pg_source"))
    yield home, migrated(str(request.getfixturevalue("pg_scratch")))


def _move_tenant(home: str, destination: str, tenant: str) -> None:
    """start, copy, validate and cutover one tenant (synchronous: the migrator's way)."""
    source, dest = open_db(home), open_db(destination, "destination")
    try:
        label = dest.endpoint.masked
        ctx = Context(source, dest, DatabaseStateStore(source), label, batch_size=100,
                      ack_timeout_s=5)
        move = Move(tenant, ((tenant, TENANT_TABLES),))
        start(ctx, move)
        copy_scope(source, dest, scope=tenant, tables=TENANT_TABLES, state=ctx.state,
                   destination_label=label)
        report = validate_scope(source, dest, scope=tenant, tables=TENANT_TABLES,
                                state=ctx.state, destination_label=label)
        assert report["equal"], report
        cutover(ctx, move, window_s=3600)
    finally:
        source.close()
        dest.close()


def _tenant_ids(url: str, tenant: str) -> set[int]:
    db = open_db(url)
    try:
        return {int(r[0]) for r in db.fetch(
            "SELECT id FROM background_jobs WHERE tenant_id = "
            + ("%(t)s" if db.dialect == "postgres" else ":t"), {"t": tenant})}
    finally:
        db.close()


async def _opened(url: str) -> RoutedStore:
    store = open_routed_store(url)
    await store.open()
    return store


async def test_a_moved_tenant_is_served_from_its_destination(
    pair: tuple[str, str]
) -> None:
    home, destination = pair
    store = await _opened(home)
    stale = await _opened(home)  # reads the routes once, before the move
    try:
        before = {t: (await store.enqueue(EnqueueRequest("t:x", {"n": 1}, tenant_id=t))).job.id
                  for t in ("acme", "other")}
        await trio.to_thread.run_sync(_move_tenant, home, destination, "acme")
        await store.refresh_routes()
        assert store.routes.destination_of("acme") is not None
        assert store.routes.destination_of("other") is None

        acme = (await store.enqueue(EnqueueRequest("t:x", {"n": 2}, tenant_id="acme"))).job.id
        other = (await store.enqueue(EnqueueRequest("t:x", {"n": 2}, tenant_id="other"))).job.id
        assert acme in _tenant_ids(destination, "acme")
        assert acme not in _tenant_ids(home, "acme")
        assert other in _tenant_ids(home, "other")
        assert acme > max(before.values()) + (1 << 39)  # the destination's ids keep apart

        # The stale store's enqueue reaches the source, which refuses it (the route
        # trigger); it re-reads the routes and lands in the destination.
        late = (await stale.enqueue(EnqueueRequest("t:x", {"n": 3}, tenant_id="acme"))).job.id
        assert late in _tenant_ids(destination, "acme")
        assert stale.routes.destination_of("acme") is not None

        # Claims come from both databases, each within its tenants: acme's old copy in the
        # source is never claimed.
        claimed = await store.claim_due_jobs(["default"], 100, "w1", 30)
        by_tenant = {(c.job.tenant_id, c.job.id) for c in claimed}
        assert by_tenant == {("acme", before["acme"]), ("acme", acme), ("acme", late),
                             ("other", before["other"]), ("other", other)}
        applied = await store.finish_jobs([
            Finish(c.job.id, "w1", c.fence, Outcome.COMPLETED, c.job.tenant_id)
            for c in claimed])
        assert applied == {c.job.id for c in claimed}
        job = await store.get_job(before["acme"])
        assert job is not None and job.status is JobStatus.COMPLETED
        counts = await store.count_jobs_by_status()
        assert counts.get(JobStatus.COMPLETED) == 5  # acme's source copy is not counted
    finally:
        await store.close()
        await stale.close()

    # A foreign producer's plain SQL into the source is refused for the moved tenant only.
    source = open_db(home)
    try:
        sql = ("INSERT INTO background_jobs (tenant_id, job_type) VALUES ("
               + ("%(t)s" if source.dialect == "postgres" else ":t") + ", 't:x')")
        with pytest.raises((psycopg.errors.ReadOnlySqlTransaction, sqlite3.IntegrityError)):
            source.execute(sql, {"t": "acme"})
        source.execute(sql, {"t": "other"})
    finally:
        source.close()


async def test_a_frozen_tenants_writes_are_held_until_the_route_changes(
    pair: tuple[str, str]
) -> None:
    home, destination = pair
    store = await _opened(home)
    try:
        source = open_db(home)
        url = route_url(open_db(destination, "destination").endpoint)
        set_route(source, "acme", url, RouteState.FROZEN)
        await store.refresh_routes()
        done: list[int] = []
        finished = trio.Event()

        async def enqueue() -> None:
            result = await store.enqueue(EnqueueRequest("t:x", {}, tenant_id="acme"))
            done.append(result.job.id)
            finished.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(enqueue)
            with trio.move_on_after(0.5):
                await finished.wait()
            assert not done, "a frozen tenant's enqueue went through"
            # Another tenant is not held meanwhile.
            await store.enqueue(EnqueueRequest("t:x", {}, tenant_id="other"))
            set_route(source, "acme", url, RouteState.SOURCE)  # the cutover was abandoned
        assert done and done[0] in _tenant_ids(home, "acme")
        source.close()
    finally:
        await store.close()



async def test_a_daemons_job_types_reach_every_database_it_serves_from(
    pair: tuple[str, str]
) -> None:
    """gochatd_job_types is not copied by the migrator: the daemon's routed store publishes
    into home and into each destination it opens, before it follows the route, so a moved
    tenant's producers find the defaults in their new database (docs/job-types.md)."""
    home, destination = pair
    store = await _opened(home)
    try:
        typed = JobTypeDefaults("t:typed", queue="low", max_attempts=2)
        assert await store.publish_job_types([typed], "w1") == []
        assert [t.defaults for t in await store.list_job_types()] == [typed]
        assert _published(destination) == []
        await trio.to_thread.run_sync(_move_tenant, home, destination, "acme")
        await store.refresh_routes()
        assert _published(destination) == [("t:typed", "low", 2, "w1")]
        job = (await store.enqueue(EnqueueRequest("t:typed", {}, tenant_id="acme"))).job
        assert job.id in _tenant_ids(destination, "acme")
        assert (job.queue, job.max_attempts) == ("low", 2)
        # A later publication goes to both.
        later = JobTypeDefaults("t:typed", queue="later", max_attempts=3)
        [change] = await store.publish_job_types([later], "w2")
        assert change.before.defaults == typed
        assert _published(destination) == [("t:typed", "later", 3, "w2")]
        assert _published(home) == [("t:typed", "later", 3, "w2")]
    finally:
        await store.close()


def _published(url: str) -> list[tuple[str, str, int, str]]:
    db = open_db(url)
    try:
        return [(str(r[0]), str(r[1]), int(r[2]), str(r[3])) for r in db.fetch(
            "SELECT job_type, queue, max_attempts, published_by FROM gochatd_job_types")]
    finally:
        db.close()

def test_route_urls_carry_no_password(tmp_path: Path) -> None:
    db = open_db("postgresql://u:s3cret@db.example:5433/jobs?sslmode=require", "destination")
    assert route_url(db.endpoint) == "postgresql://u@db.example:5433/jobs?sslmode=require"
    rel = Database(open_db(file_url(tmp_path / "x.db"), "destination").endpoint)
    assert route_url(rel.endpoint).startswith("sqlite:////")


def test_dry_runs_of_the_route_steps_say_what_they_would_do_and_write_nothing(
    pair: tuple[str, str],
) -> None:
    home, destination = pair
    source = open_db(home)
    source.execute("INSERT INTO background_jobs (tenant_id, job_type) VALUES ('acme', 't:x')")
    gochatd = str(Path(sys.executable).with_name("gochatd"))
    expected = {"start": "would route it to tracking", "cutover": "would refuse",
                "rollback": "would refuse: it was not cut over"}
    for step, says in expected.items():
        done = subprocess.run([gochatd, "migrate", step, "--from", home, "--to", destination,
                               "--tenants", "acme", "--dry-run"], capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        assert says in done.stdout, done.stdout
    assert source.fetch("SELECT count(*) FROM gochatd_routes")[0][0] == 0
    assert source.fetch("SELECT count(*) FROM gochatd_migrations")[0][0] == 0
    source.close()
