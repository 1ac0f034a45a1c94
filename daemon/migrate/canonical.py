"""One logical row, one byte string: canonical JSON that PostgreSQL and SQLite agree on.

Rows are first decoded from their dialect into neutral Python values (aware UTC datetimes,
parsed JSON, bools), then dumped with sorted keys, no spaces, timestamps as UTC ISO-8601
with microseconds and numbers by value (1, 1.0 and 1e0 are one number). SQLite keeps times as REAL epoch
seconds, whose float64 precision near today is ~0.2 µs: rounding to whole microseconds
recovers exactly what PostgreSQL stores.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from gochatd.migrate.tables import Table

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)

Row = dict[str, Any]


def epoch_to_utc(seconds: float) -> datetime:
    return EPOCH + timedelta(microseconds=round(seconds * 1_000_000))


def utc_to_epoch(value: datetime) -> float:
    return ((value - EPOCH) // _MICRO) / 1_000_000


def _timestamp(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.astimezone(UTC)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_to_utc(float(value))
    raise ValueError(f"not a timestamp: {type(value).__name__}")


def _json_value(value: Any) -> Any:
    if value is None or not isinstance(value, str | bytes):
        return value  # psycopg already parsed jsonb
    return json.loads(value)


def _boolean(value: Any) -> bool | None:
    if value is None:
        return None
    return bool(value)


def decode_row(table: Table, raw: Sequence[Any]) -> Row:
    """A row as read from either dialect (columns in ``table.columns`` order) -> neutral."""
    row: Row = {}
    for column, value in zip(table.columns, raw, strict=True):
        if column in table.timestamps:
            row[column] = _timestamp(value)
        elif column in table.json_columns:
            row[column] = _json_value(value)
        elif column in table.booleans:
            row[column] = _boolean(value)
        else:
            row[column] = value
    return row


def _normalise(value: Any) -> Any:
    """Numbers by value, not by type: jsonb hands 1.5e300 back as a 301-digit integer and
    1e16 as 10000000000000000, where SQLite's JSON text keeps the float. So an integral
    float becomes that exact integer; other floats keep their shortest repr, which both
    dialects agree on (both parse the JSON text with Python's float)."""
    if isinstance(value, float):
        if value.is_integer():
            return int(Decimal(repr(value)))
        return value
    if isinstance(value, datetime):
        return f"{_timestamp(value):%Y-%m-%dT%H:%M:%S.%fZ}"
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    if value is None or isinstance(value, str | int):  # bool is an int
        return value
    raise ValueError(f"no canonical form for {type(value).__name__}")


def canonical_bytes(row: Row) -> bytes:
    """Sorted keys, no spaces, UTC microsecond timestamps, numbers by value; UTF-8."""
    try:
        text = json.dumps(_normalise(row), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise ValueError("NaN and infinities have no canonical form") from None
    return text.encode("utf-8")


def table_digest(rows: Iterable[Row]) -> tuple[int, str]:
    """(count, SHA-256 hex) over rows already in key order, one canonical row per line."""
    digest = hashlib.sha256()
    count = 0
    for row in rows:
        digest.update(canonical_bytes(row))
        digest.update(b"\n")
        count += 1
    return count, digest.hexdigest()
