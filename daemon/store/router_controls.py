"""The job controls of the routed store (store/router.py): one job's control where its
tenant lives, a bulk control on every active database, each within its tenant scope."""

from __future__ import annotations

from gochatd.errors import JobNotFound
from gochatd.model import BulkResult, Job, JobAction, JobSelection
from gochatd.store.router_base import RouterBase


class RoutedControls(RouterBase):
    async def delete_job(self, job_id: int) -> Job:
        job = await self._holder_of(job_id)
        return await self._for_tenant(job.tenant_id, lambda s: s.delete_job(job_id))

    async def discard_job(self, job_id: int) -> Job:
        job = await self._holder_of(job_id)
        return await self._for_tenant(job.tenant_id, lambda s: s.discard_job(job_id))

    async def run_job_now(self, job_id: int) -> tuple[Job, bool]:
        job = await self._holder_of(job_id)
        return await self._for_tenant(job.tenant_id, lambda s: s.run_job_now(job_id))

    async def control_jobs(self, action: JobAction, selection: JobSelection) -> BulkResult:
        parts = await self._each(lambda s: s.control_jobs(action, selection))
        return BulkResult(action, sum(p.matched for p in parts), sum(p.changed for p in parts))

    async def _holder_of(self, job_id: int) -> Job:
        """The job as the database that holds it now has it (JobNotFound if none does)."""
        for store in self._active():
            job = await store.get_job(job_id)
            if job is not None:
                return job
        raise JobNotFound(job_id)
