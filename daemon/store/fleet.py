"""The fleet dashboard's tables (migration 0012): per-minute finish counters every daemon
adds to, and one heartbeat row per daemon with an operator's pending request for it.

Neither is tenant data: the routed store keeps them on the home database. Every time they
hold is the database clock's (a counter's minute, a heartbeat's age)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Protocol

from gochatd.store.core import StoreCore
from gochatd.store.rows import database_time
from gochatd.worker.runnable import DaemonHandlers

#: What an operator may ask of one daemon (POST /v1/fleet/<id>/<action>).
DAEMON_ACTIONS = ("drain", "pause", "resume")


@dataclass(frozen=True, slots=True)
class FinishCounts:
    """One (queue, job type)'s finishes since a daemon's last flush. ``failed``: went dead;
    ``retried``: scheduled for another attempt."""

    queue: str
    job_type: str
    completed: int = 0
    failed: int = 0
    retried: int = 0


@dataclass(frozen=True, slots=True)
class MinuteCounts:
    """The fleet's finishes in one minute, for one key: ``all``, a queue or a job type."""

    minute: datetime
    key: str
    completed: int
    failed: int
    retried: int


@dataclass(frozen=True, slots=True)
class DaemonBeat:
    """What a daemon writes of itself on each fleet pass."""

    id: str
    host: str
    pid: int
    mode: str
    version: str
    concurrency: int
    in_flight: int
    paused: bool
    draining: bool
    #: What it runs and where (runnable.DaemonHandlers as JSON, column ``job_types``);
    #: None before it knows.
    handlers: str | None = None


@dataclass(frozen=True, slots=True)
class DaemonRequest:
    """An operator's pending request; clearing it must match ``seq``."""

    action: str
    seq: int


@dataclass(frozen=True, slots=True)
class DaemonRow:
    beat: DaemonBeat
    started_at: datetime
    last_heartbeat: datetime
    requested: str | None
    #: Seconds since the last heartbeat, by the database clock.
    heartbeat_age_s: float
    #: Its job types and queues; None for a daemon of an older release.
    handlers: DaemonHandlers | None = None


class FleetStore(Protocol):
    async def add_job_counts(self, counts: Sequence[FinishCounts]) -> None:
        """Add to the current minute's counters (database clock), one upsert for all."""
        ...

    async def job_counts(self, minutes: int, by: str | None) -> list[MinuteCounts]:
        """The last ``minutes`` minutes' counters per minute and key (``by``: None for
        ``all``, ``queue`` or ``job_type``), oldest first; minutes without finishes absent."""
        ...

    async def prune_job_counts(self, older_than_s: float, limit: int) -> int: ...

    async def upsert_daemon(self, beat: DaemonBeat) -> DaemonRequest | None:
        """Write this daemon's row now; return the operator's pending request, if any."""
        ...

    async def list_daemons(self) -> list[DaemonRow]: ...

    async def request_daemon(self, daemon_id: str, action: str) -> bool:
        """Ask one daemon to drain, pause or resume; False if there is no such row."""
        ...

    async def clear_daemon_request(self, daemon_id: str, seq: int) -> bool:
        """Clear request ``seq`` once applied; False if a newer one replaced it."""
        ...

    async def remove_daemon(self, daemon_id: str) -> bool: ...

    async def prune_daemons(self, older_than_s: float) -> int: ...


class SqlFleetOps(StoreCore):
    """Mixed into ``SqlJobStore``: both backends run the same named queries."""

    async def add_job_counts(self, counts: Sequence[FinishCounts]) -> None:
        if counts:
            await self._write("add_job_counts",
                              {"counts": json.dumps([asdict(c) for c in counts])})

    async def job_counts(self, minutes: int, by: str | None) -> list[MinuteCounts]:
        rows = await self._read("job_counts", {"minutes": minutes, "by": by})
        return [MinuteCounts(database_time(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]))
                for r in rows]

    async def prune_job_counts(self, older_than_s: float, limit: int) -> int:
        return len(await self._write("prune_job_counts",
                                     {"older_than_s": older_than_s, "limit": limit}))

    async def upsert_daemon(self, beat: DaemonBeat) -> DaemonRequest | None:
        rows = await self._write("upsert_daemon", asdict(beat))
        if not rows or rows[0][0] is None:
            return None
        return DaemonRequest(str(rows[0][0]), int(rows[0][1]))

    async def list_daemons(self) -> list[DaemonRow]:
        return [
            DaemonRow(
                DaemonBeat(id=str(r[0]), host=str(r[1]), pid=int(r[2]), mode=str(r[3]),
                           version=str(r[4]), concurrency=int(r[5]), in_flight=int(r[6]),
                           paused=bool(r[7]), draining=bool(r[8])),
                started_at=database_time(r[9]), last_heartbeat=database_time(r[10]),
                requested=None if r[11] is None else str(r[11]),
                heartbeat_age_s=max(0.0, float(r[12])),
                handlers=DaemonHandlers.from_json(r[13]))
            for r in await self._read("list_daemons", {})
        ]

    async def request_daemon(self, daemon_id: str, action: str) -> bool:
        if action not in DAEMON_ACTIONS:
            raise ValueError(f"unknown daemon action {action!r}")
        return bool(await self._write("request_daemon", {"id": daemon_id, "action": action}))

    async def clear_daemon_request(self, daemon_id: str, seq: int) -> bool:
        return bool(await self._write("clear_daemon_request", {"id": daemon_id, "seq": seq}))

    async def remove_daemon(self, daemon_id: str) -> bool:
        return bool(await self._write("remove_daemon", {"id": daemon_id}))

    async def prune_daemons(self, older_than_s: float) -> int:
        return len(await self._write("prune_daemons", {"older_than_s": older_than_s}))
