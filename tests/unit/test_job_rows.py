"""store/rows.py builds a ``Job`` positionally from a row of ``JOB_COLUMNS``: the two orders
must stay the same, and each dialect's row decodes to the same job."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from gochatd.model import Job, JobStatus
from gochatd.store.queries import JOB_COLUMNS
from gochatd.store.rows import epoch_to_datetime, job_from_row


def test_job_fields_follow_the_row_columns() -> None:
    assert tuple(f.name for f in dataclasses.fields(Job))[:len(JOB_COLUMNS)] == JOB_COLUMNS


def test_both_dialects_rows_decode_to_the_same_job() -> None:
    at = datetime(2026, 12, 6, 12, 0, 0, 250000, tzinfo=UTC)
    pg = (7, "acme", "x:y", "high", {"a": [1, "é"]}, "running", 2, 1, 25, at, at, at, 3, "k",
          "w1", at, at, None, None, None, None, at, None, True)
    lite = tuple(v.timestamp() if isinstance(v, datetime) else v for v in pg)
    lite = (*lite[:4], '{"a": [1, "é"]}', *lite[5:23], 1)
    job = job_from_row(pg)
    assert job == job_from_row(lite, epoch_to_datetime)
    assert (job.id, job.status, job.payload, job.cancel_requested, job.locked_at) == (
        7, JobStatus.RUNNING, {"a": [1, "é"]}, True, at)
    # A get_job row has the result after the job's columns: not part of the job itself.
    assert job_from_row((*pg, '{"r": 1}')) == job
