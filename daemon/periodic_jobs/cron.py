"""Five-field cron expressions, evaluated in UTC or in a time zone (``tz``).

    ┌──────── minute        0-59
    │ ┌────── hour          0-23
    │ │ ┌──── day of month  1-31
    │ │ │ ┌── month         1-12 or jan-dec
    │ │ │ │ ┌ day of week   0-7 or sun-sat (0 and 7 are Sunday)
    * * * * *

Each field is a comma list of ``*``, ``N``, ``A-B``, each optionally ``/STEP``
(``N/STEP`` means ``N-max/STEP``). ``@yearly``, ``@annually``, ``@monthly``, ``@weekly``,
``@daily``, ``@midnight`` and ``@hourly`` stand for their usual expressions.

Day of month and day of week follow Vixie cron: when both are restricted (neither starts
with ``*``), a day matches if *either* does; otherwise it must match both. So
``0 0 13 * 5`` fires on every 13th and on every Friday, while ``0 0 1 * */2`` fires on the
1st when it is a Sunday, Tuesday, Thursday or Saturday.

In a time zone (``parse_cron(expr, "Europe/Berlin")``) the fields match the zone's wall
clock and the slots are UTC instants. Daylight-saving changes follow Vixie cron: a wall time
that does not exist (spring forward) fires once at the first instant after the gap (a 02:30
job runs at 03:00 that day; several times in the gap become that one slot); a wall time that
happens twice (fall back) fires once, at its first occurrence, unless the hour field is a
wildcard (``*``, ``*/2``): such a schedule follows the real hours and fires in both.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
#: A schedule that matches nothing within this many days never matches (29 February recurs
#: within 8 years, also across 2100, which is not a leap year).
_SEARCH_DAYS = 366 * 9


class CronError(ValueError):
    """The expression is not valid cron; the message names the field."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    lo: int
    hi: int
    names: tuple[str, ...] = ()
    name_base: int = 0  # the number of the first name


_FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, _MONTHS, 1),
    _Field("day of week", 0, 7, _DAYS, 0),
)


def _number(text: str, spec: _Field) -> int:
    lowered = text.lower()
    if lowered in spec.names:
        return spec.names.index(lowered) + spec.name_base
    if not (text.isascii() and text.isdigit()):
        raise CronError(f"{spec.name}: {text!r} is not a number")
    value = int(text)
    if not spec.lo <= value <= spec.hi:
        raise CronError(f"{spec.name}: {value} is outside {spec.lo}-{spec.hi}")
    return value


def _parse_field(text: str, spec: _Field) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()) or int(step_text) < 1:
                raise CronError(f"{spec.name}: step {step_text!r} must be a positive integer")
            step = int(step_text)
        if base == "*":
            lo, hi = spec.lo, spec.hi
        elif "-" in base:
            first, _, last = base.partition("-")
            lo, hi = _number(first, spec), _number(last, spec)
            if lo > hi:
                raise CronError(f"{spec.name}: range {base!r} runs backwards")
        elif base:
            lo = _number(base, spec)
            hi = spec.hi if slash else lo
        else:
            raise CronError(f"{spec.name}: empty item in {text!r}")
        values.update(range(lo, hi + 1, step))
    return values


