"""Phase reports: JSON with counts, checksums, durations and rows per second.

A report holds no secrets: database URLs appear only masked (``gochatd.obs.redact.mask_url``)
and rows only by their keys, never their contents.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gochatd.migrate.backends import Endpoint, MigrateError


@dataclass(slots=True)
class Report:
    command: str
    source: Endpoint
    destination: Endpoint | None
    dry_run: bool
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    _t0: float = field(default_factory=time.perf_counter)
    notes: list[str] = field(default_factory=list)
    scopes: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "source": self.source.masked,
            "destination": self.destination.masked if self.destination else None,
            "dry_run": self.dry_run,
            "started_at": self.started_at.isoformat(),
            "duration_s": round(time.perf_counter() - self._t0, 3),
            "notes": self.notes,
            "scopes": self.scopes,
        }


def write_report(path: str, report: Report) -> None:
    try:
        Path(path).write_text(json.dumps(report.to_dict(), indent=2, sort_keys=True,
                                         ensure_ascii=False, default=str) + "\n", "utf-8")
    except OSError as exc:
        raise MigrateError(f"--report: cannot write {path!r}: {exc.strerror}") from None
