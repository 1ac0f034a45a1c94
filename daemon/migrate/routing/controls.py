"""The job controls of the routed store (migrate/routing/store.py): one job's control where its
tenant lives, a bulk control on every active database, each within its tenant scope."""

from __future__ import annotations

from gochatd.errors import JobNotFound
from gochatd.migrate.routing.core import RouterBase
from gochatd.model import BulkResult, Job, JobAction, JobSelection


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
        for store in self.active():
            job = await store.get_job(job_id)
            if job is not None:
                return job
        raise JobNotFound(job_id)

    # -- what an idle daemon waits for (store/idle.py) -------------------------------------

    @property
    def control_notifications(self) -> bool:
        """The home database's (known once it is open)."""
        return self.home.control_notifications

    async def wait_for_control(self, what: str, timeout_s: float) -> bool:
        """Pauses live with the every-tenant route's store; routes and the fleet at home."""
        store = self.store_now(None) if what == "pauses" else self.home
        return await store.wait_for_control(what, timeout_s)

    async def next_lease_expiry_in_s(self, expired_within_s: float | None = None
                                     ) -> float | None:
        found = [x for x in await self._each(
            lambda s: s.next_lease_expiry_in_s(expired_within_s)) if x is not None]
        return min(found) if found else None
