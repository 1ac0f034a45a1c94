"""Periodic jobs with real workers: two daemons on one PostgreSQL enqueue each slot exactly
once; missed slots on start-up follow catch_up; draining daemons leave slots alone;
``gochatd periodic list``; the decorator."""

from __future__ import annotations

import itertools
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio

import gochatd
from gochatd.model import Job, JobFilter
from gochatd.periodic_jobs.cron import parse_cron
from gochatd.periodic_jobs.specs import PERIODIC, effective_specs
from gochatd.worker.registry import REGISTRY, HandlerSpec
from gochatd.worker.service import Worker
from tests.integration.helpers import (
    Tracker,
    make_registry,
    migrate,
    opened_store,
    started_worker,
)
from tests.support.daemon_process import run_cli
from tests.support.harness import make_settings
from tests.support.wait import wait_until

YEARLY = "0 0 1 1 *"


def job_type() -> str:
    return f"periodic:t{uuid.uuid4().hex[:10]}"


async def jobs_of(worker: Worker, job_type: str) -> list[Job]:
    return await worker.store.list_jobs(JobFilter(job_type=job_type, limit=1000))


async def stored_jobs(url: str, job_type: str) -> list[Job]:
    async with opened_store(url) as store:
        return await store.list_jobs(JobFilter(job_type=job_type, limit=1000))


async def test_two_daemons_enqueue_each_slot_exactly_once(pg_clean: str) -> None:
    jt = job_type()
    tracker = Tracker()
    registry = make_registry(HandlerSpec(jt, tracker.counting(), queue="scheduled_jobs"))
    settings = make_settings(pg_clean, periodic={jt: {"every": "1s"}})
    async with started_worker(settings, registry=registry) as a, \
            started_worker(settings, registry=registry) as b:

        async def enough() -> bool:
            return len(await jobs_of(a.worker, jt)) >= 5

        await wait_until(enough, timeout_s=15, what="five periodic slots")
        rounds = (a.worker.counters["periodic_rounds"], b.worker.counters["periodic_rounds"])
        await a.stop()
        await b.stop()
    jobs = await stored_jobs(pg_clean, jt)

    assert min(rounds) >= 3, rounds  # both daemons were competing for every slot
    keys = [j.idempotency_key for j in jobs]
    assert len(keys) == len(set(keys))
    slots = sorted(j.scheduled_at for j in jobs)
    for job in jobs:
        assert job.idempotency_key == f"{jt}:{job.scheduled_at.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    steps = {(later - earlier).total_seconds() for earlier, later in itertools.pairwise(slots)}
    assert steps == {1.0}, f"slots are not one second apart: {slots}"
    assert all(j.queue == "scheduled_jobs" for j in jobs)  # the handler's queue
    enqueued = a.worker.counters["periodic_enqueued"] + b.worker.counters["periodic_enqueued"]
    assert enqueued == len(jobs)
    assert max(tracker.executions.values()) == 1


async def seed_slot(url: str, name: str, slot: datetime) -> None:
    await migrate(url)
    async with opened_store(url) as store:
        assert (await store.claim_periodic_slot(name, slot, None)).claimed


async def one_round(url: str, jt: str, entry: dict[str, Any]) -> list[Job]:
    """Start a worker, let its periodic loop run one round, stop it; the type's jobs."""
    settings = make_settings(url, periodic={jt: entry})
    async with started_worker(settings, registry=make_registry()) as run:

        async def looked() -> bool:
            return run.worker.counters["periodic_rounds"] >= 1

        await wait_until(looked, what="a periodic round")
    return await stored_jobs(url, jt)


@pytest.mark.parametrize(("catch_up", "enqueued"), [("latest", 1), ("skip", 0)])
async def test_a_slot_missed_while_every_daemon_was_down(
    backend_url: str, catch_up: str, enqueued: int
) -> None:
    """The fleet last handled the yearly slot of a year ago; this year's passed while it was
    down. latest: enqueued once on start-up (and not again on the next start); skip: not."""
    jt = job_type()
    async with opened_store(backend_url) as store:
        await migrate(backend_url)
        now = await store.database_now()
    latest = parse_cron(YEARLY).prev_at_or_before(now)
    assert latest is not None
    await seed_slot(backend_url, jt, latest - timedelta(days=365))
    entry = {"cron": YEARLY, "catch_up": catch_up}

    first = await one_round(backend_url, jt, entry)
    again = await one_round(backend_url, jt, entry)

    assert len(first) == enqueued
    if enqueued:
        assert first[0].scheduled_at == latest
        assert first[0].idempotency_key == f"{jt}:{latest.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    assert [j.id for j in again] == [j.id for j in first]
    async with opened_store(backend_url) as store:
        assert (await store.periodic_slots())[jt] == latest


