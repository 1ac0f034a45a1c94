"""A job listing's text search and its page: bounded to the newest ids, an id found
anywhere (docs/operations.md, "Listing jobs")."""

from __future__ import annotations

from typing import Any

from gochatd.model import MAX_ID, Job, JobFilter

#: The largest id a search text may name (bigint).
#: A text search looks at the newest this many ids of a database (docs/operations.md,
#: "Listing jobs"): bounded, whatever the table holds; an id is found anywhere.
SEARCH_WINDOW = 10_000


def search_params(text: str | None) -> dict[str, Any]:
    """A listing's search as the queries take it: ``pattern`` matches the text anywhere, its
    ``%``, ``_`` and ``\\`` literal (``ESCAPE '\\'``); ``search_id`` is the text as an id."""
    if not text:
        return {"pattern": None, "search_id": None, "search_after_id": None}
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    digits = text.strip()
    as_id = int(digits) if digits.isascii() and digits.isdigit() and len(digits) <= 19 else None
    return {"pattern": f"%{escaped}%",
            "search_id": as_id if as_id is not None and as_id <= MAX_ID else None,
            "search_after_id": None}


def page_with(jobs: list[Job], job: Job, flt: JobFilter) -> list[Job]:
    """``jobs`` (one page of ``flt``) with ``job`` too, if it passes the filter and falls
    within the page in its order."""
    matches = ((flt.status is None or job.status is flt.status)
               and flt.queue in (None, job.queue) and flt.tenant_id in (None, job.tenant_id)
               and flt.job_type in (None, job.job_type) and not flt.scheduled)
    after = flt.after_id is None or (job.id < flt.after_id if flt.newest_first
                                     else job.id > flt.after_id)
    if not matches or not after:
        return jobs
    merged = sorted([*jobs, job], key=lambda j: j.id, reverse=flt.newest_first)
    return merged[:flt.limit] if len(jobs) >= flt.limit else merged
