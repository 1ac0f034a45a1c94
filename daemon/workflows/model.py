"""What a workflow write says and what it answers (docs/workflows.md).

A workflow write is a list of items, each one job plus what it waits for: jobs that exist
(``depends_on``, ids) and earlier items of the same write (``after``, indexes). A plain
``enqueue(depends_on=...)`` is one item; a chain is items each after the one before; a
batch is its members plus callbacks after every member."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gochatd.model import EnqueueRequest, EnqueueResult, Job, JobStatus

#: The due time of a job waiting on its dependencies: nothing claims, dispatches or sweeps
#: it until the last dependency sets it to now (migration 0019). SQLite: 253402214400.0.
HELD_UNTIL = datetime(9999, 12, 31, tzinfo=UTC)
#: The error class of a job cancelled because a dependency ended dead or cancelled.
DEPENDENCY_FAILED = "dependency_failed"
#: Most jobs a job may depend on, and most items of one workflow write.
MAX_DEPENDENCIES = 1000
MAX_WORKFLOW_ITEMS = 1000


@dataclass(frozen=True, slots=True)
class WorkflowItem:
    request: EnqueueRequest
    #: Existing jobs this one waits for (ids).
    depends_on: tuple[int, ...] = ()
    #: Earlier items of the same write this one waits for (indexes).
    after: tuple[int, ...] = ()
    #: Run even when a dependency ends dead or cancelled (a batch's on_complete).
    run_if_failed: bool = False
    #: A member of the write's batch (counted in its progress).
    member: bool = False


@dataclass(frozen=True, slots=True)
class Workflow:
    items: tuple[WorkflowItem, ...]
    #: Record a batch (its members are the items marked ``member``); the callbacks' indexes.
    batch: bool = False
    on_success: int | None = None
    on_complete: int | None = None


@dataclass(frozen=True, slots=True)
class WorkflowResult:
    results: list[EnqueueResult]
    batch_id: int | None = None


@dataclass(frozen=True, slots=True)
class Dependency:
    """One job another waits for: its status now (or as recorded, once pruned), whether the
    waiting job runs even if it fails, and its result (completed jobs, docs/results.md)."""

    job_id: int
    status: JobStatus
    run_if_failed: bool
    resolved: bool
    result: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "status": self.status.value,
                "run_if_failed": self.run_if_failed, "resolved": self.resolved,
                "result": self.result}


@dataclass(frozen=True, slots=True)
class JobLinks:
    """A job's place in a workflow: the dependencies it still waits on, all of them, its
    batch."""

    waits_on: int
    batch_id: int | None
    dependencies: list[Dependency] = field(default_factory=list)
    #: The batch this job is a callback of (a callback is not a member: no ``batch_id``).
    callback_of: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"waits_on": self.waits_on, "batch_id": self.batch_id,
                "depends_on": [d.to_dict() for d in self.dependencies]}


@dataclass(frozen=True, slots=True)
class Batch:
    id: int
    tenant_id: str
    size: int
    on_success_id: int | None
    on_complete_id: int | None
    created_at: datetime
    #: Members by status now.
    counts: dict[str, int]

    @property
    def finished(self) -> int:
        return sum(self.counts.get(s, 0) for s in ("completed", "dead", "cancelled"))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "tenant_id": self.tenant_id, "size": self.size,
                "on_success_id": self.on_success_id, "on_complete_id": self.on_complete_id,
                "created_at": self.created_at.isoformat(), "counts": self.counts,
                "finished": self.finished, "done": self.finished >= self.size}


@dataclass(frozen=True, slots=True)
class EnqueuedBatch:
    """What ``Client.batch`` wrote: the batch's id, its members' rows in order, its
    callbacks' rows."""

    id: int
    jobs: list[Job]
    on_success: Job | None
    on_complete: Job | None
