"""The same job type as tests/support/typed_handlers.py with other options: two daemons
that disagree (tests/e2e/test_job_types.py)."""

from __future__ import annotations

import gochatd
from gochatd.context import JobContext

#: typed_handlers.TYPED, written out: importing that module would register its own handler
#: for the type in this daemon too, and a second function for one type is refused.
TYPED = "e2e:typed"


@gochatd.job(TYPED, queue="other", max_attempts=3)
async def typed(ctx: JobContext) -> None:
    return None
