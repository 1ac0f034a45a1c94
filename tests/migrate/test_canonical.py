"""Canonical JSON: the same logical row gives the same bytes from PostgreSQL and SQLite."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from gochatd.migrate.canonical import (
    canonical_bytes,
    decode_row,
    epoch_to_utc,
    table_digest,
    utc_to_epoch,
)
from gochatd.migrate.tables import BACKGROUND_JOBS, PERIODIC_SLOTS, QUEUE_PAUSES

T = datetime(2026, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)


def test_timestamps_from_both_dialects_agree_to_the_microsecond() -> None:
    pg_value = T.astimezone(timezone(timedelta(hours=-7)))  # psycopg may return any offset
    sqlite_value = utc_to_epoch(T)  # REAL epoch seconds
    pg = decode_row(PERIODIC_SLOTS, ("n", pg_value, T))
    lite = decode_row(PERIODIC_SLOTS, ("n", sqlite_value, sqlite_value))
    assert canonical_bytes(pg) == canonical_bytes(lite)
    assert b'"last_slot":"2026-03-04T05:06:07.123456Z"' in canonical_bytes(lite)


@pytest.mark.parametrize("micro", [0, 1, 499_999, 500_000, 999_999])
def test_epoch_round_trip_is_exact_for_every_microsecond(micro: int) -> None:
    for year in (1970, 2026, 2100):
        value = datetime(year, 12, 31, 23, 59, 59, micro, tzinfo=UTC)
        assert epoch_to_utc(utc_to_epoch(value)) == value


def test_sqlite_clock_values_with_float_noise_round_to_the_same_microsecond() -> None:
    noisy = utc_to_epoch(T) + 1e-8  # what julianday arithmetic can leave behind
    assert canonical_bytes({"t": epoch_to_utc(noisy)}) == canonical_bytes({"t": T})


def test_json_text_and_parsed_jsonb_agree_whatever_the_key_order_and_spacing() -> None:
    parsed = {"b": [1, {"y": None, "x": "é"}], "a": True}
    text = '{ "a" : true, "b": [1, {"x": "\\u00e9", "y": null}] }'
    pg = decode_row(BACKGROUND_JOBS, _job(payload=parsed, cancel=False))
    lite = decode_row(BACKGROUND_JOBS, _job(payload=text, cancel=0))
    assert canonical_bytes(pg) == canonical_bytes(lite)


def test_booleans_are_true_false_on_both_dialects() -> None:
    pg = canonical_bytes(decode_row(BACKGROUND_JOBS, _job(payload={}, cancel=True)))
    lite = canonical_bytes(decode_row(BACKGROUND_JOBS, _job(payload="{}", cancel=1)))
    assert pg == lite
    assert b'"cancel_requested":true' in lite


@pytest.mark.parametrize(("jsonb_value", "sqlite_text"), [
    (int("15" + "0" * 299), "1.5e300"),  # jsonb returns big floats as exact integers
    (10_000_000_000_000_000, "1e16"),
    (2**70, "1180591620717411303424"),
    (0.1, "0.1"),
    (3, "3.0"),
    (0, "-0.0"),
    (0.00000025, "2.5e-7"),
    (-1.5, "-1.50"),
    (-12345678901234567, "-12345678901234567"),
])
def test_numbers_compare_by_value(jsonb_value: object, sqlite_text: str) -> None:
    pg = canonical_bytes({"n": jsonb_value})
    lite = canonical_bytes({"n": json.loads(sqlite_text)})
    assert pg == lite
    json.loads(pg)  # still valid JSON


def test_different_values_give_different_bytes() -> None:
    assert canonical_bytes({"n": 2**70}) != canonical_bytes({"n": 2**70 + 1})
    assert canonical_bytes({"n": 0.1}) != canonical_bytes({"n": 0.10000000000000002})
    assert canonical_bytes({"n": 1}) != canonical_bytes({"n": "1"})
    assert canonical_bytes({"n": True}) != canonical_bytes({"n": 1})
    assert canonical_bytes({"t": T}) != canonical_bytes({"t": T + timedelta(microseconds=1)})
    assert canonical_bytes({"s": None}) != canonical_bytes({"s": "null"})


def test_canonical_bytes_are_sorted_compact_utf8() -> None:
    out = canonical_bytes({"b": "🌍", "a": [1, 2.5], "c": {"z": 1, "y": 2}})
    assert out == '{"a":[1,2.5],"b":"🌍","c":{"y":2,"z":1}}'.encode()


def test_nan_has_no_canonical_form() -> None:
    with pytest.raises(ValueError, match="NaN"):
        canonical_bytes({"n": float("nan")})


def test_table_digest_is_sha256_over_ordered_canonical_lines() -> None:
    rows = [decode_row(QUEUE_PAUSES, ("a", T, "ops")), decode_row(QUEUE_PAUSES, ("b", T, ""))]
    count, digest = table_digest(rows)
    expected = hashlib.sha256(b"".join(canonical_bytes(r) + b"\n" for r in rows)).hexdigest()
    assert (count, digest) == (2, expected)
    assert table_digest(reversed(rows))[1] != digest  # order matters
    assert table_digest([]) == (0, hashlib.sha256(b"").hexdigest())


def _job(*, payload: object, cancel: object) -> tuple[object, ...]:
    values: dict[str, object] = {c: None for c in BACKGROUND_JOBS.columns}
    values.update(id=1, tenant_id="t", job_type="x", queue="default", status="queued",
                  priority=0, attempts=0, max_attempts=25, fence=0, payload=payload,
                  cancel_requested=cancel, scheduled_at=T, created_at=T, updated_at=T)
    return tuple(values[c] for c in BACKGROUND_JOBS.columns)
