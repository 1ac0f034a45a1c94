"""``Retry-After``: one reader, one cap, for the HTTP handlers and the outbox webhook."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from gochatd import retry
from gochatd.outbox import webhook
from gochatd.retry import MAX_RETRY_AFTER_S, parse_retry_after
from gochatd.worker import http_handlers

NOW = datetime(2026, 12, 1, 14, 0, tzinfo=UTC)


def test_both_callers_read_it_with_the_one_function() -> None:
    assert http_handlers.parse_retry_after is retry.parse_retry_after
    assert webhook.parse_retry_after is retry.parse_retry_after


def test_seconds_are_taken_and_capped_at_an_hour() -> None:
    assert parse_retry_after("7", NOW) == 7.0
    assert parse_retry_after(" 0 ", NOW) == 0.0
    assert parse_retry_after("3600", NOW) == MAX_RETRY_AFTER_S == 3600.0
    assert parse_retry_after("315360000", NOW) == MAX_RETRY_AFTER_S  # ten years: an hour


def test_dates_are_gmt_with_or_without_a_zone() -> None:
    assert parse_retry_after(format_datetime(NOW + timedelta(seconds=30), usegmt=True), NOW) == 30.0
    assert parse_retry_after("Tue, 01 Dec 2026 14:00:30 GMT", NOW) == 30.0
    assert parse_retry_after("Tue, 01 Dec 2026 14:00:30 -0000", NOW) == 30.0  # no zone: UTC
    assert parse_retry_after("Tue, 01 Dec 2026 16:00:30 +0200", NOW) == 30.0
    assert parse_retry_after("Tue, 01 Dec 2026 13:00:00 GMT", NOW) == 0.0  # past: now
    assert parse_retry_after("Tue, 01 Dec 2036 14:00:00 GMT", NOW) == MAX_RETRY_AFTER_S


@pytest.mark.parametrize("bad", [None, "", "soon", "-5", "1.5", "٣", "Tue, 99 Foo 2026"])
def test_unreadable_values_are_none(bad: str | None) -> None:
    assert parse_retry_after(bad, NOW) is None


def test_without_now_it_uses_the_current_time() -> None:
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=600), usegmt=True)
    got = parse_retry_after(later)
    assert got is not None and 500 < got <= 600