async def test_a_new_periodic_job_does_not_fire_for_a_past_slot(
    sqlite_url: str
) -> None:
    jt = job_type()
    assert await one_round(sqlite_url, jt, {"cron": YEARLY, "catch_up": "latest"}) == []
    async with opened_store(sqlite_url) as store:
        assert jt in await store.periodic_slots()  # recorded: its next slot is next year's


async def test_a_draining_daemon_leaves_the_slots_to_others(sqlite_url: str) -> None:
    jt = job_type()
    settings = make_settings(sqlite_url, periodic={jt: {"every": "1s"}})
    async with started_worker(settings, registry=make_registry()) as run:
        run.worker.control.drain()
        before = run.worker.counters["periodic_rounds"]
        count = len(await jobs_of(run.worker, jt))
        start = await run.worker.store.database_now()

        async def three_slots_passed() -> bool:
            return (await run.worker.store.database_now() - start).total_seconds() >= 3.2

        await wait_until(three_slots_passed, what="three slots by the database clock")
        assert run.worker.counters["periodic_rounds"] <= before + 1  # a round already running
        assert len(await jobs_of(run.worker, jt)) <= count + 1
        assert run.worker.control.resume()

        async def resumed() -> bool:
            return len(await jobs_of(run.worker, jt)) >= count + 2

        await wait_until(resumed, what="slots after the drain ended", timeout_s=10)


async def test_periodic_list_shows_schedules_and_next_runs(
    sqlite_url: str, tmp_path: Path
) -> None:
    jt = job_type()
    await seed_slot(sqlite_url, jt, datetime(2026, 1, 1, tzinfo=UTC))
    cfg = tmp_path / "gochatd.yaml"
    cfg.write_text(
        f"database_url: {sqlite_url}\n"
        "periodic:\n"
        f'  "{jt}": {{cron: "*/5 * * * *", queue: scheduled_jobs, catch_up: latest}}\n'
        '  "sla:trigger_accounts": {every: 300s}\n'
    )
    result = await trio.to_thread.run_sync(
        lambda: run_cli(["periodic", "list", "--config", str(cfg), "--json", "--count", "2"])
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["clock"] == "database"
    now = datetime.fromisoformat(doc["now"])
    by_type = {p["job_type"]: p for p in doc["periodic"]}
    mine = by_type[jt]
    assert mine["schedule"] == "cron */5 * * * *"
    assert mine["queue"] == "scheduled_jobs"
    assert mine["catch_up"] == "latest"
    assert mine["last_slot"] == "2026-01-01T00:00:00Z"
    first, second = (datetime.fromisoformat(t.replace("Z", "+00:00")) for t in mine["next_runs"])
    assert now < first <= now + timedelta(minutes=5)
    assert first.minute % 5 == 0 and first.second == 0
    assert second - first == timedelta(minutes=5)
    assert by_type["sla:trigger_accounts"]["schedule"] == "every 300s"
    assert by_type["sla:trigger_accounts"]["last_slot"] is None

    table = await trio.to_thread.run_sync(
        lambda: run_cli(["periodic", "list", "--config", str(cfg)])
    )
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[:3] == ["JOB", "TYPE", "SCHEDULE"]
    assert any(line.startswith(jt) and "2026-01-01T00:00:00Z" in line for line in lines)
    assert lines[-1].startswith("# times by the database clock")


async def test_periodic_list_refuses_a_bad_schedule(tmp_path: Path) -> None:
    cfg = tmp_path / "gochatd.yaml"
    cfg.write_text('periodic:\n  "a:b": {cron: "*/5 * * *"}\n')
    result = await trio.to_thread.run_sync(
        lambda: run_cli(["periodic", "list", "--config", str(cfg)])
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "gochatd: periodic (GOCHAT_PERIODIC): a:b: cron: expected 5 fields (minute hour "
        "day-of-month month day-of-week), got 4"
    ]


def test_the_decorator_registers_a_schedule_and_a_handler() -> None:
    jt = job_type()
    try:

        @gochatd.periodic("*/5 * * * *", job_type=jt, queue="scheduled_jobs")
        async def trigger(ctx: gochatd.JobContext) -> None:
            return None

        handler = REGISTRY.get(jt)
        assert handler is not None and handler.fn is trigger and handler.queue == "scheduled_jobs"
        [spec] = [s for s in effective_specs({}) if s.job_type == jt]
        assert spec.schedule.describe() == "cron */5 * * * *"
        assert spec.source == "decorator"
        # the config overrides a decorator's schedule for the same job type
        [override] = [s for s in effective_specs({jt: {"every": "10s"}}) if s.job_type == jt]
        assert override.schedule.describe() == "every 10s" and override.source == "config"
    finally:
        PERIODIC.remove(jt)
        REGISTRY._specs.pop(jt, None)
    with pytest.raises(ValueError, match="exactly one of cron or every"):
        gochatd.periodic(job_type=jt)