@dataclass(frozen=True)
class CronSchedule:
    """A parsed expression. Times are minute-aligned UTC datetimes."""

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    dom_restricted: bool
    dow_restricted: bool
    #: False when the hour field is a wildcard: it then fires in both runs of a repeated hour.
    hour_restricted: bool = True
    #: None: UTC.
    tz: ZoneInfo | None = None
    _day_minutes: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        minutes = sorted(h * 60 + m for h in self.hours for m in self.minutes)
        object.__setattr__(self, "_day_minutes", tuple(minutes))

    def describe(self) -> str:
        return f"cron {self.expression}" + (f" ({self.tz.key})" if self.tz else "")

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = day.isoweekday() % 7 in self.weekdays
        if self.dom_restricted and self.dow_restricted:
            return dom or dow
        return dom and dow

    def next_after(self, moment: datetime) -> datetime:
        """The first matching minute strictly after ``moment``."""
        if self.tz is not None:
            return _zoned_next(self, self.tz, _utc(moment).replace(second=0, microsecond=0))
        start = _utc(moment).replace(second=0, microsecond=0) + timedelta(minutes=1)
        day = start.date()
        for _ in range(_SEARCH_DAYS):
            if self.day_matches(day):
                floor = start.hour * 60 + start.minute if day == start.date() else 0
                i = bisect.bisect_left(self._day_minutes, floor)
                if i < len(self._day_minutes):
                    return _at(day, self._day_minutes[i])
            day += timedelta(days=1)
        raise CronError(f"{self.expression!r} never fires")

    def prev_at_or_before(self, moment: datetime) -> datetime | None:
        """The last matching minute at or before ``moment`` (None if none in ~9 years)."""
        if self.tz is not None:
            return _zoned_prev(self, self.tz, _utc(moment).replace(second=0, microsecond=0))
        start = _utc(moment).replace(second=0, microsecond=0)
        day = start.date()
        for _ in range(_SEARCH_DAYS):
            if self.day_matches(day):
                ceiling = start.hour * 60 + start.minute if day == start.date() else 1439
                i = bisect.bisect_right(self._day_minutes, ceiling)
                if i > 0:
                    return _at(day, self._day_minutes[i - 1])
            if day == date.min:
                return None
            day -= timedelta(days=1)
        return None


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("cron times need a time zone")
    return moment.astimezone(UTC)


