"""Workflows move with their tenant (docs/workflows.md, docs/migrate.md): a job held by its
dependencies and a batch waiting on its members are moved by the installed ``gochatd move
run --cutover`` and released on the destination when their dependencies finish there; and
the destination's copy of the edges stays the source's while catch-up writes it (0019's
trigger does not resolve them a second time there)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
import trio

import gochatd
from gochatd.migrate.catch_up import catch_up_scope
from gochatd.migrate.copy import copy_scope
from gochatd.migrate.state import DatabaseStateStore
from gochatd.migrate.tables import BACKGROUND_JOBS, JOB_DEPENDENCIES, TENANT_TABLES
from gochatd.migrate.validate import validate_scope
from gochatd.model import Finish, JobStatus, Outcome
from gochatd.store import JobStore, open_store
from tests.migrate.support import (
    destination_label,
    file_url,
    migrated,
    open_db,
    read_all,
    record_start,
)

GOCHATD = str(Path(sys.executable).with_name("gochatd"))
PAIRS = ["sqlite->postgres", "postgres->sqlite"]


@pytest.fixture(params=PAIRS)
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    src_kind, dst_kind = request.param.split("->")
    source = (migrated(file_url(tmp_path / "source.db")) if src_kind == "sqlite"
              else str(request.getfixturevalue("pg_source")))
    destination = (file_url(tmp_path / "destination.db") if dst_kind == "sqlite"
                   else str(request.getfixturevalue("pg_scratch")))
    return source, destination


class _Opened:
    """A plain store on one database (no routes followed) and a Client over it."""

    def __init__(self, url: str) -> None:
        self.store: JobStore = open_store(url)

    async def __aenter__(self) -> tuple[JobStore, gochatd.Client]:
        await self.store.open()
        self.client = gochatd.Client(store=self.store)
        await self.client.__aenter__()
        return self.store, self.client

    async def __aexit__(self, *exc: object) -> None:
        await self.client.__aexit__(None, None, None)
        await self.store.close()


async def _complete(store: JobStore, job_id: int, tenant: str, worker: str) -> None:
    [claimed] = await store.claim_jobs([job_id], worker, 30.0)
    done = Finish(job_id, worker, claimed.fence, Outcome.COMPLETED, tenant)
    assert await store.finish_jobs([done]) == {job_id}


async def _waits_on(client: gochatd.Client, job_id: int) -> int:
    links = await client.job_links(job_id)
    assert links is not None
    return links.waits_on


async def _enqueue_workflows(source: str) -> dict[str, Any]:
    """acme: a job held by one dependency, and a batch of two with both callbacks; other:
    a held job of its own, which stays home."""
    async with gochatd.Client(source) as client:
        dep = await client.enqueue("w:a", {"n": 1}, tenant_id="acme", queue="wf")
        held = await client.enqueue("w:b", {"n": 2}, tenant_id="acme", queue="wf",
                                    depends_on=[dep.id])
        batch = await client.batch(
            [gochatd.NewJob("w:m", {"n": i}, queue="wf", tenant_id="acme") for i in (1, 2)],
            on_success=gochatd.NewJob("w:ok", {}, queue="wf", tenant_id="acme"),
            on_complete=gochatd.NewJob("w:done", {}, queue="wf", tenant_id="acme"))
        other_dep = await client.enqueue("w:a", {}, tenant_id="other", queue="wf")
        other = await client.enqueue("w:b", {}, tenant_id="other", queue="wf",
                                     depends_on=[other_dep.id])
        assert await _waits_on(client, held.id) == 1
    assert batch.on_success is not None and batch.on_complete is not None
    return {"dep": dep.id, "held": held.id, "batch": batch.id,
            "members": [j.id for j in batch.jobs], "on_success": batch.on_success.id,
            "on_complete": batch.on_complete.id, "other_dep": other_dep.id,
            "other": other.id}


async def test_a_held_job_and_a_batch_move_and_are_released_on_the_destination(
    pair: tuple[str, str], tmp_path: Path,
) -> None:
    source, destination = pair
    ids = await _enqueue_workflows(source)
    report_file = tmp_path / "run.json"
    done = await trio.run_process(
        [GOCHATD, "move", "run", "--from", source, "--to", destination, "--tenants", "acme",
         "--cutover", "--report", str(report_file)],
        capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(report_file.read_text())
    [entry] = [s for s in report["scopes"] if "cutover" in s]
    tables = entry["validate"]["acme"]["tables"]
    assert tables["gochatd_job_dependencies"]["source"]["count"] == 1 + 2 * 2
    assert tables["gochatd_batches"]["source"]["count"] == 1
    assert all(t["equal"] for t in tables.values())
    assert set(entry["cutover"]["destination_ids_from"]) == {t.name for t in TENANT_TABLES}

    async with _Opened(destination) as (store, client):
        assert await _waits_on(client, ids["held"]) == 1
        assert await store.claim_jobs([ids["held"]], "w0", 30.0) == []  # still held
        await _complete(store, ids["dep"], "acme", "w1")
        assert await _waits_on(client, ids["held"]) == 0
        [released] = await store.claim_jobs([ids["held"]], "w2", 30.0)
        assert released.id == ids["held"]

        batch = await client.get_batch(ids["batch"])
        assert batch is not None and batch.size == 2 and batch.counts == {"queued": 2}
        assert (batch.on_success_id, batch.on_complete_id) == (ids["on_success"],
                                                               ids["on_complete"])
        for n, member in enumerate(ids["members"]):
            assert await _waits_on(client, ids["on_success"]) == 2 - n
            await _complete(store, member, "acme", f"m{n}")
        for callback in (ids["on_success"], ids["on_complete"]):
            assert await _waits_on(client, callback) == 0
            [run] = await store.claim_jobs([callback], "w3", 30.0)
            assert run.id == callback
        batch = await client.get_batch(ids["batch"])
        assert batch is not None and batch.counts == {"completed": 2}  # members only

    # The source keeps its read-only copy as it was (its guard refuses writes to the moved
    # tenant's edges and batches too); the tenant that stayed still works there.
    src = open_db(source)
    try:
        for table in ("gochatd_job_dependencies", "gochatd_batches"):
            with pytest.raises((psycopg.Error, sqlite3.Error), match="read-only"):
                src.execute(f"UPDATE {table} SET tenant_id = 'acme' WHERE tenant_id = 'acme'")
    finally:
        src.close()
    async with _Opened(source) as (store, client):
        assert await _waits_on(client, ids["held"]) == 1
        assert await _waits_on(client, ids["other"]) == 1
        await _complete(store, ids["other_dep"], "other", "w4")
        assert await _waits_on(client, ids["other"]) == 0
        other = await client.get_job(ids["other"])
        assert other is not None and other.status is JobStatus.QUEUED


def _sql(url: str, *statements: str) -> None:
    db = open_db(url)
    try:
        for statement in statements:
            db.execute(statement)
    finally:
        db.close()


def test_catch_up_writes_the_sources_edges_not_its_own_resolution(
    pair: tuple[str, str],
) -> None:
    """A dependency whose completion reaches the destination after its dependent's row (it
    changed again since) must not count the dependent down there a second time: the
    destination's trigger leaves the migrator's writes alone."""
    source, destination = pair
    with gochatd.SyncClient(source) as client:
        first = client.enqueue("w:a", {}, tenant_id="acme", queue="wf")
        second = client.enqueue("w:a", {}, tenant_id="acme", queue="wf")
        held = client.enqueue("w:b", {}, tenant_id="acme", queue="wf",
                              depends_on=[first.id, second.id])
    record_start(source, destination, ["acme"])
    src, dst = open_db(source), open_db(destination, "destination")
    phase: dict[str, Any] = {"scope": "acme", "tables": TENANT_TABLES,
                             "state": DatabaseStateStore(src),
                             "destination_label": destination_label(destination)}
    try:
        copy_scope(src, dst, **phase)
        # The first dependency completes (its edge resolved, the held job down to 1), then
        # changes again: catch-up writes the held job before the dependency's completion.
        _sql(source, f"UPDATE background_jobs SET status = 'completed' WHERE id = {first.id}",
             f"UPDATE background_jobs SET priority = 7 WHERE id = {first.id}")
        applied = catch_up_scope(src, dst, **phase)
        assert applied["tables"]["background_jobs"]["rows"] == 2
        assert applied["tables"]["gochatd_job_dependencies"]["rows"] == 1
        checked = validate_scope(src, dst, **phase)
        assert checked["equal"], checked
    finally:
        src.close()
        dst.close()
    [there] = [r for r in read_all(destination, BACKGROUND_JOBS, "acme") if r["id"] == held.id]
    assert there["waits_on"] == 1 and there["status"] == "queued"
    edges = {r["depends_on_id"]: r["resolved_status"]
             for r in read_all(destination, JOB_DEPENDENCIES, "acme")}
    assert edges == {first.id: "completed", second.id: None}
