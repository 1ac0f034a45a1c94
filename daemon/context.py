"""What a handler sees of its job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog


@dataclass(frozen=True, slots=True)
class JobContext:
    job_id: int
    job_type: str
    queue: str
    tenant_id: str
    payload: dict[str, Any]
    attempt: int
    max_attempts: int
    fence: int
    log: structlog.typing.FilteringBoundLogger
    traceparent: str | None = None

    @property
    def trace_id(self) -> str | None:
        """The W3C trace id from ``traceparent`` (``00-<trace_id>-<span_id>-<flags>``)."""
        if not self.traceparent:
            return None
        parts = self.traceparent.split("-")
        return parts[1] if len(parts) >= 4 else None
