"""Dependent jobs, chains and batches from ``Client`` and ``SyncClient`` (docs/workflows.md):
the items checked and built into one ``Workflow`` here, written by the store in one
transaction (workflows/store.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from gochatd.errors import InvalidJob
from gochatd.model import MAX_ID, EnqueueRequest, EnqueueResult
from gochatd.new_job import NewJob
from gochatd.obs import otel
from gochatd.workflows.model import (
    MAX_DEPENDENCIES,
    MAX_WORKFLOW_ITEMS,
    EnqueuedBatch,
    Workflow,
    WorkflowItem,
    WorkflowResult,
)

Item = NewJob | Mapping[str, Any]


def dependency_ids(depends_on: Any) -> tuple[int, ...]:
    """``depends_on`` as distinct job ids, in the order given."""
    if isinstance(depends_on, str | bytes | Mapping) or not isinstance(depends_on, Sequence):
        raise InvalidJob("depends_on: expected a list of job ids")
    ids: list[int] = []
    for value in depends_on:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ID:
            raise InvalidJob("depends_on: each item must be a job id (an integer >= 1)")
        if value not in ids:
            ids.append(value)
    if len(ids) > MAX_DEPENDENCIES:
        raise InvalidJob(f"depends_on: at most {MAX_DEPENDENCIES} jobs")
    return tuple(ids)


def _check_waiting(request: EnqueueRequest, where: str) -> None:
    if request.delay_s is not None or request.scheduled_at is not None:
        raise InvalidJob(f"{where}: a job with dependencies starts when they finish; it takes "
                         "no delay_s or scheduled_at")
    if request.unique_key is not None or request.unique_for_s is not None:
        raise InvalidJob(f"{where}: a job with dependencies cannot be a unique job")


def _one_tenant(requests: Sequence[EnqueueRequest], what: str) -> None:
    if len({r.tenant_id for r in requests}) > 1:
        raise InvalidJob(f"{what}: every job must be in the same tenant")
    if len(requests) > MAX_WORKFLOW_ITEMS:
        raise InvalidJob(f"{what}: at most {MAX_WORKFLOW_ITEMS} jobs")


def dependent(request: EnqueueRequest, depends_on: tuple[int, ...], run_if_failed: bool
              ) -> Workflow:
    _check_waiting(request, "depends_on")
    return Workflow((WorkflowItem(request, depends_on=depends_on,
                                  run_if_failed=run_if_failed),))


def chain_of(requests: Sequence[EnqueueRequest]) -> Workflow:
    """Each job after the one before it; the first starts as asked."""
    if not requests:
        raise InvalidJob("chain: expected at least one job")
    _one_tenant(requests, "chain")
    for index, request in enumerate(requests[1:], start=1):
        _check_waiting(request, f"chain[{index}]")
    return Workflow(tuple(WorkflowItem(r, after=(i - 1,) if i else ())
                          for i, r in enumerate(requests)))


def batch_of(members: Sequence[EnqueueRequest], on_success: EnqueueRequest | None,
             on_complete: EnqueueRequest | None) -> Workflow:
    """The members, then on_success (after every member, only if all completed) and
    on_complete (after every member, however each ended)."""
    if not members:
        raise InvalidJob("batch: expected at least one job")
    callbacks = [c for c in (on_success, on_complete) if c is not None]
    _one_tenant([*members, *callbacks], "batch")
    for name, callback in (("on_success", on_success), ("on_complete", on_complete)):
        if callback is not None:
            _check_waiting(callback, name)
    for index, request in enumerate([*members, *callbacks]):
        if request.idempotency_key is not None or request.unique_key is not None:
            # A batch is written once: a replayed member would join no batch (docs/workflows.md).
            raise InvalidJob(f"batch[{index}]: a batch's jobs take no idempotency_key or "
                             "unique_key")
    everyone = tuple(range(len(members)))
    items = [WorkflowItem(m, member=True) for m in members]
    success = complete = None
    if on_success is not None:
        success = len(items)
        items.append(WorkflowItem(on_success, after=everyone))
    if on_complete is not None:
        complete = len(items)
        items.append(WorkflowItem(on_complete, after=everyone, run_if_failed=True))
    return Workflow(tuple(items), batch=True, on_success=success, on_complete=complete)


def enqueued_batch(workflow: Workflow, written: WorkflowResult) -> EnqueuedBatch:
    assert written.batch_id is not None
    results = written.results

    def at(index: int | None) -> Any:
        return None if index is None else results[index].job

    members = [r.job for r, item in zip(results, workflow.items, strict=True) if item.member]
    return EnqueuedBatch(written.batch_id, members, at(workflow.on_success),
                         at(workflow.on_complete))


async def traced_async(write: Callable[[Workflow], Awaitable[WorkflowResult]],
                       flow: Workflow) -> WorkflowResult:
    """The workflow write, inside a producer span while tracing is on (docs/otel.md)."""
    spans = otel.SPANS
    if spans is None:
        return await write(flow)
    return await spans.enqueue_workflow_async(write, flow)


def traced_sync(write: Callable[[Workflow], WorkflowResult], flow: Workflow) -> WorkflowResult:
    spans = otel.SPANS
    if spans is None:
        return write(flow)
    return spans.enqueue_workflow_sync(write, flow)


def created(results: Sequence[EnqueueResult]) -> list[EnqueueResult]:
    return [r for r in results if r.created]
