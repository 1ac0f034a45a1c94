"""``gochatd_job_types``: the defaults daemons publish for their handlers (gochatd/job_types.py,
docs/job-types.md). Producers read it inside their INSERT (queries ``enqueue_job`` and
``enqueue_jobs``), so these operations are only the daemon's publication and the listing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Protocol

from gochatd.store.core import StoreCore
from gochatd.store.rows import database_time
from gochatd.worker.job_types import JobTypeChange, JobTypeDefaults, PublishedJobType
from gochatd.worker.runnable import WaitingJobs


class JobTypeStore(Protocol):
    async def publish_job_types(
        self, types: Sequence[JobTypeDefaults], by: str
    ) -> list[JobTypeChange]:
        """Upsert one row per type (the last writer wins), stamped with ``by`` and the
        database clock; return the types whose previous row held different values."""
        ...

    async def list_job_types(self) -> list[PublishedJobType]:
        """Every published type, by name."""
        ...

    async def waiting_job_types(self) -> list[WaitingJobs]:
        """Due waiting jobs per (job type, queue), with the oldest one's age."""
        ...


class SqlJobTypeOps(StoreCore):
    """Mixed into ``SqlJobStore``: both backends run the same named queries."""

    async def publish_job_types(
        self, types: Sequence[JobTypeDefaults], by: str
    ) -> list[JobTypeChange]:
        if not types:
            return []
        # Read, then write: a publication racing this one can only make the warning miss it
        # (the rows themselves are a plain last-writer-wins upsert).
        before = {t.job_type: t for t in await self.list_job_types()}
        items = [{"job_type": t.job_type, "queue": t.queue, "max_attempts": t.max_attempts,
                  "timeout_s": t.timeout_s} for t in types]
        await self._write("publish_job_types", {"types": json.dumps(items), "by": by})
        return [JobTypeChange(before[t.job_type], t) for t in types
                if t.job_type in before and before[t.job_type].defaults != t]

    async def list_job_types(self) -> list[PublishedJobType]:
        rows = await self._read("list_job_types", {})
        return [
            PublishedJobType(
                job_type=str(r[0]), queue=str(r[1]), max_attempts=int(r[2]),
                timeout_s=None if r[3] is None else float(r[3]), updated_at=database_time(r[4]),
                published_by=str(r[5]),
            )
            for r in rows
        ]

    async def waiting_job_types(self) -> list[WaitingJobs]:
        return [WaitingJobs(str(r[0]), str(r[1]), int(r[2]), float(r[3] or 0.0))
                for r in await self._read("waiting_job_types", {})]
