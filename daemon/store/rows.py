"""Decoding store rows into model objects, shared by both backends."""

from __future__ import annotations

import dataclasses
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
_WIDTH = len(JOB_COLUMNS)
_TIME_INDEXES = tuple(_INDEX[name] for name in JOB_COLUMNS if name in _TIME_COLUMNS)
_PAYLOAD, _STATUS, _CANCEL = _INDEX["payload"], _INDEX["status"], _INDEX["cancel_requested"]


#: Times outside what ``datetime`` can hold (written by foreign SQL: infinity, year 20000,
#: before year 1) are clamped to these instead of failing the whole fetch.
TIME_MIN = datetime.min.replace(tzinfo=UTC)
TIME_MAX = datetime.max.replace(tzinfo=UTC)


class InvalidPayload(dict[str, Any]):
    """The payload of a row that could not be decoded (too deep, numbers too long for
    Python): empty, and the runner makes the job dead instead of running it."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


def epoch_to_datetime(value: float | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, ValueError, OSError):
        return TIME_MAX if value > 0 else TIME_MIN


def database_time(value: Any) -> datetime:
    """A time column as either backend hands it back: PostgreSQL's timestamptz as is,
    SQLite's epoch seconds converted."""
    if isinstance(value, datetime):
        return value
    moment = epoch_to_datetime(float(value))
    assert moment is not None
    return moment


def decode_payload(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return InvalidPayload(type(exc).__name__)
    return raw if isinstance(raw, dict) else {}


def job_from_row(row: Sequence[Any], to_time: Callable[[Any], datetime | None] | None = None) -> Job:
    """A row of ``JOB_COLUMNS`` (in ``Job``'s field order: tests/unit checks it) as a ``Job``,
    built positionally: no dict per row."""
    values = list(row[:_WIDTH])
    if to_time is not None:
        for i in _TIME_INDEXES:
            values[i] = to_time(values[i])
    values[_PAYLOAD] = decode_payload(values[_PAYLOAD])
    values[_STATUS] = JobStatus(values[_STATUS])
    values[_CANCEL] = bool(values[_CANCEL])
    return Job(*values)


def head_waited_s(rows: Sequence[Sequence[Any]]) -> float:
    """PostgreSQL's windowed ``claim_due_jobs``: how long the oldest job the claim considered
    had been due (the column after the job's columns, the same in every row), by the
    database's clock (store/claim_window.py)."""
    return max(float(row[len(JOB_COLUMNS)] or 0.0) for row in rows)


def with_result(job: Job, row: Sequence[Any]) -> Job:
    """``get_job``'s row: JOB_COLUMNS, then the result as JSON text (both dialects), or
    NULL (docs/results.md). Other reads leave ``Job.result`` None."""
    raw = row[len(JOB_COLUMNS)]
    return job if raw is None else dataclasses.replace(job, result=json.loads(raw))


def ref_from_row(row: Sequence[Any]) -> DispatchRef:
    return DispatchRef(job_id=int(row[0]), job_type=row[1], queue=row[2], tenant_id=row[3])


def canonical_json(payload: Any) -> str:
    """The one JSON text form stored and compared for idempotency."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def json_equal(a: Any, b: Any) -> bool:
    """JSON values equal as PostgreSQL's jsonb compares them: objects ignore key order,
    numbers compare by value (1 == 1.0, 1e20 == 100000000000000000000), and booleans are
    not numbers. Both stores decide idempotent replays with this, so SQLite (which stores
    text) and PostgreSQL (jsonb) agree on what "the same payload" is."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def same_job(job: Job, job_type: str, payload: Any) -> bool:
    """Whether an idempotent repeat asks for the job that already holds its key."""
    return job.job_type == job_type and json_equal(job.payload, payload)
