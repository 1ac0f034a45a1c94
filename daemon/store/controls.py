"""The job controls of both SQL stores: an operator's delete, discard and run now of one job,
and every control in bulk (sql/<dialect>/queries.sql, "Job controls"; docs/operations.md).

Each write is one guarded statement: it changes a row only while the row is in a status the
control acts on (``model.ACTION_STATUSES``), so a job claimed, finished or changed by
someone else since it was read is left as it is. A bulk control walks its selection in
batches of ``BULK_BATCH`` ids by ascending id (a keyset): no statement touches more than a
batch, and no lock is held from one batch to the next.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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


class SqlControlOps:
    """Mixed into ``SqlJobStore``; uses its ``_read``/``_write``/``_list``/``_job``."""

    async def _read(self, name: str, params: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    async def _write(self, name: str, params: dict[str, Any]) -> list[Any]:
        raise NotImplementedError

    def _list(self, values: Sequence[Any]) -> Any:
        raise NotImplementedError

    def _job(self, row: Sequence[Any]) -> Job:
        raise NotImplementedError

    async def get_job(self, job_id: int) -> Job | None:
        raise NotImplementedError

    # -- one job ---------------------------------------------------------------------------

    async def delete_job(self, job_id: int) -> Job:
        rows = await self._write("delete_job", {"id": job_id})
        if rows:
            return self._job(rows[0])
        job = await self._found(job_id)
        raise InvalidTransition(f"cannot delete job {job_id}: it is {job.status} "
                                "(cancel it first, then delete it)")

    async def discard_job(self, job_id: int) -> Job:
        rows = await self._write("discard_job", {"id": job_id})
        if rows:
            return self._job(rows[0])
        job = await self._found(job_id)
        raise InvalidTransition(
            f"cannot discard job {job_id}: it is {job.status}, not queued or retrying")

    async def run_job_now(self, job_id: int) -> tuple[Job, bool]:
        rows = await self._write("run_job_now", {"id": job_id})
        if rows:
            return self._job(rows[0]), True
        job = await self._found(job_id)
        if job.status in CLAIMABLE:  # due already: nothing to change
            return job, False
        raise InvalidTransition(
            f"cannot run job {job_id} now: it is {job.status}, not queued or retrying")

    async def _found(self, job_id: int) -> Job:
        job = await self.get_job(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    # -- bulk ------------------------------------------------------------------------------

    async def control_jobs(self, action: JobAction, selection: JobSelection) -> BulkResult:
        statuses = self._list(sorted(s.value for s in ACTION_STATUSES[action]))
        status = selection.status.value if selection.status else None
        flt = {"status": status, "queue": selection.queue, "tenant_id": selection.tenant_id,
               "job_type": selection.job_type, "statuses": statuses, "limit": BULK_BATCH}
        matched = changed = 0
        for chunk in _id_chunks(selection.ids):
            after_id = 0
            while True:
                ids = None if chunk is None else self._list(chunk)
                rows = await self._read("pick_jobs", {**flt, "ids": ids, "after_id": after_id})
                picked = [int(r[0]) for r in rows]
                if not picked:
                    break
                matched += len(picked)
                for name in _BULK_WRITES[action]:
                    written = await self._write(name, {"ids": self._list(picked), "status": status})
                    changed += len(written)
                if len(picked) < BULK_BATCH:
                    break
                after_id = picked[-1]
        return BulkResult(action, matched, changed)


def _id_chunks(ids: Sequence[int] | None) -> Iterator[list[int] | None]:
    """The ids in sorted batches (None: the whole filter, walked by the keyset)."""
    if ids is None:
        yield None
        return
    ordered = sorted(set(ids))
    for start in range(0, len(ordered), BULK_BATCH):
        yield ordered[start:start + BULK_BATCH]
