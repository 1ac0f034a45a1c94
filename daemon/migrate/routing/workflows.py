"""The workflow calls of the routed store (migrate/routing/store.py): a workflow write where
its tenant lives (every item shares one tenant: client/workflows.py checks it), a job's links
and a batch wherever they are."""

from __future__ import annotations

from collections.abc import Awaitable

from gochatd.migrate.routing.core import RouterBase, ScopedStore
from gochatd.model import AfterCommit
from gochatd.workflows.model import Batch, JobLinks, Workflow, WorkflowResult


class RoutedWorkflows(RouterBase):
    async def enqueue_workflow(self, workflow: Workflow, *,
                               after_commit: AfterCommit | None = None) -> WorkflowResult:
        def call(s: ScopedStore) -> Awaitable[WorkflowResult]:
            return s.enqueue_workflow(workflow, after_commit=after_commit)

        tenant = workflow.items[0].request.tenant_id
        return await self._unless_routed(
            not self.routes.routes, call, lambda: self._for_tenant(tenant, call))

    async def job_links(self, job_id: int, with_results: bool = True) -> JobLinks | None:
        for store in self.active():
            links = await store.job_links(job_id, with_results)
            if links is not None:
                return links
        return None

    async def get_batch(self, batch_id: int) -> Batch | None:
        for store in self.active():
            batch = await store.get_batch(batch_id)
            if batch is not None:
                return batch
        return None
