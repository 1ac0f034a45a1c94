"""A periodic job in a time zone, run by a real worker on PostgreSQL: its cron is read on
the zone's wall clock, and the job is enqueued for the UTC instant of that wall time."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from gochatd.model import JobFilter
from gochatd.periodic_jobs.cron import parse_cron
from gochatd.worker.registry import HandlerSpec
from tests.integration.helpers import Tracker, make_registry, opened_store, started_worker
from tests.support.harness import make_settings
from tests.support.wait import wait_until

#: UTC+05:45: a wall time there is never the same time of day in UTC.
ZONE = "Asia/Kathmandu"


def _target_minute(now: datetime) -> datetime:
    """This minute while the periodic grace leaves a worker ample time to start, else the
    next one (the loop then waits for it)."""
    minute = now.replace(second=0, microsecond=0)
    return minute if now.second < 30 else minute + timedelta(minutes=1)


async def test_the_loop_enqueues_a_zoned_slot_at_its_utc_instant(pg_clean: str) -> None:
    jt = f"periodic:tz{uuid.uuid4().hex[:10]}"
    slot = _target_minute(datetime.now(UTC))
    wall = slot.astimezone(ZoneInfo(ZONE))
    expr = f"{wall.minute} {wall.hour} * * *"
    # Read in UTC, the same fields name another instant (5 h 45 min away).
    assert abs(parse_cron(expr).next_after(slot - timedelta(minutes=1)) - slot) >= timedelta(hours=5)
    registry = make_registry(HandlerSpec(jt, Tracker().counting()))
    settings = make_settings(pg_clean, periodic={jt: {"cron": expr, "tz": ZONE}})
    async with started_worker(settings, registry=registry) as run:

        async def enqueued() -> bool:
            return bool(await run.worker.store.list_jobs(JobFilter(job_type=jt, limit=10)))

        await wait_until(enqueued, timeout_s=120, what="the zoned periodic slot")
        await run.stop()
    async with opened_store(pg_clean) as store:
        jobs = await store.list_jobs(JobFilter(job_type=jt, limit=10))
    assert [j.scheduled_at for j in jobs] == [slot]
    assert jobs[0].idempotency_key == f"{jt}:{slot.strftime('%Y-%m-%dT%H:%M:%SZ')}"
