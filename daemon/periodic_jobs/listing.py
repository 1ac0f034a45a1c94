"""What ``gochatd periodic list`` shows: each periodic job, its last slot and next runs.

Next run times come from the database clock when the database answers (the clock the
daemons decide by), else from this host's clock, and the output says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gochatd.config.settings import Settings
from gochatd.errors import StoreUnavailable
from gochatd.periodic_jobs.specs import PeriodicSpec, effective_specs, slot_text
from gochatd.store import open_store
from gochatd.store.base import JobStore
from gochatd.store.presence import sqlite_file
from gochatd.worker.registry import REGISTRY

#: The migration that creates gochatd_periodic_slots.
SLOTS_SCHEMA_VERSION = 4


@dataclass(frozen=True, slots=True)
class PeriodicListing:
    clock: str  # "database" or "local"
    now: datetime
    specs: list[PeriodicSpec]
    last_slots: dict[str, datetime]
    next_runs: dict[str, list[datetime]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "clock": self.clock,
            "now": self.now.isoformat(),
            "periodic": [
                {
                    "job_type": s.job_type,
                    "schedule": s.schedule.describe(),
                    "queue": s.queue or _handler_queue(s.job_type),
                    "tenant_id": s.tenant_id,
                    "catch_up": s.catch_up,
                    "source": s.source,
                    "last_slot": slot_text(self.last_slots[s.name]) if s.name in self.last_slots
                    else None,
                    "next_runs": [slot_text(t) for t in self.next_runs[s.name]],
                }
                for s in self.specs
            ],
        }

    def lines(self) -> list[str]:
        rows = [("JOB TYPE", "SCHEDULE", "QUEUE", "CATCH-UP", "LAST SLOT", "NEXT RUNS (UTC)")]
        for item in self.to_dict()["periodic"]:
            rows.append((item["job_type"], item["schedule"], item["queue"], item["catch_up"],
                         item["last_slot"] or "-", ", ".join(item["next_runs"])))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        out = ["  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True)) + "  " + r[5]
               for r in rows]
        out.append(f"# times by the {self.clock} clock, now {slot_text(self.now)}")
        return out


def _handler_queue(job_type: str) -> str:
    spec = REGISTRY.get(job_type)
    return spec.queue if spec else "default"


def next_runs(spec: PeriodicSpec, now: datetime, count: int) -> list[datetime]:
    runs: list[datetime] = []
    moment = now
    for _ in range(count):
        moment = spec.schedule.next_after(moment)
        runs.append(moment)
    return runs


async def list_periodic(settings: Settings, count: int) -> PeriodicListing:
    specs = effective_specs(settings.periodic)
    now, clock = datetime.now(UTC), "local"
    last: dict[str, datetime] = {}
    if specs and not _no_database_file(settings.database_url):
        try:
            now, last = await _from_database(settings, specs)
            clock = "database"
        except StoreUnavailable:
            pass
    return PeriodicListing(clock, now, specs, last,
                           {s.name: next_runs(s, now, count) for s in specs})


def _no_database_file(database_url: str) -> bool:
    """A SQLite file that is not there is not created to read a clock: the host's is used."""
    path = sqlite_file(database_url)
    return path is not None and not path.is_file()


async def _from_database(
    settings: Settings, specs: Sequence[PeriodicSpec]
) -> tuple[datetime, dict[str, datetime]]:
    store = open_store(settings.database_url, pool_size=2, prepare=settings.database_prepare)
    await store.open()  # StoreUnavailable when it does not answer (the pool's own timeout)
    try:
        return await clock_and_slots(store, specs)
    finally:
        await store.close()


async def clock_and_slots(
    store: JobStore, specs: Sequence[PeriodicSpec]
) -> tuple[datetime, dict[str, datetime]]:
    """The database clock and the last slot of each of ``specs`` (an open store)."""
    now = await store.database_now()
    last: dict[str, datetime] = {}
    if await store.schema_version() >= SLOTS_SCHEMA_VERSION:
        last = await store.periodic_slots()
    return now, {k: v for k, v in last.items() if k in {s.name for s in specs}}


async def store_listing(
    store: JobStore, specs: Sequence[PeriodicSpec], count: int
) -> PeriodicListing:
    """The listing by the database clock, read through a store that is already open (the
    admin API's ``GET /v1/periodic``)."""
    now, last = await clock_and_slots(store, specs)
    return PeriodicListing("database", now, list(specs), last,
                           {s.name: next_runs(s, now, count) for s in specs})
