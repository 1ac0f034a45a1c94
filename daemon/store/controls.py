"""The job controls of both SQL stores: an operator's delete, discard and run now of one job,
and every control in bulk (sql/<dialect>/queries.sql, "Job controls"; docs/operations.md).

Each write is one guarded statement: it changes a row only while the row is in a status the
control acts on (``model.ACTION_STATUSES``), so a job claimed, finished or changed by
someone else since it was read is left as it is. A bulk control walks its selection in
batches of ``BULK_BATCH`` ids by ascending id (a keyset): no statement touches more than a
batch, and no lock is held from one batch to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from gochatd.errors import InvalidTransition, JobNotFound
from gochatd.model import (
    ACTION_STATUSES,
    CLAIMABLE,
    BulkResult,
    Job,
    JobAction,
    JobSelection,
)
from gochatd.store.core import StoreCore
from gochatd.store.db import Db
from gochatd.workflows.model import HELD_UNTIL

#: Jobs per pick and per guarded write of a bulk control.
BULK_BATCH = 500

#: The guarded batch writes of each control, in order (a bulk cancel ends waiting jobs and
#: asks the workers of running ones to stop them, as ``cancel_job`` does for one).
_BULK_WRITES: dict[JobAction, tuple[str, ...]] = {
    JobAction.RETRY: ("requeue_jobs",),
    JobAction.CANCEL: ("cancel_waiting_jobs", "request_cancel_running_jobs"),
    JobAction.DELETE: ("delete_jobs",),
    JobAction.DISCARD: ("discard_jobs",),
    JobAction.RUN_NOW: ("run_jobs_now",),
}


class SqlControlOps(StoreCore):
    """Mixed into ``SqlJobStore``: each control is one unit (below)."""

    async def delete_job(self, job_id: int) -> Job:
        return await self._unit(delete_job, job_id)

    async def discard_job(self, job_id: int) -> Job:
        return await self._unit(discard_job, job_id)

    async def run_job_now(self, job_id: int) -> tuple[Job, bool]:
        return await self._unit(run_job_now, job_id)

    async def control_jobs(self, action: JobAction, selection: JobSelection) -> BulkResult:
        walk = BulkWalk(action, selection)
        while (step := walk.next_step()) is not None:
            walk.take(await self._unit(step))
        return walk.result()


# -- one job: a unit each ------------------------------------------------------------------


def delete_job(db: Db, job_id: int) -> Job:
    rows = db.write("delete_job", {"id": job_id})
    if rows:
        return db.job(rows[0])
    job = found(db, job_id)
    raise InvalidTransition(f"cannot delete job {job_id}: it is {job.status} "
                            "(cancel it first, then delete it)")


def discard_job(db: Db, job_id: int) -> Job:
    rows = db.write("discard_job", {"id": job_id})
    if rows:
        return db.job(rows[0])
    job = found(db, job_id)
    raise InvalidTransition(
        f"cannot discard job {job_id}: it is {job.status}, not queued or retrying")


def run_job_now(db: Db, job_id: int) -> tuple[Job, bool]:
    rows = db.write("run_job_now", {"id": job_id})
    if rows:
        return db.job(rows[0]), True
    job = found(db, job_id)
    if job.status in CLAIMABLE and job.scheduled_at >= HELD_UNTIL:
        raise InvalidTransition(f"cannot run job {job_id} now: it waits on its dependencies")
    if job.status in CLAIMABLE:  # due already: nothing to change
        return job, False
    raise InvalidTransition(
        f"cannot run job {job_id} now: it is {job.status}, not queued or retrying")


def found(db: Db, job_id: int) -> Job:
    rows = db.read("get_job", {"id": job_id})
    if not rows:
        raise JobNotFound(job_id)
    return db.job(rows[0])


# -- bulk: one unit per batch --------------------------------------------------------------


class BulkWalk:
    """A bulk control as a walk of batch units: ``next_step()`` is the next batch's unit
    (None: done), ``take`` its answer (ids picked, rows changed). The async store awaits
    each unit, ``SyncClient`` runs it on its lent connection: no batch holds a connection
    (SQLite's only one) for the whole walk."""

    def __init__(self, action: JobAction, selection: JobSelection) -> None:
        self.action = action
        self.status = selection.status.value if selection.status else None
        self.flt = {"status": self.status, "queue": selection.queue,
                    "tenant_id": selection.tenant_id, "job_type": selection.job_type,
                    "limit": BULK_BATCH}
        self.statuses = sorted(s.value for s in ACTION_STATUSES[action])
        self._chunks = _id_chunks(selection.ids)
        self._chunk: list[int] | None = None
        self._after_id: int | None = None  # None: the next chunk
        self.matched = self.changed = 0

    def next_step(self) -> Callable[[Db], tuple[list[int], int]] | None:
        if self._after_id is None:
            chunk = next(self._chunks, _DONE)
            if chunk is _DONE:
                return None
            self._chunk, self._after_id = chunk, 0
        chunk, after_id = self._chunk, self._after_id
        return lambda db: self._batch(db, chunk, after_id)

    def _batch(self, db: Db, chunk: list[int] | None, after_id: int) -> tuple[list[int], int]:
        ids = None if chunk is None else db.list(chunk)
        rows = db.read("pick_jobs", {**self.flt, "statuses": db.list(self.statuses),
                                     "ids": ids, "after_id": after_id})
        picked = [int(r[0]) for r in rows]
        changed = 0
        for name in _BULK_WRITES[self.action] if picked else ():
            changed += len(db.write(name, {"ids": db.list(picked), "status": self.status}))
        return picked, changed

    def take(self, answer: tuple[list[int], int]) -> None:
        picked, changed = answer
        self.matched += len(picked)
        self.changed += changed
        self._after_id = picked[-1] if len(picked) >= BULK_BATCH else None

    def result(self) -> BulkResult:
        return BulkResult(self.action, self.matched, self.changed)


_DONE: Any = object()


def _id_chunks(ids: Sequence[int] | None) -> Iterator[list[int] | None]:
    """The ids in sorted batches (None: the whole filter, walked by the keyset)."""
    if ids is None:
        yield None
        return
    ordered = sorted(set(ids))
    for start in range(0, len(ordered), BULK_BATCH):
        yield ordered[start:start + BULK_BATCH]
