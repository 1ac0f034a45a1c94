"""Per-attempt history: what both SQL stores share about ``job_attempts`` (migration 0011).

Every way a run ends but completing writes its row in the same transaction as the job's
fenced state change, and only for the rows that change applied (a completed run is the job's
own row while it stays completed: ``list_job_attempts`` reads it from there, so a success
writes nothing here): ``finish_jobs`` (and ``finish_jobs_with_replies``)
and ``reap_expired_leases``. PostgreSQL does it in the same statement (the UPDATE's
``RETURNING`` feeds the INSERT); SQLite runs ``record_job_attempts`` and
``trim_job_attempts`` in the same ``BEGIN IMMEDIATE``. The error recorded is the job row's
own ``last_error``: already redacted and capped by the runner (daemon/obs/redact.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from gochatd.model import AttemptOutcome, Finish, JobAttempt, Outcome
from gochatd.store.queries import load_queries

_SQLITE = load_queries("sqlite")

#: How many attempts a job keeps (its newest, by attempt number); the finish that records a
#: newer one deletes the oldest. Bounds the table at this many rows per job.
ATTEMPTS_KEPT_PER_JOB = 20


def attempt_outcome(finish: Finish) -> AttemptOutcome:
    """How a finish's run ended: the status it writes, or ``interrupted`` (a shutdown's
    write-back, which also goes back to retrying)."""
    if finish.outcome is Outcome.INTERRUPTED:
        return AttemptOutcome.INTERRUPTED
    return AttemptOutcome(finish.status.value)


def applied_attempts(finishes: Sequence[Finish], applied: Iterable[int]) -> list[list[Any]]:
    """``[[job_id, outcome, fence], ...]`` for the finishes of the applied jobs (SQLite's
    ``record_job_attempts``, which keeps only the one whose fence the row holds: a batch
    may carry a stale finish of the same job); a finish's fence is its run's number."""
    ids = set(applied)
    seen: set[tuple[int, int]] = set()
    out: list[list[Any]] = []
    for f in finishes:
        if f.outcome is Outcome.COMPLETED:  # read from the job's row (list_job_attempts)
            continue
        if f.job_id in ids and (f.job_id, f.fence) not in seen:
            seen.add((f.job_id, f.fence))
            out.append([f.job_id, attempt_outcome(f).value, f.fence])
    return out


def attempt_from_row(
    row: Sequence[Any], to_time: Callable[[Any], datetime | None]
) -> JobAttempt:
    """A ``list_job_attempts`` row: attempt, started_at, finished_at, worker, outcome,
    error_class, error."""
    return JobAttempt(
        attempt=int(row[0]), started_at=to_time(row[1]), finished_at=to_time(row[2]),
        worker=row[3], outcome=AttemptOutcome(row[4]), error_class=row[5], error=row[6],
    )


def sqlite_record_attempts(conn: sqlite3.Connection, attempts: list[list[Any]]) -> None:
    """Inside the caller's ``BEGIN IMMEDIATE``, right after its fenced UPDATE: record the
    runs it ended (``[[job_id, outcome, fence], ...]``, of the applied rows) and trim those
    jobs to ``ATTEMPTS_KEPT_PER_JOB``. The trim is skipped while every run's number is
    within the bound (a job's first 20 runs: nearly every finish)."""
    if not attempts:
        return
    batch = json.dumps(attempts)
    conn.execute(_SQLITE["record_job_attempts"], {"attempts": batch})
    if any(a[2] > ATTEMPTS_KEPT_PER_JOB for a in attempts):
        conn.execute(_SQLITE["trim_job_attempts"],
                     {"attempts": batch, "attempts_kept": ATTEMPTS_KEPT_PER_JOB})
