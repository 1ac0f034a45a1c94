"""Where each migration phase records its progress, so a re-run after a crash resumes.

The database-backed store keeps one row per (tenant, phase, destination) in the source's
``gochatd_migrations`` table (migration 0006). The in-memory one is for tests and
``--dry-run`` only: it forgets everything when the process ends.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from gochatd.migrate.backends import Database, query
from gochatd.migrate.canonical import epoch_to_utc

RUNNING = "running"
DONE = "done"
FAILED = "failed"


@dataclass(slots=True)
class PhaseState:
    tenant: str
    phase: str
    destination: str
    status: str
    #: The phase's JSON report; copy keeps {"tables": {name: {"last_key": …, "rows": …}}}.
    report: dict[str, Any] = field(default_factory=dict)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime | None = None


class StateStore(Protocol):
    def get(self, tenant: str, phase: str, destination: str) -> PhaseState | None: ...
    def put(self, tenant: str, phase: str, destination: str, status: str,
            report: dict[str, Any]) -> None: ...
    def list(self) -> list[PhaseState]: ...


class MemoryStateStore:
    def __init__(self) -> None:
        self._rows: dict[tuple[str, str, str], PhaseState] = {}

    def get(self, tenant: str, phase: str, destination: str) -> PhaseState | None:
        return self._rows.get((tenant, phase, destination))

    def put(self, tenant: str, phase: str, destination: str, status: str,
            report: dict[str, Any]) -> None:
        now = datetime.now(UTC)
        old = self._rows.get((tenant, phase, destination))
        started = old.started_at if old is not None and old.status == RUNNING else now
        self._rows[(tenant, phase, destination)] = PhaseState(
            tenant, phase, destination, status, json.loads(json.dumps(report)), started,
            None if status == RUNNING else now, now)

    def list(self) -> list[PhaseState]:
        return [self._rows[k] for k in sorted(self._rows, key=lambda k: (k[2], k[0], k[1]))]


class DatabaseStateStore:
    """State in the source database (it must be at schema 0006 or later)."""

    def __init__(self, source: Database) -> None:
        self.db = source

    def get(self, tenant: str, phase: str, destination: str) -> PhaseState | None:
        rows = self.db.fetch(query(self.db.dialect, "state_get"),
                             {"tenant": tenant, "phase": phase, "destination": destination})
        return self._decode(rows[0]) if rows else None

    def put(self, tenant: str, phase: str, destination: str, status: str,
            report: dict[str, Any]) -> None:
        text = json.dumps(report, sort_keys=True)
        self.db.execute(query(self.db.dialect, "state_upsert"), {
            "tenant": tenant, "phase": phase, "destination": destination, "status": status,
            "report": text,
        })

    def list(self) -> list[PhaseState]:
        return [self._decode(r) for r in self.db.fetch(query(self.db.dialect, "state_list"))]

    @staticmethod
    def _decode(row: tuple[Any, ...]) -> PhaseState:
        tenant, phase, destination, status, started, finished, report, updated = row
        return PhaseState(
            tenant, phase, destination, status,
            report if isinstance(report, dict) else json.loads(report),
            _time(started), _time(finished), _time(updated))


def _time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return epoch_to_utc(float(value))
