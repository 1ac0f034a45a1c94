"""A handler whose options say where its jobs run (tests/e2e/test_job_types.py): producers
that do not import it get its queue and max_attempts from what its daemon published."""

from __future__ import annotations

import gochatd
from gochatd.context import JobContext

TYPED = "e2e:typed"


@gochatd.job(TYPED, queue="low", max_attempts=2, timeout_s=30)
async def typed(ctx: JobContext) -> None:
    return None
