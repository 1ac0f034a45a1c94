"""argparse ``type=`` functions shared by the command groups. Each one's ``__name__`` is
what argparse prints in its one-line error ("invalid a job id value: 'x'")."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime

from gochatd.model import MAX_ID


def row_id(minimum: int, name: str) -> Callable[[str], int]:
    """A database id (a PostgreSQL bigint) of at least ``minimum``."""

    def parse(text: str) -> int:
        value = int(text)
        if not minimum <= value <= MAX_ID:
            raise ValueError
        return value

    parse.__name__ = name
    return parse


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise ValueError
    return value


def limit(text: str) -> int:
    """A listing's ``--limit`` (and ``--count``): 1..10000."""
    value = int(text)
    if not 1 <= value <= 10_000:
        raise ValueError
    return value


def nonneg_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError
    return value


def iso_time(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError
    return value


for _fn, _name in ((positive_int, "a positive integer"), (positive_float, "a positive number"),
                   (limit, "an integer in 1..10000"),
                   (nonneg_float, "a non-negative number of seconds"),
                   (iso_time, "an ISO 8601 time with a zone, e.g. 2026-01-01T00:00:00Z")):
    _fn.__name__ = _name  # argparse names the expected type in its one-line error

job_id = row_id(1, "a job id")
after_id = row_id(0, "a job id or 0")


def job_ids(text: str) -> tuple[int, ...]:
    """``--ids 1,2,3``: one or more job ids, comma-separated."""
    ids = tuple(job_id(part) for part in text.split(","))
    if not ids:
        raise ValueError
    return ids


job_ids.__name__ = "a comma-separated list of job ids"