def _at(day: date, minute_of_day: int) -> datetime:
    return datetime.combine(day, time(minute_of_day // 60, minute_of_day % 60), UTC)


def parse_tz(name: object) -> ZoneInfo:
    """An IANA time zone such as ``Europe/Berlin``; ``CronError`` for anything else."""
    if not isinstance(name, str) or not 1 <= len(name) <= 100:
        raise CronError("tz: expected an IANA time zone name such as Europe/Berlin")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        hint = ("expected a name such as Europe/Berlin" if available_timezones()
                else "this system has no time zone database: pip install tzdata")
        raise CronError(f"tz: unknown time zone {name!r} ({hint})") from None


def parse_cron(expression: str, tz: str | None = None) -> CronSchedule:
    """Parse a five-field expression or a macro, evaluated in UTC or in ``tz``; raise
    ``CronError`` naming the bad field."""
    if not isinstance(expression, str):
        raise CronError("expected a string such as '*/5 * * * *'")
    text = " ".join(expression.split())
    expanded = MACROS.get(text.lower(), text)
    parts = expanded.split(" ")
    if len(parts) != 5:
        raise CronError(
            f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}"
        )
    minutes, hours, days, months, weekdays = (
        _parse_field(part, spec) for part, spec in zip(parts, _FIELDS, strict=True)
    )
    schedule = CronSchedule(
        expression=text,
        minutes=frozenset(minutes),
        hours=frozenset(hours),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(d % 7 for d in weekdays),
        dom_restricted=not parts[2].startswith("*"),
        dow_restricted=not parts[4].startswith("*"),
        hour_restricted=not parts[1].startswith("*"),
        tz=None if tz is None else parse_tz(tz),
    )
    schedule.next_after(datetime(2000, 1, 1, tzinfo=UTC))  # refuses "0 0 30 2 *"
    return schedule


# -- in a time zone -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _LocalDay:
    """One day of a zone: its wall-clock midnight (as a UTC-labelled time, for arithmetic),
    the UTC offset at its start and end, and the instant the offset changes, if it does."""

    midnight: datetime
    before: timedelta
    after: timedelta
    change: datetime | None

    def instants(self, minute: int, both_folds: bool) -> list[datetime]:
        """A wall time's UTC instants: one; in a repeated hour two (the first only unless
        ``both_folds``); in a gap, the instant the gap ends."""
        wall = self.midnight + timedelta(minutes=minute)
        if self.change is None:
            return [wall - self.before]
        first, second = wall - self.before, wall - self.after
        first_ok, second_ok = first < self.change, second >= self.change
        if first_ok and second_ok:
            return [first, second] if both_folds else [first]
        if first_ok or second_ok:
            return [first if first_ok else second]
        return [self.change]


@functools.lru_cache(maxsize=1024)
def _local_day(tz: ZoneInfo, day: date) -> _LocalDay:
    start = datetime.combine(day, time(0), tz).utcoffset()
    end = datetime.combine(day + timedelta(days=1), time(0), tz).utcoffset()
    assert start is not None and end is not None
    midnight = datetime.combine(day, time(0), UTC)
    change = None
    if start != end:  # from 3 h before the day's midnight to the next midnight
        change = _offset_change(midnight - start - timedelta(hours=3),
                                midnight + timedelta(days=1) - end, tz, end)
    return _LocalDay(midnight, start, end, change)


def _offset_change(lo: datetime, hi: datetime, tz: ZoneInfo, after: timedelta) -> datetime:
    """The first whole minute after ``lo`` (offset not yet ``after``) at which the zone's
    offset is ``after``, up to ``hi``."""
    steps_lo, steps_hi = 0, int((hi - lo).total_seconds() // 60)
    while steps_hi - steps_lo > 1:
        mid = (steps_lo + steps_hi) // 2
        if (lo + timedelta(minutes=mid)).astimezone(tz).utcoffset() == after:
            steps_hi = mid
        else:
            steps_lo = mid
    return lo + timedelta(minutes=steps_hi)


@functools.lru_cache(maxsize=64)
def _slots(cron: CronSchedule, local: _LocalDay) -> tuple[datetime, ...]:
    """A day with an offset change: its slots as sorted UTC instants."""
    found: set[datetime] = set()
    for minute in cron._day_minutes:
        found.update(local.instants(minute, not cron.hour_restricted))
    return tuple(sorted(found))


def _zoned_next(cron: CronSchedule, tz: ZoneInfo, floor: datetime) -> datetime:
    """The first slot strictly after ``floor`` (a whole UTC minute)."""
    day = floor.astimezone(tz).date()
    for _ in range(_SEARCH_DAYS):
        if cron.day_matches(day):
            local = _local_day(tz, day)
            if local.change is None:  # one offset all day: bisect the minutes
                base = local.midnight - local.before
                key = (floor - base) // timedelta(minutes=1)
                i = bisect.bisect_right(cron._day_minutes, key)
                if i < len(cron._day_minutes):
                    return base + timedelta(minutes=cron._day_minutes[i])
            else:
                slots = _slots(cron, local)
                i = bisect.bisect_right(slots, floor)
                if i < len(slots):
                    return slots[i]
        day += timedelta(days=1)
    raise CronError(f"{cron.expression!r} never fires")


def _zoned_prev(cron: CronSchedule, tz: ZoneInfo, floor: datetime) -> datetime | None:
    """The last slot at or before ``floor`` (a whole UTC minute)."""
    day = floor.astimezone(tz).date()
    for _ in range(_SEARCH_DAYS):
        if cron.day_matches(day):
            local = _local_day(tz, day)
            if local.change is None:
                base = local.midnight - local.before
                key = (floor - base) // timedelta(minutes=1)
                i = bisect.bisect_right(cron._day_minutes, key)
                if i > 0:
                    return base + timedelta(minutes=cron._day_minutes[i - 1])
            else:
                slots = _slots(cron, local)
                i = bisect.bisect_right(slots, floor)
                if i > 0:
                    return slots[i - 1]
        if day == date.min:
            return None
        day -= timedelta(days=1)
    return None
