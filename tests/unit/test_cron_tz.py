"""Cron in a time zone (``tz``): fields on the zone's wall clock, slots as UTC instants, and
the daylight-saving days. Spring forward: a wall time in the gap fires once, at the first
instant after it. Fall back: a fixed-hour wall time fires once (its first occurrence); an
hour-wildcard schedule follows the real hours and fires in both."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gochatd.periodic_jobs.cron import CronError, parse_cron
from gochatd.periodic_jobs.specs import PeriodicSpec, make_spec, plan_slot


def t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def utc_runs(expr: str, tz: str, start: str, n: int) -> list[str]:
    schedule = parse_cron(expr, tz)
    out, moment = [], t(start)
    for _ in range(n):
        moment = schedule.next_after(moment)
        out.append(moment.strftime("%m-%d %H:%M"))
    return out


def test_fields_match_the_zones_wall_clock() -> None:
    # 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer.
    assert utc_runs("0 9 * * *", "Europe/Berlin", "2026-01-10 00:00", 2) == [
        "01-10 08:00", "01-11 08:00"]
    assert utc_runs("0 9 * * *", "Europe/Berlin", "2026-07-10 00:00", 1) == ["07-10 07:00"]
    # a half-hour zone, and the day rolls over in the zone, not in UTC
    assert utc_runs("15 2 * * 1", "Asia/Kolkata", "2026-12-01 00:00", 2) == [
        "12-06 20:45", "12-13 20:45"]  # Monday 02:15 IST is Sunday 20:45 UTC
    assert parse_cron("0 9 * * *", "Europe/Berlin").describe() == "cron 0 9 * * * (Europe/Berlin)"


def test_spring_forward_runs_a_time_in_the_gap_once_when_the_gap_ends() -> None:
    # Berlin, 29 March 2026: 02:00 CET jumps to 03:00 CEST (01:00 UTC); 02:30 does not exist.
    assert utc_runs("30 2 * * *", "Europe/Berlin", "2026-03-27 12:00", 4) == [
        "03-28 01:30",  # 02:30 CET
        "03-29 01:00",  # no 02:30 that day: at 03:00 CEST, once
        "03-30 00:30",  # 02:30 CEST
        "03-31 00:30"]


def test_spring_forward_collapses_every_slot_of_the_gap_into_one() -> None:
    assert utc_runs("*/20 * * * *", "Europe/Berlin", "2026-03-29 00:30", 5) == [
        "03-29 00:40",  # 01:40 CET
        "03-29 01:00",  # 02:00, 02:20, 02:40 (missing) and 03:00 CEST: one slot
        "03-29 01:20", "03-29 01:40", "03-29 02:00"]


def test_fall_back_runs_a_fixed_time_once() -> None:
    # Berlin, 25 October 2026: 03:00 CEST falls back to 02:00 CET (01:00 UTC); 02:30 is twice.
    assert utc_runs("30 2 * * *", "Europe/Berlin", "2026-10-24 12:00", 3) == [
        "10-25 00:30",  # 02:30 CEST, the first one; not again at 01:30 UTC (02:30 CET)
        "10-26 01:30", "10-27 01:30"]
    # New York, 1 November 2026: 01:30 happens at 05:30 UTC (EDT) and 06:30 UTC (EST).
    assert utc_runs("30 1 * * *", "America/New_York", "2026-10-31 12:00", 2) == [
        "11-01 05:30", "11-02 06:30"]


def test_fall_back_hour_wildcards_follow_the_real_hours() -> None:
    assert utc_runs("30 * * * *", "Europe/Berlin", "2026-10-24 23:00", 4) == [
        "10-24 23:30", "10-25 00:30", "10-25 01:30", "10-25 02:30"]  # 02:30 twice
    assert utc_runs("*/30 * * * *", "America/New_York", "2026-11-01 05:00", 4) == [
        "11-01 05:30", "11-01 06:00", "11-01 06:30", "11-01 07:00"]


@pytest.mark.parametrize(("tz", "start"), [
    ("Europe/Berlin", "2026-03-28 12:00"), ("Europe/Berlin", "2026-10-24 12:00"),
    ("America/New_York", "2026-03-07 12:00"), ("America/New_York", "2026-10-31 12:00"),
    ("Australia/Lord_Howe", "2026-04-04 00:00"),  # a 30-minute shift
    ("America/Santiago", "2026-09-05 00:00"), ("America/Santiago", "2026-04-04 00:00"),  # at 24:00
])
@pytest.mark.parametrize("expr", ["*/15 * * * *", "30 2 * * *", "0 1-3 * * *", "45 * * * *"])
def test_prev_and_next_agree_across_transitions(expr: str, tz: str, start: str) -> None:
    schedule = parse_cron(expr, tz)
    moment = t(start)
    seen: list[datetime] = []
    for _ in range(120):
        slot = schedule.next_after(moment)
        assert slot > moment and slot.second == 0
        assert schedule.prev_at_or_before(slot) == slot
        if seen:  # nothing in between: the slot before is the previous one
            assert schedule.prev_at_or_before(slot - timedelta(seconds=1)) == seen[-1]
        seen.append(slot)
        moment = slot
    assert len(set(seen)) == len(seen)


def test_a_midnight_that_does_not_exist_runs_at_the_end_of_the_gap() -> None:
    # Santiago, 6 September 2026: 24:00 jumps to 01:00 (04:00 UTC); the day has no midnight.
    assert utc_runs("0 0 * * *", "America/Santiago", "2026-09-04 12:00", 3) == [
        "09-05 04:00", "09-06 04:00", "09-07 03:00"]


def test_plan_slot_enqueues_the_gap_slot_once() -> None:
    spec = PeriodicSpec("a:b", parse_cron("30 2 * * *", "Europe/Berlin"))
    plan = plan_slot(spec, t("2026-03-28 01:30"), t("2026-03-29 01:00:05"))
    assert plan is not None and (plan.slot, plan.enqueue) == (t("2026-03-29 01:00"), True)
    assert plan_slot(spec, plan.slot, t("2026-03-29 01:59")) is None


@pytest.mark.parametrize("tz", ["Mars/Olympus", "", "../../etc/passwd", "/usr/share/zoneinfo/UTC",
                                "Europe/" + "x" * 120, 5])
def test_bad_zones_are_refused(tz: object) -> None:
    with pytest.raises(CronError, match=r"^tz: "):
        parse_cron("0 3 * * *", tz)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^a:b: tz: "):
        make_spec("a:b", {"cron": "0 3 * * *", "tz": tz}, "config")


def test_tz_is_for_cron_only() -> None:
    with pytest.raises(ValueError, match="tz: applies to cron schedules only"):
        make_spec("a:b", {"every": "1h", "tz": "Europe/Berlin"}, "config")
    spec = make_spec("a:b", {"cron": "0 3 * * *", "tz": "UTC"}, "config")
    assert spec.schedule.next_after(t("2026-01-01 00:00")) == t("2026-01-01 03:00")


def test_the_decorator_takes_tz() -> None:
    import gochatd
    from gochatd.periodic_jobs.specs import PERIODIC
    from gochatd.worker.registry import REGISTRY

    @gochatd.periodic("30 7 * * mon-fri", job_type="tz:digest_test", tz="Europe/Berlin")
    async def digest(ctx: gochatd.JobContext) -> None: ...

    try:
        spec = next(s for s in PERIODIC.specs() if s.job_type == "tz:digest_test")
        assert spec.schedule.describe() == "cron 30 7 * * mon-fri (Europe/Berlin)"
        assert spec.schedule.next_after(t("2026-12-04 12:00")) == t("2026-12-07 06:30")
    finally:
        PERIODIC.remove("tz:digest_test")
        REGISTRY._specs.pop("tz:digest_test", None)
    with pytest.raises(ValueError, match="tz: unknown time zone 'Berlin'"):
        gochatd.periodic("30 7 * * *", job_type="tz:bad_test", tz="Berlin")
