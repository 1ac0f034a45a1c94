"""The five-field cron parser: fields, lists, ranges, steps, names, macros, Vixie day
semantics, month ends and leap days, all in UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gochatd.periodic_jobs.cron import CronError, parse_cron


def t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def runs(expr: str, start: str, n: int) -> list[str]:
    schedule = parse_cron(expr)
    out, moment = [], t(start)
    for _ in range(n):
        moment = schedule.next_after(moment)
        out.append(moment.strftime("%Y-%m-%d %H:%M %a"))
    return out


@pytest.mark.parametrize(
    ("expr", "start", "expected"),
    [
        ("* * * * *", "2026-01-01 00:00:30", ["2026-01-01 00:01 Thu", "2026-01-01 00:02 Thu"]),
        ("*/5 * * * *", "2026-03-01 10:03", ["2026-03-01 10:05 Sun", "2026-03-01 10:10 Sun"]),
        # strictly after: a time exactly on a slot gives the next one
        ("*/5 * * * *", "2026-03-01 10:05", ["2026-03-01 10:10 Sun", "2026-03-01 10:15 Sun"]),
        ("0 * * * *", "2026-03-01 23:59:59", ["2026-03-02 00:00 Mon", "2026-03-02 01:00 Mon"]),
        ("30 2 * * *", "2026-12-31 03:00", ["2027-01-01 02:30 Fri", "2027-01-02 02:30 Sat"]),
        ("0 0 1 * *", "2026-01-31 12:00", ["2026-02-01 00:00 Sun", "2026-03-01 00:00 Sun"]),
        # day 31 only exists in some months: skips April, June, September, November
        ("0 0 31 * *", "2026-03-31 00:00", ["2026-05-31 00:00 Sun", "2026-07-31 00:00 Fri"]),
        # 29 February: leap years only
        ("0 0 29 2 *", "2026-01-01 00:00", ["2028-02-29 00:00 Tue", "2032-02-29 00:00 Sun"]),
        # 2100 is not a leap year: 2096 -> 2104
        ("0 0 29 2 *", "2096-03-01 00:00", ["2104-02-29 00:00 Fri"]),
        ("0 12 * * 1-5", "2026-12-04 13:00", ["2026-12-07 12:00 Mon", "2026-12-08 12:00 Tue"]),
        ("0 12 * * mon-fri", "2026-12-05 00:00", ["2026-12-07 12:00 Mon"]),
        # 0 and 7 are both Sunday
        ("0 0 * * 7", "2026-12-01 00:00", ["2026-12-06 00:00 Sun", "2026-12-13 00:00 Sun"]),
        ("0 0 * * 0", "2026-12-01 00:00", ["2026-12-06 00:00 Sun"]),
        ("0 0 * * sun", "2026-12-01 00:00", ["2026-12-06 00:00 Sun"]),
        ("15,45 8-9 * * *", "2026-06-01 08:20",
         ["2026-06-01 08:45 Mon", "2026-06-01 09:15 Mon", "2026-06-01 09:45 Mon",
          "2026-06-02 08:15 Tue"]),
        ("0 0-23/6 * * *", "2026-06-01 01:00", ["2026-06-01 06:00 Mon", "2026-06-01 12:00 Mon"]),
        # N/STEP means N-max/STEP
        ("50/5 * * * *", "2026-06-01 00:00", ["2026-06-01 00:50 Mon", "2026-06-01 00:55 Mon",
                                              "2026-06-01 01:50 Mon"]),
        ("0 0 1 jan,jul *", "2026-02-01 00:00", ["2026-07-01 00:00 Wed", "2027-01-01 00:00 Fri"]),
        ("0 0 1 JAN *", "2026-02-01 00:00", ["2027-01-01 00:00 Fri"]),
        # Vixie OR: the 13th, or any Friday
        ("0 0 13 * 5", "2026-11-01 00:00",
         ["2026-11-06 00:00 Fri", "2026-11-13 00:00 Fri", "2026-11-20 00:00 Fri"]),
        ("0 0 13 * 5", "2026-12-10 00:00", ["2026-12-11 00:00 Fri", "2026-12-13 00:00 Sun"]),
        # a field starting with "*" makes it AND: the 1st, when a Sun/Tue/Thu/Sat
        ("0 0 1 * */2", "2026-01-01 00:00", ["2026-02-01 00:00 Sun", "2026-03-01 00:00 Sun"]),
        ("0 0 1 * */2", "2026-03-01 00:00", ["2026-08-01 00:00 Sat", "2026-09-01 00:00 Tue"]),
        # "*" in both: every day
        ("0 0 * * *", "2026-02-28 00:00", ["2026-03-01 00:00 Sun"]),
        ("@hourly", "2026-06-01 00:00", ["2026-06-01 01:00 Mon"]),
        ("@daily", "2026-06-01 00:00", ["2026-06-02 00:00 Tue"]),
        ("@midnight", "2026-06-01 00:00", ["2026-06-02 00:00 Tue"]),
        ("@weekly", "2026-06-01 00:00", ["2026-06-07 00:00 Sun"]),
        ("@monthly", "2026-06-15 00:00", ["2026-07-01 00:00 Wed"]),
        ("@yearly", "2026-06-15 00:00", ["2027-01-01 00:00 Fri"]),
        ("@annually", "2026-06-15 00:00", ["2027-01-01 00:00 Fri"]),
        ("59 23 31 12 *", "2026-12-31 23:59", ["2027-12-31 23:59 Fri"]),
    ],
)
def test_next_runs(expr: str, start: str, expected: list[str]) -> None:
    assert runs(expr, start, len(expected)) == expected


@pytest.mark.parametrize(
    ("expr", "moment", "expected"),
    [
        ("*/5 * * * *", "2026-03-01 10:07:59", "2026-03-01 10:05"),
        ("*/5 * * * *", "2026-03-01 10:05:00", "2026-03-01 10:05"),  # at or before
        ("0 0 1 * *", "2026-03-01 00:00:00", "2026-03-01 00:00"),
        ("0 0 1 * *", "2026-02-28 23:59:59", "2026-02-01 00:00"),
        ("0 0 31 * *", "2026-05-01 00:00", "2026-03-31 00:00"),
        ("30 2 * * *", "2027-01-01 02:29", "2026-12-31 02:30"),
        ("0 0 29 2 *", "2031-01-01 00:00", "2028-02-29 00:00"),
        ("@yearly", "2026-12-01 14:00", "2026-01-01 00:00"),
        ("0 12 * * mon", "2026-12-06 23:00", "2026-11-30 12:00"),
    ],
)
def test_prev_at_or_before(expr: str, moment: str, expected: str) -> None:
    prev = parse_cron(expr).prev_at_or_before(t(moment))
    assert prev == t(expected)


def test_prev_and_next_agree_over_a_year() -> None:
    """next_after(prev(x)) is the first slot after x's slot, for every hour of a year."""
    schedule = parse_cron("7,37 */3 1-10,20 * mon,thu")
    moment = t("2026-01-01 00:00")
    for _ in range(24 * 366):
        prev = schedule.prev_at_or_before(moment)
        nxt = schedule.next_after(moment)
        assert prev is not None and prev <= moment < nxt
        assert schedule.next_after(prev) == nxt
        moment += timedelta(hours=1)


