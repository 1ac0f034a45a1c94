"""The workflow units ``fn(db, ...)`` (docs/workflows.md): a workflow write in one
transaction, and the reads of a job's links and a batch's progress.

What happens when a dependency finishes is not here: migration 0019's trigger resolves it
in the transaction that moves the dependency to its final state, whoever moves it."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from gochatd.errors import IdempotencyConflict, JobNotFound
from gochatd.model import TERMINAL, AfterCommit, EnqueueResult, JobStatus
from gochatd.store.db import Db
from gochatd.store.enqueue_many import pg_enqueue_params, sqlite_enqueue_params
from gochatd.store.ops import insert_one
from gochatd.store.rows import database_time
from gochatd.workflows.model import (
    HELD_UNTIL,
    Batch,
    Dependency,
    JobLinks,
    Workflow,
    WorkflowItem,
    WorkflowResult,
)


def enqueue_workflow(db: Db, workflow: Workflow, after_commit: AfterCommit | None
                     ) -> WorkflowResult:
    """Every item in one transaction, then ``after_commit`` (the XADD of the items due now)."""
    with db.transaction():
        existing = _lock(db, workflow)
        batch_id = _insert_batch(db, workflow)
        results: list[EnqueueResult] = []
        for item in workflow.items:
            parents = [(i, existing[i]) for i in item.depends_on]
            parents += [(results[k].job.id, results[k].job.status) for k in item.after]
            results.append(_write_item(db, item, parents, batch_id if item.member else None))
        opened = {results[k].job.id for item in workflow.items for k in item.after}
        opened |= {i for item in workflow.items for i in item.depends_on
                   if existing[i] not in TERMINAL}
        if opened:
            db.write("mark_has_dependents", {"ids": db.list(sorted(opened))})
        if batch_id is not None:
            db.write("set_batch_callbacks", {"id": batch_id,
                                             "on_success_id": _id(results, workflow.on_success),
                                             "on_complete_id": _id(results, workflow.on_complete)})
    if after_commit is not None:
        after_commit(results)
    return WorkflowResult(results, batch_id)


def _lock(db: Db, workflow: Workflow) -> dict[int, JobStatus]:
    """The existing dependencies, locked, by id; each must be in its dependent's tenant."""
    wanted = {(i, item.request.tenant_id) for item in workflow.items for i in item.depends_on}
    if not wanted:
        return {}
    rows = db.read("lock_dependencies", {"ids": db.list(sorted({i for i, _ in wanted}))})
    found = {int(r[0]): (str(r[1]), JobStatus(r[2])) for r in rows}
    for job_id, tenant in sorted(wanted):
        if job_id not in found or found[job_id][0] != tenant:
            # Another tenant's job is named as missing: its existence is not told.
            raise JobNotFound(job_id)
    return {i: status for i, (_, status) in found.items()}


def _insert_batch(db: Db, workflow: Workflow) -> int | None:
    if not workflow.batch:
        return None
    members = [item for item in workflow.items if item.member]
    tenant = members[0].request.tenant_id if members else workflow.items[0].request.tenant_id
    return int(db.write("insert_batch", {"tenant_id": tenant, "size": len(members)})[0][0])


def _id(results: Sequence[EnqueueResult], index: int | None) -> int | None:
    return None if index is None else results[index].job.id


def _write_item(db: Db, item: WorkflowItem, parents: list[tuple[int, JobStatus]],
                batch_id: int | None) -> EnqueueResult:
    """One job: held while a dependency is open, cancelled when one already failed (unless
    ``run_if_failed``), else due as asked; its edges; its batch."""
    open_ = [i for i, status in parents if status not in TERMINAL]
    failed = [(i, s) for i, s in parents
              if s in (JobStatus.DEAD, JobStatus.CANCELLED) and not item.run_if_failed]
    request = item.request
    if open_ or failed:
        request = dataclasses.replace(request, scheduled_at=HELD_UNTIL, delay_s=None)
    params = (pg_enqueue_params if db.dialect == "postgres" else sqlite_enqueue_params)(request)
    result = insert_one(db, request, params)
    if result.conflict:
        assert request.idempotency_key is not None
        raise IdempotencyConflict(request.tenant_id, request.idempotency_key, result.job.id)
    if not result.created:  # an idempotent repeat: its links were written the first time
        return result
    if parents:
        db.write("insert_dependencies", {"tenant_id": request.tenant_id, **_edges(
            db, result.job.id, parents, item.run_if_failed)})
    if not (open_ or failed or batch_id is not None):
        return result
    why = f"dependency {failed[0][0]} ended {failed[0][1].value}" if failed else None
    rows = db.write("hold_job", {"id": result.job.id, "waits_on": 0 if failed else len(open_),
                                 "batch_id": batch_id, "failed": why})
    return EnqueueResult(db.job(rows[0]), created=True)


def _edges(db: Db, job_id: int, parents: list[tuple[int, JobStatus]], run_if_failed: bool
           ) -> dict[str, Any]:
    resolved = [(i, s.value if s in TERMINAL else None) for i, s in parents]
    if db.dialect == "postgres":
        return {"job_id": job_id, "run_if_failed": run_if_failed,
                "ids": [i for i, _ in resolved], "statuses": [s for _, s in resolved]}
    return {"job_id": job_id, "run_if_failed": int(run_if_failed),
            "edges": json.dumps([list(e) for e in resolved])}


def job_links(db: Db, job_id: int, with_results: bool = True) -> JobLinks | None:
    """The job's waits_on, batch and dependencies (None: no such job); their results only
    ``with_results``."""
    rows = db.read("get_job_links", {"id": job_id})
    if not rows:
        return None
    deps = [Dependency(job_id=int(r[0]), status=JobStatus(r[1]), run_if_failed=bool(r[2]),
                       resolved=r[3] is not None,
                       result=None if r[4] is None else json.loads(r[4]))
            for r in db.read("list_dependencies", {"id": job_id, "with_results": with_results})]
    waits_on, batch, callback_of = rows[0]
    return JobLinks(int(waits_on), None if batch is None else int(batch), deps,
                    None if callback_of is None else int(callback_of))


def get_batch(db: Db, batch_id: int) -> Batch | None:
    rows = db.read("get_batch", {"id": batch_id})
    if not rows:
        return None
    r = rows[0]
    counts = {str(s): int(n) for s, n in db.read("count_batch_members", {"id": batch_id})}
    return Batch(id=int(r[0]), tenant_id=str(r[1]), size=int(r[2]),
                 on_success_id=None if r[3] is None else int(r[3]),
                 on_complete_id=None if r[4] is None else int(r[4]),
                 created_at=database_time(r[5]), counts=counts)
