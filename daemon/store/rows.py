"""Decoding store rows into model objects, shared by both backends."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from gochatd.model import DispatchRef, Job, JobStatus
from gochatd.store.queries import JOB_COLUMNS

_INDEX = {name: i for i, name in enumerate(JOB_COLUMNS)}
_TIME_COLUMNS = frozenset(
    {"scheduled_at", "created_at", "updated_at", "locked_at", "lease_expires_at", "failed_at",
     "completed_at", "dispatched_at"}
)


def epoch_to_datetime(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def job_from_row(row: Sequence[Any], to_time: Callable[[Any], datetime | None] | None = None) -> Job:
    values = dict(zip(JOB_COLUMNS, row, strict=False))
    if to_time is not None:
        for name in _TIME_COLUMNS:
            values[name] = to_time(values[name])
    payload = values["payload"]
    if isinstance(payload, str | bytes):
        payload = json.loads(payload)
    values["payload"] = payload if isinstance(payload, dict) else {}
    values["status"] = JobStatus(values["status"])
    values["cancel_requested"] = bool(values["cancel_requested"])
    return Job(**values)


def ref_from_row(row: Sequence[Any]) -> DispatchRef:
    return DispatchRef(job_id=int(row[0]), job_type=row[1], queue=row[2], tenant_id=row[3])


def canonical_json(payload: Any) -> str:
    """The one JSON text form stored and compared for idempotency."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
