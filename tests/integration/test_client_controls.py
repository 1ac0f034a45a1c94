"""The clients' job controls (``delete``, ``run_now``, ``discard``, ``bulk``): the async
``Client`` and ``SyncClient`` run the same guarded store operations and raise the errors of
``cancel``/``retry``."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import gochatd
from gochatd.errors import InvalidJob, InvalidTransition, JobNotFound
from gochatd.model import JobStatus
from tests.integration.helpers import is_postgres, migrate


async def test_client_controls(backend_url: str) -> None:
    if not is_postgres(backend_url):
        await migrate(backend_url)
    async with gochatd.Client(backend_url) as client:
        later = await client.enqueue("ctl:a", {"n": 1}, queue="parked", delay_s=3600.0)
        now = await client.run_now(later.id)
        assert now.scheduled_at < later.scheduled_at and now.status is JobStatus.QUEUED
        assert (await client.run_now(later.id)) == now  # due already: unchanged
        dead = await client.discard(later.id)
        assert (dead.status, dead.error_class) == (JobStatus.DEAD, "discarded")
        with pytest.raises(InvalidTransition, match="not queued or retrying"):
            await client.discard(later.id)
        with pytest.raises(InvalidTransition):
            await client.run_now(later.id)
        assert (await client.delete(later.id)).id == later.id
        assert await client.get_job(later.id) is None
        for control in (client.delete, client.run_now, client.discard):
            with pytest.raises(JobNotFound):
                await control(later.id)

        ids = [(await client.enqueue("ctl:b", {"n": n}, queue="parked")).id for n in range(3)]
        result = await client.bulk("discard", gochatd.JobSelection(job_type="ctl:b"),
                                   actor="a test")
        assert (result.matched, result.changed) == (3, 3)
        result = await client.bulk("delete", gochatd.JobSelection(ids=tuple(ids[:2])))
        assert result.to_dict() == {"action": "delete", "matched": 2, "changed": 2}
        with pytest.raises(InvalidJob, match="needs ids or at least one filter"):
            await client.bulk("delete", gochatd.JobSelection())
        with pytest.raises(InvalidJob, match=r"^action: expected one of retry, cancel, delete"):
            await client.bulk("explode", gochatd.JobSelection(queue="parked"))


async def test_sync_client_controls(backend_url: str) -> None:
    if not is_postgres(backend_url):
        await migrate(backend_url)

    def operations() -> dict[str, Any]:
        with gochatd.SyncClient(backend_url) as client:
            job = client.enqueue("ctl:s", {}, queue="parked", delay_s=3600.0)
            got: dict[str, Any] = {"due": client.run_now(job.id).scheduled_at < job.scheduled_at}
            got["dead"] = client.discard(job.id).error_class
            try:
                client.discard(job.id)
            except InvalidTransition:
                got["refused"] = True
            got["bulk"] = client.bulk("retry", gochatd.JobSelection(ids=(job.id,))).changed
            got["deleted"] = client.delete(job.id).id == job.id
            try:
                client.delete(job.id)
            except JobNotFound:
                got["gone"] = True
            return got

    got = await trio.to_thread.run_sync(operations)
    assert got == {"due": True, "dead": "discarded", "refused": True, "bulk": 1, "deleted": True,
                   "gone": True}


async def test_enum_fields_take_their_strings_on_both_clients(backend_url: str) -> None:
    """``JobFilter(status="dead")`` and ``JobSelection(status="dead")`` mean the member; a
    string that names none is refused naming the field (not an AttributeError later)."""
    if not is_postgres(backend_url):
        await migrate(backend_url)
    async with gochatd.Client(backend_url) as client:
        job = await client.enqueue("ctl:e", {}, queue="parked", delay_s=3600.0)
        await client.bulk("discard", gochatd.JobSelection(status="queued", job_type="ctl:e"))
        dead = await client.list_jobs(gochatd.JobFilter(status="dead", job_type="ctl:e"))
        assert [(j.id, j.status) for j in dead] == [(job.id, JobStatus.DEAD)]
        result = await client.bulk("retry", gochatd.JobSelection(status="dead", job_type="ctl:e"))
        assert (result.matched, result.changed) == (1, 1)
        assert await client.list_jobs(gochatd.JobFilter(status=JobStatus.DEAD)) == []
    for make in (gochatd.JobFilter, gochatd.JobSelection):
        with pytest.raises(InvalidJob, match=r"^status: expected one of queued, running, "):
            make(status="deadd")
        with pytest.raises(InvalidJob, match=r"^status: expected one of"):
            make(status=3)

    def sync_listing() -> list[int]:
        with gochatd.SyncClient(backend_url) as client:
            client.bulk("cancel", gochatd.JobSelection(status="queued", job_type="ctl:e"))
            return [j.id for j in client.list_jobs(gochatd.JobFilter(status="cancelled"))]

    assert await trio.to_thread.run_sync(sync_listing) == [job.id]