def test_non_utc_input_is_converted() -> None:
    schedule = parse_cron("0 0 * * *")
    from datetime import timezone

    plus2 = datetime(2026, 6, 1, 1, 0, tzinfo=timezone(timedelta(hours=2)))  # 23:00 UTC
    assert schedule.next_after(plus2) == t("2026-06-01 00:00")
    assert schedule.next_after(plus2).tzinfo is UTC


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="time zone"):
        parse_cron("* * * * *").next_after(datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("* * * *", "expected 5 fields"),
        ("* * * * * *", "expected 5 fields"),
        ("", "expected 5 fields"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* 24 * * *", "hour: 24 is outside 0-23"),
        ("* * 0 * *", "day of month: 0 is outside 1-31"),
        ("* * 32 * *", "day of month: 32"),
        ("* * * 13 *", "month: 13"),
        ("* * * * 8", "day of week: 8"),
        ("*/0 * * * *", "step '0' must be a positive integer"),
        ("*/x * * * *", "step 'x'"),
        ("5-1 * * * *", "runs backwards"),
        ("1,,2 * * * *", "empty item"),
        ("a * * * *", "minute: 'a' is not a number"),
        ("* * * foo *", "month: 'foo'"),
        ("* * * * funday", "day of week: 'funday'"),
        ("-1 * * * *", "minute"),
        ("0 0 30 2 *", "never fires"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("@reboot", "expected 5 fields"),
    ],
)
def test_bad_expressions_name_the_field(expr: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        parse_cron(expr)


def test_whitespace_is_normalised() -> None:
    assert parse_cron("  */5   *  * * *\t").expression == "*/5 * * * *"
    assert parse_cron("*/5 * * * *").describe() == "cron */5 * * * *"
