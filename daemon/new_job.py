"""``NewJob``: one item of ``Client.enqueue_many``, with the same fields and defaults as the
keyword arguments of ``Client.enqueue``. A plain mapping with those keys is accepted too (what
a JSON batch decodes to)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gochatd.errors import InvalidJob


@dataclass(frozen=True, slots=True)
class NewJob:
    job_type: str
    payload: dict[str, Any] | None = None
    queue: str | None = None  # None: as Client.enqueue (the handler's, or published)
    tenant_id: str = "default"
    idempotency_key: str | None = None
    scheduled_at: datetime | None = None
    delay_s: float | None = None
    max_attempts: int | None = None  # None: as Client.enqueue
    priority: int = 0
    traceparent: str | None = None
    unique_key: str | None = None  # docs/unique-jobs.md
    unique_for_s: float | None = None


FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(NewJob))


def as_new_job(item: NewJob | Mapping[str, Any], index: int) -> NewJob:
    """The item as a ``NewJob``; a mapping with an unknown or missing key is refused, naming
    the item's index and the key."""
    if isinstance(item, NewJob):
        return item
    if not isinstance(item, Mapping):
        raise InvalidJob(f"requests[{index}]: expected a gochatd.NewJob or a mapping")
    unknown = sorted(str(k) for k in item if k not in FIELD_NAMES)
    if unknown:
        raise InvalidJob(f"requests[{index}]: unknown field {unknown[0][:64]!r}")
    if "job_type" not in item:
        raise InvalidJob(f"requests[{index}].job_type: required")
    return NewJob(**item)
