"""``gochatd.SyncClient`` follows a tenant that ``gochatd migrate`` moved, as ``Client``
does (migrate/routing/sync.py): a client opened before the move has its next write refused by
the source (the route trigger), re-reads the routes, and from then on enqueues, reads and
controls the tenant's jobs in the destination; the other tenants stay home."""

from __future__ import annotations

import gochatd
from gochatd.model import JobStatus
from tests.migrate.test_router import _move_tenant, _tenant_ids, pair

__all__ = ["pair"]  # the fixture, shared with test_router


def test_sync_client_follows_a_moved_tenant(pair: tuple[str, str]) -> None:
    home, destination = pair
    with gochatd.SyncClient(home) as client:  # reads the routes once, before the move
        before = {t: client.enqueue("t:x", {"n": 1}, tenant_id=t).id for t in ("acme", "other")}
        _move_tenant(home, destination, "acme")

        moved = client.enqueue("t:x", {"n": 2}, tenant_id="acme")
        assert moved.id in _tenant_ids(destination, "acme")
        assert moved.id not in _tenant_ids(home, "acme")
        assert moved.id > max(before.values()) + (1 << 39)  # the destination's ids
        stays = client.enqueue("t:x", {"n": 2}, tenant_id="other")
        assert stays.id in _tenant_ids(home, "other")

        batch = client.enqueue_many([gochatd.NewJob("t:x", {"n": 3}, tenant_id="acme"),
                                     gochatd.NewJob("t:x", {"n": 3}, tenant_id="other")])
        assert batch[0].job.id in _tenant_ids(destination, "acme")
        assert batch[1].job.id in _tenant_ids(home, "other")

        got = client.get_job(moved.id)
        assert got is not None and got.tenant_id == "acme"
        copied = client.get_job(before["acme"])  # the copy, read where acme lives now
        assert copied is not None and copied.status is JobStatus.QUEUED
        assert client.cancel(before["acme"]).status is JobStatus.CANCELLED
        assert client.get_job(before["acme"]).status is JobStatus.CANCELLED  # type: ignore[union-attr]

        listed = client.list_jobs(gochatd.JobFilter(tenant_id="acme"))
        assert {j.id for j in listed} == {before["acme"], moved.id, batch[0].job.id}
        everyone = client.list_jobs(gochatd.JobFilter())
        assert {j.id for j in everyone} == {*before.values(), moved.id, stays.id,
                                            *(r.job.id for r in batch)}
