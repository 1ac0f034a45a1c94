"""Stream entries as the daemon reads them: at most 16 fields of at most 256 bytes each
(anything longer is cut), parsed into the job they name or refused as malformed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gochatd.model import MAX_ID, DispatchRef

MAX_FIELD_BYTES = 256


@dataclass(frozen=True, slots=True)
class StreamEntry:
    stream: str
    entry_id: str
    fields: dict[str, str]

    def parse(self) -> DispatchRef | None:
        """The job reference this entry names, or None when the entry is malformed."""
        raw_id = self.fields.get("job_id", "")
        if not raw_id.isascii() or not raw_id.isdigit() or not 0 < len(raw_id) <= 19:
            return None
        job_id = int(raw_id)
        if not 0 < job_id <= MAX_ID:
            return None
        return DispatchRef(
            job_id=job_id,
            job_type=self.fields.get("job_type", "")[:200],
            queue=self.fields.get("queue", "")[:64],
            tenant_id=self.fields.get("tenant_id", "")[:200],
        )


def field_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value[:MAX_FIELD_BYTES].decode("utf-8", errors="replace")
    return str(value)[:MAX_FIELD_BYTES]


def entry_from_redis(stream: Any, entry_id: Any, flat_or_dict: Any) -> StreamEntry:
    fields: dict[str, str] = {}
    if isinstance(flat_or_dict, dict):
        items = list(flat_or_dict.items())
    else:
        flat = list(flat_or_dict or [])
        items = list(zip(flat[0::2], flat[1::2], strict=False))
    for key, value in items[:16]:
        fields[field_text(key)] = field_text(value)
    return StreamEntry(field_text(stream), field_text(entry_id), fields)
