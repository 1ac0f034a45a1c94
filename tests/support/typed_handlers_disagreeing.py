"""The same job type as tests/support/typed_handlers.py with other options: two daemons
that disagree (tests/e2e/test_job_types.py)."""

from __future__ import annotations

import gochatd
from gochatd.context import JobContext
from tests.support.typed_handlers import TYPED


@gochatd.job(TYPED, queue="other", max_attempts=3)
async def typed(ctx: JobContext) -> None:
    return None
