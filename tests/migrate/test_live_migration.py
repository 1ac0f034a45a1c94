"""A live move under load: daemons run and a producer enqueues the whole time while
``gochatd migrate run --cutover`` (a real process) moves tenants to PostgreSQL. Afterwards
every job ran exactly once, none was lost, the moved tenants' new jobs live in the
destination only, and the others' stay home."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio

from gochatd.model import EnqueueRequest, JobStatus
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import Tracker, make_registry, started_worker, wait_all_status
from tests.migrate.support import file_url, open_db
from tests.support.harness import make_settings

GOCHATD = str(Path(sys.executable).with_name("gochatd"))
TENANTS = ("acme", "globex", "initech")


def _ids_in(url: str, tenant: str) -> set[int]:
    db = open_db(url)
    try:
        mark = "%(t)s" if db.dialect == "postgres" else ":t"
        return {int(r[0]) for r in db.fetch(
            f"SELECT id FROM background_jobs WHERE tenant_id = {mark}", {"t": tenant})}
    finally:
        db.close()


@pytest.fixture(params=[
    ("sqlite", "--all"),  # the README's "Outgrowing SQLite"
    ("postgres", "--tenants=acme"),  # one tenant between clusters; the others stay
], ids=["sqlite-all", "postgres-one-tenant"])
def move(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str, bool]:
    """(source, destination, scope option, whether the daemons use Redis streams)"""
    kind, scope = request.param
    # SQLite: the daemon creates the file.
    source = (file_url(tmp_path / "jobs.db") if kind == "sqlite"
              else str(request.getfixturevalue("pg_source")))
    return source, str(request.getfixturevalue("pg_scratch")), scope, kind == "postgres"


async def test_a_move_under_load_loses_nothing_and_runs_nothing_twice(
    tmp_path: Path, redis_url: str, move: tuple[str, str, str, bool],
) -> None:
    source, destination, scope, streams = move
    redis = redis_url if streams else ""
    moved = set(TENANTS) if scope == "--all" else {"acme"}
    tracker = Tracker()
    registry = make_registry(HandlerSpec("test:count", tracker.counting(seconds=0.002)))
    settings = make_settings(source, redis, worker_concurrency=8)
    polling = make_settings(source, "", worker_concurrency=4)
    ids: list[int] = []
    after_cutover: list[int] = []
    report_file = tmp_path / "run.json"

    async with started_worker(settings, registry=registry) as first, \
            started_worker(polling, registry=registry) as second:
        client = first.worker.client
        migrated_event = trio.Event()
        under_way = trio.Event()

        async def produce() -> None:
            n = 0
            while True:
                tenant = TENANTS[n % len(TENANTS)]
                result = await client.enqueue("test:count", {"n": n}, tenant_id=tenant)
                ids.append(result.id)
                if len(ids) == 150:
                    under_way.set()
                if migrated_event.is_set():
                    after_cutover.append(result.id)
                    if len(after_cutover) >= 90:
                        return
                n += 1
                await trio.sleep(0.002)

        async def migrate() -> None:
            await under_way.wait()  # the move starts with work in flight
            done = await trio.run_process(
                [GOCHATD, "migrate", "run", "--from", source, "--to", destination, scope,
                 "--cutover", "--batch-size", "100", "--report", str(report_file)],
                capture_stdout=True, capture_stderr=True, check=False)
            assert done.returncode == 0, done.stderr.decode()
            migrated_event.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            nursery.start_soon(migrate)
        # Both daemons acknowledged the cutover before the migrator returned.
        for run in (first, second):
            assert all(run.worker.store.routes.destination_of(t) for t in moved)
        jobs = await wait_all_status(first.worker.store, ids, JobStatus.COMPLETED,
                                     timeout_s=60)
        # A late write through the routed store after the move lands where it belongs.
        late = await second.worker.store.enqueue(EnqueueRequest("sys:noop", {}, tenant_id="acme"))

    assert len(ids) == len(set(ids)) >= 240
    assert sorted(tracker.executions) == sorted(ids)  # none lost
    assert set(tracker.executions.values()) == {1}  # none run twice
    assert all(j.status is JobStatus.COMPLETED for j in jobs.values())

    report = json.loads(report_file.read_text())
    cut = [s["cutover"] for s in report["scopes"] if "cutover" in s]
    assert cut and all(c["fleet_destination"]["waiting_for"] == [] for c in cut)
    validated = [s["validate"] for s in report["scopes"] if "validate" in s]
    assert validated and all(v["equal"] for entry in validated for v in entry.values())

    by_id = {i: jobs[i].tenant_id for i in after_cutover}
    for tenant in TENANTS:
        new = {i for i, t in by_id.items() if t == tenant}
        assert new, tenant
        if tenant in moved:
            assert new <= _ids_in(destination, tenant)
            assert not new & _ids_in(source, tenant)
        else:
            assert new <= _ids_in(source, tenant)
    assert late.job.id in _ids_in(destination, "acme")
