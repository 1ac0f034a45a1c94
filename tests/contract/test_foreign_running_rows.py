"""A row a foreign producer wrote as 'running' without a lease is taken back by the reaper:
nobody heartbeats it, so it must not stay running forever."""

from __future__ import annotations

from gochatd.model import JobStatus
from gochatd.store import JobStore
from tests.contract.helpers import raw_sql


async def test_running_row_without_lease_is_reaped(store: JobStore, backend_url: str) -> None:
    await raw_sql(
        backend_url,
        "INSERT INTO background_jobs (job_type, status, attempts) VALUES ('sys:noop', 'running', 1)",
    )
    result = await store.reap_expired_leases()
    assert len(result.retried) == 1
    job = await store.get_job(result.retried[0].job_id)
    assert job is not None and job.status is JobStatus.RETRYING
    assert job.error_class == "lease_expired"
