"""GET /v1/periodic: the periodic jobs a daemon declares, their last slot (fleet-wide) and
next runs by the database clock, on SQLite and on PostgreSQL + Redis."""

from __future__ import annotations

import itertools
import uuid
from datetime import datetime, timedelta
from typing import Any

from gochatd.model import JobFilter
from tests.admin.helpers import Stack, admin_worker, assert_json_error
from tests.support.wait import wait_until


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_periodic_lists_schedules_last_slots_and_next_runs(stack: Stack) -> None:
    every = f"periodic:e{uuid.uuid4().hex[:8]}"
    cron = f"periodic:c{uuid.uuid4().hex[:8]}"
    periodic = {every: {"every": "1s", "queue": "low", "tenant_id": "acme"},
                cron: {"cron": "0 3 * * *", "tz": "Europe/Berlin", "catch_up": "latest"}}
    async with admin_worker(stack, periodic=periodic) as admin:

        async def slotted() -> dict[str, Any] | None:
            doc: dict[str, Any] = await admin.get("/v1/periodic")
            items = {p["job_type"]: p for p in doc["periodic"]}
            return doc if items[every]["last_slot"] is not None else None

        doc = await wait_until(slotted, timeout_s=10, what="the every-1s job's first slot")
        assert doc is not None and doc["clock"] == "database"
        now = _time(doc["now"])
        items = {p["job_type"]: p for p in doc["periodic"]}
        assert set(items) >= {every, cron}
        fast = items[every]
        assert (fast["schedule"], fast["queue"], fast["tenant_id"], fast["catch_up"],
                fast["source"]) == ("every 1s", "low", "acme", "skip", "config")
        assert _time(fast["last_slot"]) <= now
        runs = [_time(t) for t in fast["next_runs"]]
        assert len(runs) == 3 and now < runs[0] <= now + timedelta(seconds=1)
        assert [b - a for a, b in itertools.pairwise(runs)] == [timedelta(seconds=1)] * 2
        # The slot it names was enqueued, under the periodic idempotency key.
        jobs = await admin.worker.store.list_jobs(JobFilter(job_type=every, limit=500))
        assert f"{every}:{fast['last_slot']}" in {j.idempotency_key for j in jobs}

        daily = items[cron]
        # New to the fleet: its latest past slot is recorded as handled, not enqueued.
        assert _time(daily["last_slot"]) <= now and daily["catch_up"] == "latest"
        assert daily["queue"] == "default"
        first = _time(daily["next_runs"][0])
        assert now < first <= now + timedelta(days=1)
        assert first.minute == 0 and first.hour in (1, 2)  # 03:00 in Berlin is 01:00 or 02:00 UTC

        one = await admin.get("/v1/periodic?count=1")
        assert all(len(p["next_runs"]) == 1 for p in one["periodic"])
        for bad in ("0", "21", "x", "1.5", "-1", "999999999999999999999"):
            response = await admin.http.get(f"/v1/periodic?count={bad}")
            assert assert_json_error(response, 400, bad) == "bad_request"


async def test_periodic_without_periodic_jobs_is_an_empty_list(sqlite_stack: Stack) -> None:
    async with admin_worker(sqlite_stack) as admin:
        doc = await admin.get("/v1/periodic")
        assert doc["clock"] == "database"
        assert [p for p in doc["periodic"] if p["source"] == "config"] == []
